package smt

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

const (
	fpColon = "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD"
	fpLower = "aabbccddeeff00112233445566778899aabbccdd"
)

// A real answer's shape (protocols.md §2): Azure westus3, dual stack.
const realAnswer = `<regionSMTdata>
<smtInfo SMTserverIP="20.38.0.87" SMTserverIPv6="2603:1030:501::dd" SMTserverName="smt-azure.susecloud.net" SMTregistryName="registry-azure.susecloud.net" fingerprint="` + fpColon + `" region="westus3"/>
<smtInfo SMTserverIP="23.101.171.119" SMTserverIPv6="2603:1030:603::2e9" SMTserverName="smt-azure.susecloud.net" SMTregistryName="registry-azure.susecloud.net" fingerprint="` + fpColon + `" region="westus3"/>
</regionSMTdata>
`

func TestParseRegionData(t *testing.T) {
	tests := map[string]struct {
		body        string
		want        []Entry
		wantSkipped int
		wantErr     error
	}{
		"real answer": {
			body: realAnswer,
			want: []Entry{
				{Name: "smt-azure.susecloud.net", IPv4: netip.MustParseAddr("20.38.0.87"), IPv6: netip.MustParseAddr("2603:1030:501::dd"), Registry: "registry-azure.susecloud.net", Region: "westus3", Fingerprint: fpColon},
				{Name: "smt-azure.susecloud.net", IPv4: netip.MustParseAddr("23.101.171.119"), IPv6: netip.MustParseAddr("2603:1030:603::2e9"), Registry: "registry-azure.susecloud.net", Region: "westus3", Fingerprint: fpColon},
			},
		},
		"attributes in another order, lower-case fingerprint, no region": {
			body: `<regionSMTdata><smtInfo fingerprint="` + fpLower + `" SMTserverName="a.example" SMTserverIP="192.0.2.1"/></regionSMTdata>`,
			want: []Entry{{Name: "a.example", IPv4: netip.MustParseAddr("192.0.2.1"), Region: "unknown", Fingerprint: fpLower}},
		},
		"IPv6-only region: SMTserverIP is None": {
			body: `<regionSMTdata><smtInfo SMTserverIP="None" SMTserverIPv6="2001:db8::1" SMTserverName="a.example" SMTregistryName="None" fingerprint="` + fpColon + `" region="r"/></regionSMTdata>`,
			want: []Entry{{Name: "a.example", IPv6: netip.MustParseAddr("2001:db8::1"), Region: "r", Fingerprint: fpColon}},
		},
		"invalid entries skipped, valid kept": {
			body: `<regionSMTdata>
<smtInfo SMTserverIP="None" SMTserverName="none.example" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.300" SMTserverName="bad-ip.example" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverIPv6="192.0.2.2" SMTserverName="v4-in-v6.example" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="None" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="evil.example&#10;1.2.3.4 other" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="slash.example/x" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="nofp.example"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="shortfp.example" fingerprint="AA:BB"/>
<smtInfo SMTserverIP="192.0.2.1" SMTserverName="hexfp.example" fingerprint="ZZ:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD"/>
<smtInfo SMTserverIP="0.0.0.0" SMTserverName="unspecified.example" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIPv6="fe80::1%eth0" SMTserverName="zone.example" fingerprint="` + fpColon + `"/>
<smtInfo SMTserverIP="192.0.2.9" SMTserverName="good.example" fingerprint="` + fpColon + `"/>
</regionSMTdata>`,
			want:        []Entry{{Name: "good.example", IPv4: netip.MustParseAddr("192.0.2.9"), Region: "unknown", Fingerprint: fpColon}},
			wantSkipped: 12,
		},
		"all entries invalid": {
			body:        string(fakecloud.RegionXML([]fakecloud.SMTInfo{{IPv4: "192.0.2.1", Name: "a.example", Fingerprint: fpColon}}, true)),
			wantSkipped: 1,
			wantErr:     ErrRegionData,
		},
		"no entries": {
			body:    `<regionSMTdata></regionSMTdata>`,
			wantErr: ErrRegionData,
		},
		"wrong root element": {
			body:    `<html><body>Internal error</body></html>`,
			wantErr: ErrRegionData,
		},
		"the region server's 404 text": {
			body:    `Not found`,
			wantErr: ErrRegionData,
		},
		"truncated": {
			body:    realAnswer[:80],
			wantErr: ErrRegionData,
		},
		"empty": {
			wantErr: ErrRegionData,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, skipped, err := ParseRegionData([]byte(tc.body))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Empty(t, got)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
			assert.Len(t, skipped, tc.wantSkipped)
			for _, s := range skipped {
				assert.ErrorIs(t, s, ErrInvalidEntry)
			}
		})
	}
}

