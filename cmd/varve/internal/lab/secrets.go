package lab

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/varve-go/varve/internal/redact"
)

// The lab keeps the secrets of every URL it was given (passwords, tokens,
// credential parameters) and masks them in every error text it prints or
// reports, whatever library wrote that text: a second line of defence
// behind redact.URL, for drivers that put a URL or a password into their
// errors.
var secrets struct {
	mu   sync.Mutex
	list []string
}

// RegisterSecrets remembers the secrets of raw, a URL or DSN the user gave.
func RegisterSecrets(raw string) {
	var found []string
	add := func(s string) {
		if len(s) >= 3 { // shorter ones would mask ordinary words
			found = append(found, s)
			if u, err := url.QueryUnescape(s); err == nil && u != s {
				found = append(found, u)
			}
			if e := url.QueryEscape(s); e != s {
				found = append(found, e)
			}
		}
	}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		authority := rest
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			user, pass, hasPass := strings.Cut(authority[:at], ":")
			if hasPass {
				add(pass)
			} else if !strings.HasPrefix(strings.ToLower(raw), "postgres") {
				add(user) // nats://TOKEN@host
			}
		}
	}
	if _, query, ok := strings.Cut(raw, "?"); ok {
		for _, pair := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
			k, v, _ := strings.Cut(pair, "=")
			if redact.URL("x://h/?"+k+"=v") != "x://h/?"+k+"=v" {
				add(v)
			}
		}
	}
	for _, m := range dsnPassword.FindAllStringSubmatch(raw, -1) {
		add(strings.Trim(m[1], "'"))
	}
	if len(found) == 0 {
		return
	}
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	for _, s := range found {
		if !slices.Contains(secrets.list, s) {
			secrets.list = append(secrets.list, s)
		}
	}
	// Longest first, so that a secret that contains another is masked whole.
	slices.SortFunc(secrets.list, func(a, b string) int { return len(b) - len(a) })
}

var dsnPassword = regexp.MustCompile(`(?i)password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)`)

// urlInText finds URLs inside error texts.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// Scrub masks every registered secret in s and redacts the URLs in it.
func Scrub(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, func(u string) string {
		trail := strings.TrimRight(u, ".,;:)]")
		return redact.URL(trail) + u[len(trail):]
	})
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	for _, sec := range secrets.list {
		s = strings.ReplaceAll(s, sec, redact.Mask)
	}
	return s
}

// scrubbed is an error whose text is scrubbed; errors.Is and errors.As
// still see the error it wraps.
type scrubbed struct{ err error }

func (e scrubbed) Error() string { return Scrub(e.err.Error()) }
func (e scrubbed) Unwrap() error { return e.err }

func scrubErr(err error) error {
	if err == nil {
		return nil
	}
	return scrubbed{err}
}

// ScrubErr returns err with its text scrubbed.
func ScrubErr(err error) error { return scrubErr(err) }
