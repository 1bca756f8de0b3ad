// Package escape makes foreign text safe to show: to a terminal, to
// `kubectl describe`, to a JSON reader that prints what it reads. Text the
// engine did not write (an Event note quoting the operator's message, a
// peer's error, a Lease holder, a Secret's URL) may carry ESC/CSI/OSC
// sequences, C1 controls, DEL or bidi overrides, which a terminal acts on:
// a cursor move overwrites a line, an OSC 52 fills the clipboard, a bidi
// override shows a name reversed. Every place that shows or stores such
// text for people passes it through this package: status's text and JSON
// reports, and Record for everything the engine records (the Event
// recorder in job/kube, the run record and the recovery record on its
// Lease). Shell quotes a foreign value inside a command the engine
// suggests to a person. One owner, so that every output escapes the same
// characters.
package escape

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Printable returns s with every character a terminal could act on escaped
// as Go writes it in a string literal: C0 and C1 controls (ESC, CSI, OSC
// and their 8-bit forms; newlines and carriage returns too, so a foreign
// string cannot forge a line), DEL, format characters (bidi overrides),
// and bytes that are not UTF-8 as \xNN. Printable text, spaces included,
// is left as it is.
func Printable(s string) string {
	if clean(s) {
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

// JSON returns an encoded JSON document with every character that is not
// printable written as a \uXXXX escape (a surrogate pair above U+FFFF):
// encoding/json escapes C0 controls, U+2028 and U+2029 and replaces bytes
// that are not UTF-8, but writes C1 controls (the 8-bit CSI U+009B), DEL
// and bidi overrides raw, and a person piping the report to a terminal
// would have them acted on. A JSON reader decodes the escapes to the same
// strings. Outside strings a JSON document is ASCII, so only strings change.
func JSON(doc []byte) []byte {
	out := make([]byte, 0, len(doc)+16)
	for i := 0; i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		switch {
		case r < utf8.RuneSelf && r != 0x7f, printable(r):
			// ASCII (encoding/json escaped its controls; newlines and
			// indentation between values stay), and printable text.
			out = append(out, doc[i:i+size]...)
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\ufffd`)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// clean reports whether s has nothing to escape.
func clean(s string) bool {
	for _, r := range s {
		if !printable(r) {
			return false
		}
	}
	return true
}

func printable(r rune) bool {
	return r == ' ' || (unicode.IsPrint(r) && r != utf8.RuneError)
}

// Shell returns s as one word a POSIX shell reads back as s and nothing
// else: as it is when every character is one a shell gives no meaning to
// (letters, digits and _ - . , : / @ % + =), else between single quotes,
// a single quote in s closing the quotes, escaped with a backslash, and
// reopening them. For a value the engine did not choose (a
// Deployment's NO_PROXY) inside a command it suggests to a person: pasted
// into a shell, the command runs with that person's credentials, and a
// `$(…)`, a backquote, a ; or a newline in the value must stay text.
func Shell(s string) string {
	// zsh expands a word that starts with = (=cmd is cmd's path).
	if s != "" && s[0] != '=' && strings.Trim(s, shellSafe) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellSafe are the characters a shell gives no meaning to in a word.
const shellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@%+="

// Record returns s as the engine keeps a foreign text in what it records
// for people (an Event's note, the run record and the recovery record on
// its Lease): redacted by redact (nil: as it is), then escaped
// (Printable), then cut to at most limit bytes on a rune boundary, ending in
// "..." when cut. The order matters: an escape would hide a secret's form
// from the redaction, and a cut before the escape could leave a record
// longer than max. One function for every sink, so that each record keeps
// the same characters and says the same about a cut.
func Record(s string, redact func(string) string, limit int) string {
	if redact != nil {
		s = redact(s)
	}
	s = Printable(s)
	if len(s) <= limit {
		return s
	}
	const more = "..."
	n := max(limit-len(more), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + more
}
