package postgres

import (
	"fmt"
	"strconv"
	"strings"
)

// Placeholders of the embedded migrations.
const (
	schemaPlaceholder = "__SCHEMA__" // the schema, as a quoted identifier
	seedPlaceholder   = "__SEED__"   // the seed of the schema's advisory lock keys
)

// expander fills the placeholders of a migration so that the schema name
// is always read back as exactly that name, whatever it holds: each
// placeholder is written for the place it stands in. In SQL text it is the
// quoted identifier; inside a string literal ('__SCHEMA__.event_seq', read
// later as a regclass) the quoted identifier with the literal's quotes
// doubled; inside a dollar-quoted body (a function's) the body is expanded
// by the same rules and then closed by a tag that does not occur in it.
// Comments are copied as they are: a name with a line break would end a
// -- comment. A placeholder inside a quoted identifier or a literal with a
// prefix (E'x', U&'x', ...) is refused, as no migration needs one.
type expander struct {
	ident string // the quoted identifier of the schema
	seed  string
}

func newExpander(quoted string, seed int64) expander {
	return expander{ident: quoted, seed: strconv.FormatInt(seed, 10)}
}

func (x expander) fill(s string) string {
	return strings.NewReplacer(schemaPlaceholder, x.ident, seedPlaceholder, x.seed).Replace(s)
}

func hasPlaceholder(s string) bool {
	return strings.Contains(s, schemaPlaceholder) || strings.Contains(s, seedPlaceholder)
}

// identByte reports whether c may continue an unquoted identifier (bytes
// of multi-byte characters count, as in PostgreSQL's lexer).
func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// expand returns the migration text with its placeholders filled.
func (x expander) expand(s string) (string, error) {
	var out strings.Builder
	out.Grow(len(s) + 256)
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "--"):
			j := strings.IndexByte(rest, '\n')
			if j < 0 {
				j = len(rest) - 1
			}
			out.WriteString(rest[:j+1])
			i += j + 1
		case strings.HasPrefix(rest, "/*"):
			n, err := blockComment(rest)
			if err != nil {
				return "", err
			}
			out.WriteString(rest[:n])
			i += n
		case rest[0] == '\'':
			if i > 0 && (s[i-1] == 'E' || s[i-1] == 'e') && (i == 1 || !identByte(s[i-2])) {
				return "", fmt.Errorf("escape string literal at byte %d: not supported in migrations", i)
			}
			n, err := quoted(rest, '\'')
			if err != nil {
				return "", err
			}
			body := rest[1 : n-1]
			if hasPlaceholder(body) {
				if i > 0 && (identByte(s[i-1]) || s[i-1] == '&') {
					return "", fmt.Errorf("placeholder in a prefixed string literal at byte %d", i)
				}
				body = strings.ReplaceAll(x.fill(strings.ReplaceAll(body, "''", "'")), "'", "''")
			}
			out.WriteString("'" + body + "'")
			i += n
		case rest[0] == '"':
			n, err := quoted(rest, '"')
			if err != nil {
				return "", err
			}
			if hasPlaceholder(rest[:n]) {
				return "", fmt.Errorf("placeholder in a quoted identifier at byte %d", i)
			}
			out.WriteString(rest[:n])
			i += n
		case rest[0] == '$' && (i == 0 || !identByte(s[i-1])):
			tag, ok := dollarTag(rest)
			if !ok { // a parameter such as $1
				out.WriteByte('$')
				i++
				continue
			}
			end := strings.Index(rest[len(tag):], tag)
			if end < 0 {
				return "", fmt.Errorf("unterminated dollar quote %s at byte %d", tag, i)
			}
			body, err := x.expand(rest[len(tag) : len(tag)+end])
			if err != nil {
				return "", err
			}
			t := closingTag(tag, body)
			out.WriteString(t + body + t)
			i += 2*len(tag) + end
		case strings.HasPrefix(rest, schemaPlaceholder):
			out.WriteString(x.ident)
			i += len(schemaPlaceholder)
		case strings.HasPrefix(rest, seedPlaceholder):
			out.WriteString(x.seed)
			i += len(seedPlaceholder)
		default:
			out.WriteByte(rest[0])
			i++
		}
	}
	return out.String(), nil
}

// blockComment returns the length of the /* */ comment that s starts with;
// PostgreSQL's block comments nest.
func blockComment(s string) (int, error) {
	depth := 0
	for i := 0; i+1 < len(s); i++ {
		switch {
		case s[i] == '/' && s[i+1] == '*':
			depth++
			i++
		case s[i] == '*' && s[i+1] == '/':
			depth--
			i++
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated /* comment")
}

// quoted returns the length of the literal or quoted identifier that s
// starts with; its quote character is doubled inside.
func quoted(s string, q byte) (int, error) {
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			i++
			continue
		}
		return i + 1, nil
	}
	return 0, fmt.Errorf("unterminated %c quote", q)
}

// dollarTag returns the dollar-quote tag ($$ or $name$) that s starts with.
func dollarTag(s string) (string, bool) {
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			return s[:i+1], true
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || i > 1 && c >= '0' && c <= '9':
		default:
			return "", false
		}
	}
	return "", false
}

// closingTag returns tag, or a tag of its own when the body holds tag (a
// schema name with "$$" in it) or ends with a beginning of it, so that the
// body's end is where it was meant to be.
func closingTag(tag, body string) string {
	t := tag
	for n := 0; strings.Index(body+t, t) != len(body); n++ {
		t = "$varve" + strconv.Itoa(n) + "$"
	}
	return t
}
