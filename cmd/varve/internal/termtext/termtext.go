// Package termtext makes text that the CLI did not write itself (stream
// ids, event types and data, checkpoint names, the errors a webhook or a
// server sent back) safe to print on a terminal.
//
// A terminal acts on control characters: ESC starts sequences that set the
// clipboard (OSC 52), retitle the window or move the cursor over rows
// already printed; CR and backspace overwrite a line; a tab or a newline
// breaks a table. Unicode format characters (the bidi overrides and
// isolates, zero-width characters) reorder or hide text, so a row can show
// what it does not hold. Escape replaces each such character, and each
// byte of invalid UTF-8, with a visible escape. The escaped text is for
// reading: it is not a reversible encoding (a backslash is left as it is),
// and --json prints the exact text.
//
// The functions are pure and safe for concurrent use.
package termtext

import (
	"io"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Escape returns s with every character a terminal may act on replaced by
// a visible escape: the C0 controls and DEL as \xHH (\t, \n and \r by
// name), every other character that is not graphic (the C1 controls
// U+0080-U+009F, format characters such as U+202E and U+200B, line and
// paragraph separators, private-use and unassigned code points) as \uHHHH
// or \UHHHHHHHH, and each byte of invalid UTF-8 as \xHH. Letters, marks,
// numbers, punctuation, symbols and spaces of every script pass unchanged.
func Escape(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = appendHex(b, `\x`, uint32(s[i]), 2)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20 || r == 0x7f:
			b = appendHex(b, `\x`, uint32(r), 2)
		case unsafe(r):
			b = appendRune(b, r)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// JSON returns the JSON text js with every character that Escape would
// escape and that stands raw in its strings (encoding/json escapes the C0
// controls but writes DEL, the C1 controls and format characters as they
// are) written as a JSON escape (\u007f, \u009b, \u202e): the same JSON
// value, safe on a terminal. Invalid UTF-8 is left as it is: it has no
// JSON escape, and encoding/json writes none but from a json.RawMessage.
func JSON(js []byte) []byte {
	i := 0
	for i < len(js) && js[i] < 0x7f {
		i++
	}
	if i == len(js) {
		return js
	}
	out := make([]byte, 0, len(js)+16)
	out = append(out, js[:i]...)
	for i < len(js) {
		r, size := utf8.DecodeRune(js[i:])
		if r >= 0x7f && unsafe(r) && !(r == utf8.RuneError && size == 1) {
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				out = appendHex(appendHex(out, `\u`, uint32(hi), 4), `\u`, uint32(lo), 4)
			} else {
				out = appendHex(out, `\u`, uint32(r), 4)
			}
		} else {
			out = append(out, js[i:i+size]...)
		}
		i += size
	}
	return out
}

// unsafe reports whether a valid rune must be escaped.
func unsafe(r rune) bool { return !unicode.IsGraphic(r) }

func appendRune(b []byte, r rune) []byte {
	if r > 0xffff {
		return appendHex(b, `\U`, uint32(r), 8)
	}
	return appendHex(b, `\u`, uint32(r), 4)
}

func appendHex(b []byte, prefix string, v uint32, width int) []byte {
	b = append(b, prefix...)
	h := strconv.FormatUint(uint64(v), 16)
	for range width - len(h) {
		b = append(b, '0')
	}
	return append(b, h...)
}

// JSONWriter returns a writer that writes JSON(p) to w for each p, and
// reports p as written when w took all of JSON(p). Each p must hold whole
// characters, as it does from a json.Encoder, which writes a value in one
// call.
func JSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
