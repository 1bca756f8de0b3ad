package azure

import (
	"crypto/sha3"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// URN is the Marketplace plan as the engine hashes it into the nonce and
// sends it as "offer": publisher:offer:plan, no version. The update server
// recomputes the nonce from it, so the format must stay byte-identical to
// the Python reference engine.
func URN(publisher, offer, plan string) string { return publisher + ":" + offer + ":" + plan }

// Nonce derives the attested-document nonce from the plan URN: the first 32
// characters of the URL-safe base64 of SHA3-256(urn). IMDS accepts at most
// 32 characters; the standard alphabet would put '+' and '/' in a query
// string. The update server recomputes it, which is what binds the
// Marketplace plan (checked through ARM) to the signed VM document.
func Nonce(urn string) string {
	sum := sha3.Sum256([]byte(urn))
	return base64.URLEncoding.EncodeToString(sum[:])[:32]
}

// InstanceData is the instanceData the update server verifies:
//
//	<document>{"subscriptionId": "…", "attestedData": {"signature": "…"}, "offer": "urn"}</document>
//
// byte-for-byte what the Python reference engine produces with json.dumps
// (key order as written, separators ", " and ": ", non-ASCII escaped). It is
// JSON inside one tag, not XML. It carries a signed identity document:
// never log it.
func InstanceData(subscriptionID, signature, urn string) string {
	var b strings.Builder
	b.WriteString(`<document>{"subscriptionId": `)
	writePythonString(&b, subscriptionID)
	b.WriteString(`, "attestedData": {"signature": `)
	writePythonString(&b, signature)
	b.WriteString(`}, "offer": `)
	writePythonString(&b, urn)
	b.WriteString(`}</document>`)
	return b.String()
}

// writePythonString writes s as Python's json.dumps (ensure_ascii=True)
// does: the short escapes for " \ \n \r \t \b \f, \u00xx for the other
// control characters and DEL, \uxxxx (surrogate pairs beyond the BMP, lower
// case hex) for everything outside printable ASCII. Unlike encoding/json it
// leaves <, > and & alone. Invalid UTF-8 becomes U+FFFD.
func writePythonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}
