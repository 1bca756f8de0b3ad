package kube_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/kube"
)

const testCertPEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

func testRegistration() kube.Registration {
	return kube.Registration{
		URL:          "https://smt-azure.susecloud.net",
		RegCode:      "INTERNAL-USE-ONLY-0000-0000",
		InstanceData: "<document>c2lnbmVk</document>",
		CertPEM:      []byte(testCertPEM),
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// The operator reads these exact keys; the golden files are what a reviewer
// compares with rancher/scc-operator when either side changes.
func TestRegistrationDataGolden(t *testing.T) {
	tests := map[string]struct {
		render func(kube.Registration) any
		golden string
	}{
		"data": {
			render: func(r kube.Registration) any { return r.Data() },
			golden: "registration-data.golden",
		},
		"redacted": {
			render: func(r kube.Registration) any { return r.Redacted() },
			golden: "registration-redacted.golden",
		},
		// The body of the server-side apply: type and data only, no
		// labels or annotations, data rather than stringData.
		"apply configuration": {
			render: func(r kube.Registration) any {
				body, err := kube.SecretApplyPatch(kube.Namespace, kube.SecretName, "", r.Data())
				if err != nil {
					return err
				}
				return json.RawMessage(body)
			},
			golden: "secret-apply.golden",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			require.NoError(t, enc.Encode(tc.render(testRegistration())))
			golden(t, tc.golden, out.Bytes())
		})
	}
}

func TestRedactedHidesSecretsOnly(t *testing.T) {
	r := testRegistration()
	red := r.Redacted()
	for _, k := range kube.RegistrationKeys() {
		assert.Contains(t, red, k)
	}
	assert.NotContains(t, red[kube.KeyRegCode], r.RegCode)
	assert.NotContains(t, red[kube.KeyInstanceData], "c2lnbmVk")
	assert.Equal(t, r.URL, red[kube.KeyRegistrationURL])
	assert.Equal(t, testCertPEM, red[kube.KeyRegistrationURLCert])

	// A missing code stays visibly missing.
	r.RegCode = ""
	assert.Empty(t, r.Redacted()[kube.KeyRegCode])
}
