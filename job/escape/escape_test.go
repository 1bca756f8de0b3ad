package escape

import (
	"testing"

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