func TestParseMetadata(t *testing.T) {
	tests := map[string]struct {
		body    string
		want    Entry
		wantErr error
	}{
		"what cloudregister reads": {
			body: `{"fingerprint":"` + fpColon + `","SMTserverIP":"192.0.2.1","SMTserverName":"a.example"}`,
			want: Entry{Name: "a.example", IPv4: netip.MustParseAddr("192.0.2.1"), Region: "unknown", Fingerprint: fpColon},
		},
		"IPv6 in SMTserverIP": {
			body: `{"fingerprint":"` + fpLower + `","SMTserverIP":"2001:db8::1","SMTserverName":"a.example","region":"r"}`,
			want: Entry{Name: "a.example", IPv6: netip.MustParseAddr("2001:db8::1"), Region: "r", Fingerprint: fpLower},
		},
		"both families": {
			body: `{"fingerprint":"` + fpColon + `","SMTserverIP":"192.0.2.1","SMTserverIPv6":"2001:db8::1","SMTserverName":"a.example","SMTregistryName":"registry-a.example"}`,
			want: Entry{Name: "a.example", IPv4: netip.MustParseAddr("192.0.2.1"), IPv6: netip.MustParseAddr("2001:db8::1"), Registry: "registry-a.example", Region: "unknown", Fingerprint: fpColon},
		},
		"no address":       {body: `{"fingerprint":"` + fpColon + `","SMTserverName":"a.example"}`, wantErr: ErrRegionData},
		"no fingerprint":   {body: `{"SMTserverIP":"192.0.2.1","SMTserverName":"a.example"}`, wantErr: ErrRegionData},
		"number, not IP":   {body: `{"fingerprint":"` + fpColon + `","SMTserverIP":1,"SMTserverName":"a.example"}`, wantErr: ErrRegionData},
		"not JSON":         {body: `<html/>`, wantErr: ErrRegionData},
		"JSON null":        {body: `null`, wantErr: ErrRegionData},
		"nulls are absent": {body: `{"fingerprint":"` + fpColon + `","SMTserverIP":null,"SMTserverName":"a.example"}`, wantErr: ErrRegionData},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMetadata([]byte(tc.body))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFingerprintAndVerify(t *testing.T) {
	u, _, err := fakecloud.NewUpdateServer("smt.example.test")
	require.NoError(t, err)
	other, _, err := fakecloud.NewUpdateServer("smt.example.test")
	require.NoError(t, err)

	fp := mustFingerprint(t, u.CertPEM)
	keyPEM := []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
	assert.Equal(t, strings.ReplaceAll(u.Fingerprint(), ":", ""), fp, "matches the fake's independent computation")

	tests := map[string]struct {
		body        []byte
		fingerprint string
		want        []byte
		wantErr     error
	}{
		"colon form":                       {body: u.CertPEM, fingerprint: u.Fingerprint(), want: u.CertPEM},
		"lower case, no colons":            {body: u.CertPEM, fingerprint: strings.ToLower(fp), want: u.CertPEM},
		"text around the block":            {body: append(append([]byte("subject=CN = smt\n"), u.CertPEM...), "trailer\n"...), fingerprint: fp, want: u.CertPEM},
		"only the first block is returned": {body: append(append([]byte{}, u.CertPEM...), other.CertPEM...), fingerprint: fp, want: u.CertPEM},
		"another certificate":              {body: other.CertPEM, fingerprint: fp, wantErr: ErrFingerprint},
		"the right one second":             {body: append(append([]byte{}, other.CertPEM...), u.CertPEM...), fingerprint: fp, wantErr: ErrFingerprint},
		"no PEM":                           {body: []byte("<html>maintenance</html>"), fingerprint: fp, wantErr: ErrNoCertificate},
		"PEM but not a certificate, fingerprint matching": {
			body:        keyPEM,
			fingerprint: mustFingerprint(t, keyPEM),
			wantErr:     ErrNoCertificate,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := verifyCert(tc.body, tc.fingerprint)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Nil(t, got, "a rejected certificate is never handed out")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	_, err = Fingerprint([]byte("no pem here"))
	assert.ErrorIs(t, err, ErrNoCertificate)
}

func mustFingerprint(t *testing.T, pemBytes []byte) string {
	t.Helper()
	fp, err := Fingerprint(pemBytes)
	require.NoError(t, err)
	return fp
}

func BenchmarkParseRegionData(b *testing.B) {
	var infos []fakecloud.SMTInfo
	for i := range 6 {
		infos = append(infos, fakecloud.SMTInfo{
			IPv4: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}).String(), IPv6: "2001:db8::" + string(rune('a'+i)),
			Name: "smt-azure.susecloud.net", Registry: "registry-azure.susecloud.net", Fingerprint: fpColon, Region: "westus3",
		})
	}
	body := fakecloud.RegionXML(infos, false)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		entries, _, err := ParseRegionData(body)
		if err != nil || len(entries) != 6 {
			b.Fatal(entries, err)
		}
	}
}
