package coredns

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHostsAddresses(t *testing.T) {
	tests := map[string]struct {
		text string
		want []string
	}{
		"what Ensure writes into the Corefile": {
			text: mustSetText(t, "10.0.0.7"),
			want: []string{"10.0.0.7"},
		},
		"a coredns-custom snippet": {
			text: hostsBlock("", "smt-azure.susecloud.net", netip.MustParseAddr("2001:db8::7")) + "\n",
			want: []string{"2001:db8::7"},
		},
		"case and trailing dot, among other names": {
			text: ".:53 {\n    hosts {\n        10.0.0.8 other.example SMT-Azure.SuseCloud.net.\n        fallthrough\n    }\n}\n",
			want: []string{"10.0.0.8"},
		},
		"another name only": {
			text: ".:53 {\n    hosts {\n        10.0.0.8 smt-other.susecloud.net\n    }\n}\n",
		},
		"outside a hosts block": {
			text: ".:53 {\n    10.0.0.8 smt-azure.susecloud.net\n}\n",
		},
		"no Corefile": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, a := range HostsAddresses(tc.text, "smt-azure.susecloud.net") {
				got = append(got, a.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func mustSetText(t *testing.T, ip string) string {
	t.Helper()
	out, _, err := SetCorefileHostsEntry(kindCorefile, "smt-azure.susecloud.net", netip.MustParseAddr(ip), testDomains, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
