package azure

import (
	"encoding/base64"
	"strings"
	"testing"
)

// BenchmarkNonceAndDocument is the CPU cost of what phase 2 adds around the
// IMDS call: hashing the plan URN into the nonce and packaging the signed
// document as the update server expects it. The signature is the size of a
// real IMDS attested signature (base64 PKCS#7 with the signing certificate,
// about 4 KiB), so B/op shows what one run allocates for the document.
//
//	go test -run '^$' -bench NonceAndDocument -benchmem ./providers/azure/
func BenchmarkNonceAndDocument(b *testing.B) {
	raw := make([]byte, 3072)
	for i := range raw {
		raw[i] = byte(i * 31)
	}
	signature := base64.StdEncoding.EncodeToString(raw)
	const subscription = "6f3b8a1e-2c4d-4e5f-9a0b-1c2d3e4f5a6b"
	b.SetBytes(int64(len(signature)))
	for b.Loop() {
		urn := URN("suse", "sles-15-sp7", "premium")
		if n := Nonce(urn); len(n) != 32 {
			b.Fatalf("nonce %q: want 32 characters", n)
		}
		doc := InstanceData(subscription, signature, urn)
		if !strings.HasPrefix(doc, "<document>") {
			b.Fatalf("document does not start with <document>: %.40q", doc)
		}
	}
}
