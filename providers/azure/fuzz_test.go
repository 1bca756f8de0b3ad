package azure

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets feed peer-controlled bytes to the parsers: none may
// panic, hang or accept garbage as a verified document. Seeds live in
// testdata/fuzz/<target> (real and fake documents, IMDS and ARM answers).

func FuzzInspect(f *testing.F) {
	for _, name := range []string{"suse-azuremetadata-2020.json", "coder-regular-2022.b64"} {
		b, err := os.ReadFile(filepath.Join("testdata", "realdoc", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<document>{"attestedData": {"signature": "MIIB"}}</document>`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Inspect(context.Background(), in, InspectOptions{Offline: true})
		if err != nil {
			return
		}
		// Offline with the production roots nothing fuzzed can chain.
		if r.OK() {
			t.Fatalf("fuzzed input verified: %q", in)
		}
		_ = r.WriteText(discard{})
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func FuzzParseCompute(f *testing.F) {
	f.Add([]byte(`{"subscriptionId":"ce73a2b0-d2e7-4ff6-b987-b32d6908de4e","location":"westeurope","vmId":"x"}`))
	f.Add([]byte(`{"subscriptionId":""}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := parseCompute(in)
		if err == nil && c.SubscriptionID == "" {
			t.Fatal("compute without subscription accepted")
		}
	})
}

func FuzzParseExtension(f *testing.F) {
	f.Add([]byte(`{"id":"/x","type":"Microsoft.KubernetesConfiguration/extensions","plan":{"name":"premium","publisher":"suse","product":"sles-15-sp7"}}`))
	f.Add([]byte(`{"plan":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = parseExtension(in)
	})
}
