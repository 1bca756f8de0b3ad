package operator_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/operator"
)

const testCertPEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

func testValues() operator.Values {
	return operator.Values{
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
func TestValuesDataGolden(t *testing.T) {
	tests := map[string]struct {
		render func(operator.Values) any
		golden string
	}{
		"data": {
			render: func(r operator.Values) any { return r.Data() },
			golden: "values-data.golden",
		},
		"redacted": {
			render: func(r operator.Values) any { return r.Redacted() },
			golden: "values-redacted.golden",
		},
		// The body of the server-side apply: type and data only, no
		// labels or annotations, data rather than stringData.
		"apply configuration": {
			render: func(r operator.Values) any {
				body, err := operator.SecretApplyPatch(operator.Namespace, operator.SecretName, "", r.Data())
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
			require.NoError(t, enc.Encode(tc.render(testValues())))
			golden(t, tc.golden, out.Bytes())
		})
	}
}

func TestRedactedHidesSecretsOnly(t *testing.T) {
	r := testValues()
	red := r.Redacted()
	for _, k := range operator.ValueKeys() {
		assert.Contains(t, red, k)
	}
	assert.NotContains(t, red[operator.KeyRegCode], r.RegCode)
	assert.NotContains(t, red[operator.KeyInstanceData], "c2lnbmVk")
	assert.Equal(t, r.URL, red[operator.KeyRegistrationURL])
	assert.Equal(t, testCertPEM, red[operator.KeyRegistrationURLCert])

	// A missing code stays visibly missing.
	r.RegCode = ""
	assert.Empty(t, r.Redacted()[operator.KeyRegCode])
}
