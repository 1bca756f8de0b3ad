package hostname

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	tests := map[string]struct {
		in, want string // want "" expects ErrInvalid
	}{
		"update server name":            {"smt-azure.susecloud.net", "smt-azure.susecloud.net"},
		"upper case and trailing dot":   {"SMT-Azure.SUSECloud.net.", "smt-azure.susecloud.net"},
		"digits":                        {"smt1.0x.example", "smt1.0x.example"},
		"single label":                  {"localhost", ""},
		"underscore":                    {"smt_azure.susecloud.net", ""},
		"service label with underscore": {"_https._tcp.susecloud.net", ""},
		"empty":                         {"", ""},
		"only a dot":                    {".", ""},
		"empty label":                   {"smt..susecloud.net", ""},
		"leading hyphen":                {"-smt.susecloud.net", ""},
		"trailing hyphen":               {"smt-.susecloud.net", ""},
		"space":                         {"smt azure.susecloud.net", ""},
		"brace (Corefile injection)":    {"x.net {\n}", ""},
		"newline":                       {"a.net\n1.2.3.4 b.net", ""},
		"slash (URL injection)":         {"evil.example/x.susecloud.net", ""},
		"IP literal is no name":         {"[::1]", ""},
		"label of 64 bytes":             {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.net", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Normalize(tc.in)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestUnder(t *testing.T) {
	tests := map[string]struct {
		name, domain string
		want         bool
	}{
		"subdomain":                   {"smt-azure.susecloud.net", "susecloud.net", true},
		"the domain itself":           {"susecloud.net", "susecloud.net", true},
		"case and trailing dots":      {"SMT.SuseCloud.NET.", "susecloud.net.", true},
		"suffix without a dot":        {"evilsusecloud.net", "susecloud.net", false},
		"domain as a prefix":          {"susecloud.net.attacker.example", "susecloud.net", false},
		"cluster service name":        {"kubernetes.default.svc.cluster.local", "cluster.local", true},
		"empty domain matches none":   {"smt.susecloud.net", "", false},
		"parent is not under a child": {"susecloud.net", "smt.susecloud.net", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, Under(tc.name, tc.domain)) })
	}
}
