package status

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s with every character a terminal could act on escaped
// as Go writes it in a string literal: C0 and C1 controls (ESC, CSI, OSC
// and their 8-bit forms; newlines and carriage returns too, so a foreign
// string cannot forge a line), DEL, format characters (bidi overrides),
// and bytes that are not UTF-8 as \xNN. Everything status prints as text
// passes through it: Event notes, the Lease holder, the Secret's URL, the
// operator's message come from whoever could write them (anyone with
// create on events in the namespace can forge an Event), and a cursor move
// could overwrite the verdict, an OSC 52 fill the clipboard. Printable
// text, spaces included, is left as it is.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if !printable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case printable(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

func printable(r rune) bool {
	return r == ' ' || (unicode.IsPrint(r) && r != utf8.RuneError)
}
