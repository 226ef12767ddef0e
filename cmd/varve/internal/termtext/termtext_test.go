package termtext

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "order-1", "order-1"},
		{"empty", "", ""},
		{"other scripts and emoji", "заказ-1 注文 ✓ 🚀 é", "заказ-1 注文 ✓ 🚀 é"},
		{"backslash stays", `a\x1b`, `a\x1b`},
		{"OSC 52", "\x1b]52;c;cHduZWQ=\x07", `\x1b]52;c;cHduZWQ=\x07`},
		{"CSI", "\x1b[2J\x1b[Hx", `\x1b[2J\x1b[Hx`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 range", "\u0080\u009f", `\u0080\u009f`},
		{"CR, tab, newline", "ok\rEVIL\tcol\nrow", `ok\rEVIL\tcol\nrow`},
		{"backspace, DEL, NUL", "ab\b\x7f\x00", `ab\x08\x7f\x00`},
		{"bidi override", "user\u202eexe.txt", `user\u202eexe.txt`},
		{"bidi embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"marks and zero widths", "a\u200eb\u200fc\u061cd\u200be\ufefff", `a\u200eb\u200fc\u061cd\u200be\ufefff`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"tag character", "\U000e0041", `\U000e0041`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"C1 CSI byte alone", "\x9b31m", `\x9b31m`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Escape(c.in); got != c.want {
				t.Fatalf("Escape(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// FuzzEscape: whatever the input, the output is valid UTF-8 without a
// control or format character, and text of graphic characters is kept.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"x", "\x1b]52;c;x\x07", "\u202e", "\xff", "a\tb\nc", "🚀\u200d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: invalid UTF-8", s, got)
		}
		for _, r := range got {
			if !unicode.IsGraphic(r) {
				t.Fatalf("Escape(%q) = %q holds %U", s, got, r)
			}
		}
		if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) }) < 0 && utf8.ValidString(s) && got != s {
			t.Fatalf("Escape(%q) = %q changed graphic text", s, got)
		}
	})
}

// TestJSON: the JSON text keeps its value and loses its raw C1 and format
// characters.
func TestJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		raw  string // JSON text of v; empty: json.Marshal(v)
	}{
		{"plain", map[string]string{"a": "b"}, ""},
		{"C1 and bidi in a key and a value", map[string]string{"k\u009b": "x\u202ey\u2066"}, ""},
		{"beyond the BMP", []string{"\U000e0041 \U0001f680"}, ""},
		{"C0 escaped by encoding/json, DEL not", []string{"\x1b]52;c;x\x07\r\n\t\x7f"}, ""},
		{"raw message", json.RawMessage("{\"d\":\"\u009b\u202e\"}"), "{\"d\":\"\u009b\u202e\"}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			js := []byte(c.raw)
			if c.raw == "" {
				var err error
				if js, err = json.Marshal(c.v); err != nil {
					t.Fatal(err)
				}
			}
			got := JSON(js)
			for _, r := range string(got) {
				if !unicode.IsGraphic(r) {
					t.Fatalf("JSON(%s) = %s holds %U", js, got, r)
				}
			}
			var want, back any
			if err := json.Unmarshal(js, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("JSON(%s) = %s: %v", js, got, err)
			}
			if !reflect.DeepEqual(want, back) {
				t.Fatalf("JSON(%s) = %s decodes to %#v, want %#v", js, got, back, want)
			}
		})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(JSONWriter(&b))
	if err := enc.Encode("a\u202eb"); err != nil || b.String() != "\"a\\u202eb\"\n" {
		t.Fatalf("through JSONWriter: %q %v", b.String(), err)
	}
}
