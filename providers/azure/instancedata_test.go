package azure

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rancher/registration-engine/internal/testkit"
)

func TestNonce(t *testing.T) {
	tests := map[string]struct{ urn, want string }{
		"reference engine vector":          {"suse:sles-15-sp7:premium", "2jejosSbpvfywfLc2RcplWnHyDyAxWS_"},
		"research vector":                  {"publisher:offer:plan", "AXXYGNwPPRMhmMWk2h4Iyb0MWxeOSl0i"},
		"url-safe alphabet, dash":          {"pub-id:off-id:pl-id", "BfspxxCn-i2Zke4PSe1yd1Fn98THgdBa"},
		"url-safe alphabet, dash and line": {"microsoft-ads:windows-data-science-vm:windows2016", "ErhzWdIPeybjmbSE_n-uyA8C_JAQ9bjQ"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Nonce(tc.urn)
			assert.Equal(t, tc.want, got)
			assert.Len(t, got, 32, "IMDS accepts at most 32 characters")
			assert.NotContains(t, got, "+")
			assert.NotContains(t, got, "/")
		})
	}
	assert.Equal(t, "suse:sles-15-sp7:premium", URN("suse", "sles-15-sp7", "premium"))
}

// TestInstanceDataGolden pins the bytes the update server receives. The
// golden file was checked against Python's
// '<document>' + json.dumps({"subscriptionId": s, "attestedData": {"signature": g}, "offer": o}) + '</document>'.
func TestInstanceDataGolden(t *testing.T) {
	got := InstanceData("ce73a2b0-d2e7-4ff6-b987-b32d6908de4e",
		"MIILegYJKoZIhvcNAQcCoIILazCCC2cCAQExDzANBgkqhkiG9w0BAQsFADCCAR0G+/abc==",
		"suse:sles-15-sp7:premium")
	testkit.Golden(t, filepath.Join("testdata", "instancedata.golden"), []byte(got))
}

func TestPythonJSONString(t *testing.T) {
	// Expected values are what CPython's json.dumps(s) prints.
	tests := map[string]struct{ in, want string }{
		"plain":                  {"suse:sles-15-sp7:premium", `"suse:sles-15-sp7:premium"`},
		"html is not escaped":    {"<a&b>", `"<a&b>"`},
		"short escapes":          {"q\"b\\n\nr\rt\tb\bf\f", `"q\"b\\n\nr\rt\tb\bf\f"`},
		"control and DEL":        {"\x01\x1f\x7f", `"\u0001\u001f\u007f"`},
		"non-ascii, lower hex":   {"é\u2028\u00ff", `"\u00e9\u2028\u00ff"`},
		"astral as surrogates":   {"😀", `"\ud83d\ude00"`},
		"invalid utf-8":          {"a\xffb", `"a\ufffdb"`},
		"slash is not escaped":   {"a/b", `"a/b"`},
		"base64 keeps its chars": {"+/=", `"+/="`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			writePythonString(&b, tc.in)
			assert.Equal(t, tc.want, b.String())
		})
	}
}
