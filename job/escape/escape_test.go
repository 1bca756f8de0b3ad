package escape

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestPrintable(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain text, spaces, arrows and dashes stay":      {"smt-azure.susecloud.net → 20.1.2.3 — ok", "smt-azure.susecloud.net → 20.1.2.3 — ok"},
		"ESC cursor up and erase line":                    {"x\x1b[1A\x1b[2KRegistered: fine", `x\x1b[1A\x1b[2KRegistered: fine`},
		"OSC 52 clipboard write, BEL-terminated":          {"\x1b]52;c;Y3VybCBldmlsfHNo\x07", `\x1b]52;c;Y3VybCBldmlsfHNo\a`},
		"8-bit CSI (C1) as UTF-8":                         {"a\u009b2Jb", `a\u009b2Jb`},
		"newline and carriage return cannot forge a line": {"note\r\nRegistered: ok", `note\r\nRegistered: ok`},
		"DEL":                      {"a\x7fb", `a\x7fb`},
		"bidi override":            {"abc\u202edcba", `abc\u202edcba`},
		"bytes that are not UTF-8": {"a\xff\xc3b", `a\xff\xc3b`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Printable(tc.in)
			assert.Equal(t, tc.want, got)
			for _, r := range got {
				assert.False(t, r < 0x20 || (r >= 0x7f && r <= 0x9f), "control character %U left in %q", r, got)
			}
		})
	}
}

// TestRecord: redacted, then escaped, then cut: the secret goes even when
// it sits next to a control character, and the cut never leaves a record
// over the limit or half a rune.
func TestRecord(t *testing.T) {
	redact := func(s string) string { return strings.ReplaceAll(s, "SECRET", "REDACTED") }
	assert.Equal(t, `a\x1bREDACTED\u202e`, Record("a\x1bSECRET\u202e", redact, 100))
	assert.Equal(t, "plain", Record("plain", nil, 100))
	got := Record(strings.Repeat("é", 100)+"\x1b", redact, 64)
	assert.LessOrEqual(t, len(got), 64)
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasSuffix(got, "..."))
	assert.Equal(t, `\x1...`, Record("\x1b[2J", nil, 6), "the escape's output counts toward the limit")
}

// TestShell: a value pasted in a suggested command stays one word.
func TestShell(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"a host list":            {"localhost,.svc,smt-azure.susecloud.net", "localhost,.svc,smt-azure.susecloud.net"},
		"a CIDR and a port":      {"10.0.0.0/8,example.com:443", "10.0.0.0/8,example.com:443"},
		"empty":                  {"", "''"},
		"command substitution":   {"a$(touch x)", "'a$(touch x)'"},
		"a single quote":         {"a'b", `'a'\''b'`},
		"a semicolon, a space":   {"a; touch x", "'a; touch x'"},
		"zsh's =cmd":             {"=ls", "'=ls'"},
		"a wildcard and a tilde": {"*,~", "'*,~'"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, Shell(tc.in)) })
	}
}
