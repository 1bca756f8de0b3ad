package azure_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/providers/azure"
)

// inputForm turns an IMDS answer into one of the three forms Inspect reads.
type inputForm func(t *testing.T, imdsJSON []byte) []byte

func imdsForm(_ *testing.T, b []byte) []byte { return b }

func bareForm(t *testing.T, b []byte) []byte {
	var v struct{ Signature string }
	require.NoError(t, json.Unmarshal(b, &v))
	// Wrapped at 64 columns, as a document pasted into a mail would be.
	var out strings.Builder
	for s := v.Signature; len(s) > 0; {
		n := min(64, len(s))
		out.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	return []byte(out.String())
}

func documentForm(t *testing.T, b []byte) []byte {
	var v struct{ Signature string }
	require.NoError(t, json.Unmarshal(b, &v))
	return []byte(azure.InstanceData("sub", v.Signature, "suse:sles-15-sp7:premium") + "<repoformat>plugin:susecloud</repoformat>\n")
}

func TestInspectFakeDocuments(t *testing.T) {
	fake, err := fakecloud.NewAzure(fakecloud.AzureConfig{})
	require.NoError(t, err)
	srv := httptest.NewServer(fake.IMDSHandler()) // serves the AIA intermediate
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	online := azure.InspectOptions{Roots: []*x509.Certificate{fake.Root()}, AIAAllowedHosts: []string{host}}

	tests := map[string]struct {
		fault      func()
		form       inputForm
		opts       azure.InspectOptions
		want       [4]string // signature, signer, chain, claims: OK, FAILED or UNAVAILABLE
		wantAIA    bool
		atCreated  bool   // check the chain when the document was made
		wantDetail string // in the claims line when it fails
	}{
		"IMDS answer verifies, intermediate from AIA": {form: imdsForm, opts: online, want: [4]string{"OK", "OK", "OK", "OK"}, wantAIA: true},
		"bare base64 verifies":                        {form: bareForm, opts: online, want: [4]string{"OK", "OK", "OK", "OK"}, wantAIA: true},
		"instanceData document verifies":              {form: documentForm, opts: online, want: [4]string{"OK", "OK", "OK", "OK"}, wantAIA: true},
		"document without subscriptionId is rejected": {
			fault: func() { fake.Forge.Store(&fakecloud.Forgery{Omit: []string{"subscriptionId"}}) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "OK", "FAILED"}, wantAIA: true, wantDetail: "signed content has no subscriptionId",
		},
		"document without vmId is rejected": {
			fault: func() { fake.Forge.Store(&fakecloud.Forgery{Omit: []string{"vmId"}}) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "OK", "FAILED"}, wantAIA: true, wantDetail: "signed content has no vmId",
		},
		"document created an hour ahead is rejected": {
			fault: func() { fake.Forge.Store(&fakecloud.Forgery{CreatedAhead: time.Hour}) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "OK", "FAILED"}, wantAIA: true, wantDetail: "timeStamp.createdOn",
		},
		"document created a minute ahead verifies: clocks drift": {
			fault: func() { fake.Forge.Store(&fakecloud.Forgery{CreatedAhead: time.Minute}) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "OK", "OK"}, wantAIA: true,
		},
		"tampered document is rejected": {
			fault: func() { fake.TamperDocument.Store(true) }, form: imdsForm, opts: online,
			want: [4]string{"FAILED", "OK", "OK", "OK"}, wantAIA: true,
		},
		"offline without intermediates: unavailable, not forged": {
			form: imdsForm, opts: azure.InspectOptions{Roots: online.Roots, Offline: true},
			want: [4]string{"OK", "OK", "UNAVAILABLE", "OK"},
		},
		"offline with intermediates verifies": {
			form: imdsForm, opts: azure.InspectOptions{Roots: online.Roots, Offline: true, Intermediates: []*x509.Certificate{fake.Intermediate()}},
			want: [4]string{"OK", "OK", "OK", "OK"},
		},
		"AIA host off the allow-list is not fetched": {
			form: imdsForm, opts: azure.InspectOptions{Roots: online.Roots},
			want: [4]string{"OK", "OK", "FAILED", "OK"},
		},
		"unknown root is rejected": {
			fault: func() { fake.UnknownRoot.Store(true) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "FAILED", "OK"}, wantAIA: true,
		},
		"wrong signer is rejected": {
			fault: func() { fake.WrongSigner.Store(true) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "FAILED", "OK", "OK"}, wantAIA: true,
		},
		"expired leaf fails now": {
			fault: func() { fake.ExpiredLeaf.Store(true) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "FAILED", "OK"}, wantAIA: true,
		},
		"expired leaf verifies at its time": {
			fault: func() { fake.ExpiredLeaf.Store(true) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "OK", "OK"}, wantAIA: true, atCreated: true,
		},
		"forged signer whose allowed AIA URL names another issuer is rejected, not unavailable": {
			fault: func() { fake.Forge.Store(&fakecloud.Forgery{ForeignIssuer: true}) }, form: imdsForm, opts: online,
			want: [4]string{"OK", "OK", "FAILED", "OK"}, wantAIA: true,
		},
		"production roots do not trust the fake": {
			form: imdsForm, opts: azure.InspectOptions{AIAAllowedHosts: online.AIAAllowedHosts},
			want: [4]string{"OK", "OK", "FAILED", "OK"}, wantAIA: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, b := range []bool{false} { // reset the fault switches this subtest may flip
				fake.TamperDocument.Store(b)
				fake.UnknownRoot.Store(b)
				fake.WrongSigner.Store(b)
				fake.ExpiredLeaf.Store(b)
			}
			fake.Forge.Store(nil)
			if tc.fault != nil {
				tc.fault()
			}
			nonce := azure.Nonce("suse:sles-15-sp7:premium")
			raw, err := fake.Document(context.Background(), host, nonce)
			require.NoError(t, err)
			opts := tc.opts
			if tc.atCreated {
				opts.At = time.Now().Add(-2*24*time.Hour + time.Minute)
			}
			before := fake.AIARequests.Load()
			r, err := azure.Inspect(context.Background(), tc.form(t, raw), opts)
			require.NoError(t, err)
			var out bytes.Buffer
			require.NoError(t, r.WriteText(&out))
			t.Log("\n" + out.String())
			got := [4]string{r.Signature.State(), r.Signer.State(), r.Chain.State(), r.Claims.State()}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want == [4]string{"OK", "OK", "OK", "OK"}, r.OK())
			assert.Contains(t, out.String(), "\nclaims:    "+r.Claims.State()+" ")
			if tc.wantDetail != "" {
				assert.Contains(t, r.Claims.Detail, tc.wantDetail)
			}
			assert.Equal(t, tc.wantAIA, fake.AIARequests.Load() > before, "AIA fetched")
			assert.Contains(t, out.String(), `"nonce": "`+nonce+`"`, "the signed JSON is printed")
			for _, line := range []string{"signature: ", "signer:    ", "chain:     ", "claims:    "} {
				assert.Contains(t, out.String(), "\n"+line)
			}
		})
	}
}

func TestInspectRejectsNonDocuments(t *testing.T) {
	tests := map[string]string{
		"empty":                 "",
		"not base64":            "this is not a document",
		"JSON without document": `{"encoding":"pkcs7"}`,
		"unterminated document": `<document>{"attestedData": {"signature": "MIIB"}}`,
		"base64 of garbage":     "aGVsbG8gd29ybGQ=",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := azure.Inspect(context.Background(), []byte(in), azure.InspectOptions{Offline: true})
			assert.ErrorIs(t, err, azure.ErrAttestation)
			assert.Nil(t, r)
		})
	}
}

func readPEMs(t *testing.T, files ...string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", "realdoc", f))
		require.NoError(t, err)
		certs, err := azure.ParsePEMCertificates(b)
		require.NoError(t, err)
		out = append(out, certs...)
	}
	return out
}

// TestInspectRealAzureDocuments runs the verifier on documents real Azure
// VMs signed (testdata/realdoc/README.md names their sources). Both carry
// the sha256WithRSAEncryption-as-digest-OID quirk; nothing is fetched.
func TestInspectRealAzureDocuments(t *testing.T) {
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "realdoc", f))
		require.NoError(t, err)
		return b
	}
	tests := map[string]struct {
		input []byte
		opts  azure.InspectOptions
		want  [4]string // signature, signer, chain, claims
	}{
		"2022 document at its time, chain to Baltimore": {
			input: read("coder-regular-2022.b64"),
			opts: azure.InspectOptions{
				At:            time.Date(2022, 4, 19, 3, 0, 0, 0, time.UTC),
				Roots:         readPEMs(t, "baltimore-cybertrust-root.pem"),
				Intermediates: readPEMs(t, "ms-rsa-tls-ca-01.pem"),
				Offline:       true,
			},
			want: [4]string{"OK", "OK", "OK", "OK"},
		},
		"2022 document today: leaf long expired": {
			input: read("coder-regular-2022.b64"),
			opts: azure.InspectOptions{
				Roots: readPEMs(t, "baltimore-cybertrust-root.pem"), Intermediates: readPEMs(t, "ms-rsa-tls-ca-01.pem"), Offline: true,
			},
			want: [4]string{"OK", "OK", "FAILED", "OK"},
		},
		"2022 document under the production roots": {
			input: read("coder-regular-2022.b64"),
			opts: azure.InspectOptions{
				At: time.Date(2022, 4, 19, 3, 0, 0, 0, time.UTC), Intermediates: readPEMs(t, "ms-rsa-tls-ca-01.pem"), Offline: true,
			},
			want: [4]string{"OK", "OK", "FAILED", "OK"}, // Baltimore is not pinned
		},
		"2020 document offline: intermediate unavailable": {
			input: read("suse-azuremetadata-2020.json"),
			opts:  azure.InspectOptions{At: time.Date(2020, 2, 21, 15, 0, 0, 0, time.UTC), Offline: true},
			want:  [4]string{"OK", "OK", "UNAVAILABLE", "OK"},
		},
		"2020 document checked an hour before it was signed: createdOn ahead": {
			input: read("suse-azuremetadata-2020.json"),
			opts:  azure.InspectOptions{At: time.Date(2020, 2, 21, 13, 50, 0, 0, time.UTC), Offline: true},
			want:  [4]string{"OK", "OK", "UNAVAILABLE", "FAILED"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := azure.Inspect(context.Background(), tc.input, tc.opts)
			require.NoError(t, err)
			var out bytes.Buffer
			require.NoError(t, r.WriteText(&out))
			t.Log("\n" + out.String())
			assert.Equal(t, tc.want, [4]string{r.Signature.State(), r.Signer.State(), r.Chain.State(), r.Claims.State()})
		})
	}
}

// TestInspectRealDocumentTampered flips one byte of a real document's
// signed content: only the signature verdict may change.
func TestInspectRealDocumentTampered(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "realdoc", "suse-azuremetadata-2020.json"))
	require.NoError(t, err)
	var v struct{ Signature string }
	require.NoError(t, json.Unmarshal(b, &v))
	der, err := base64Decode(v.Signature)
	require.NoError(t, err)
	i := bytes.Index(der, []byte(`"vmId":"e01f`))
	require.Positive(t, i)
	der[i+len(`"vmId":"`)] = 'f'
	r, err := azure.Inspect(context.Background(), []byte(base64Encode(der)), azure.InspectOptions{Offline: true})
	require.NoError(t, err)
	assert.Equal(t, [3]string{"FAILED", "OK", "UNAVAILABLE"}, [3]string{r.Signature.State(), r.Signer.State(), r.Chain.State()})
	assert.False(t, r.OK())
}
