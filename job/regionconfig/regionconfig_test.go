package regionconfig

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
)

// TestGolden pins what the engine makes of two real files: the sample the
// seed's README mounts (whose regionsrv = 0:0:0:0 placeholder must be
// refused, not queried) and the Azure configuration SLES images carry.
func TestGolden(t *testing.T) {
	tests := map[string]struct {
		file    string
		wantErr error
	}{
		"seed sample with placeholder region server": {file: "seed.cfg", wantErr: ErrInvalidRegionServer},
		"real Azure configuration":                   {file: "azure.cfg"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			// A fixed name keeps the golden independent of the checkout path.
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			got, err := Parse(data, "/etc/regionserverclnt.cfg")

			var rendered []byte
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.True(t, failure.IsPermanent(err))
				rendered = []byte("error: " + err.Error() + "\n")
			} else {
				require.NoError(t, err)
				rendered, err = json.MarshalIndent(got, "", "  ")
				require.NoError(t, err)
				rendered = append(rendered, '\n')
			}

			golden := strings.TrimSuffix(path, ".cfg") + ".golden"
			testkit.Golden(t, golden, rendered)
		})
	}
}

const valid = `[server]
api = regionInfo
certLocation = /usr/lib/regionService/certs
regionsrv = 52.187.53.250
`

func TestParse(t *testing.T) {
	tests := map[string]struct {
		text string
		want Settings
	}{
		"colon delimiter, mixed-case keys, IPv6 and host names kept as written in order": {
			text: "[server]\nAPI: regionInfo\nCERTLOCATION: /certs/\nRegionSrv: 2603:1030:0603:0000::2e9 , 52.187.53.250,\n" +
				"  rgnsrv.example.com,::ffff:10.1.2.3\n",
			want: Settings{
				API: "regionInfo", CertLocation: "/certs/",
				RegionServers: []string{"2603:1030:0603:0000::2e9", "52.187.53.250", "rgnsrv.example.com", "::ffff:10.1.2.3"},
			},
		},
		"trailing comma ignored": {
			text: strings.Replace(valid, "52.187.53.250", "52.187.53.250, 40.121.202.140,", 1),
			want: Settings{API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250", "40.121.202.140"}},
		},
		"template placeholder is not a metadata server": {
			text: valid + "metadata_server = OPTIONAL_URL_FOR_METADATA_SERVER_SMT_INFO\n",
			want: Settings{API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250"}},
		},
		"metadata server none": {
			text: valid + "metadata_server = none\n",
			want: Settings{API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250"}},
		},
		"metadata server without http scheme is ignored": {
			text: valid + "metadata_server = ftp://smt.example.com/info\n",
			want: Settings{API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250"}},
		},
		"real metadata server URL": {
			text: valid + "metadata_server = https://metadata.example.com/smt\n",
			want: Settings{
				API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250"},
				MetadataServer: "https://metadata.example.com/smt",
			},
		},
		"instance none values and httpsOnly only for exact true": {
			text: valid + "[instance]\ndataProvider = none\ninstanceArgs = None\nhttpsOnly = True\n",
			want: Settings{API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250"}},
		},
		"no interpolation and hash kept inside values": {
			text: valid + "[instance]\ndataProvider = /usr/bin/provider --fmt %(x)s --tag a#b\nhttpsOnly = true\n",
			want: Settings{
				API: "regionInfo", CertLocation: "/usr/lib/regionService/certs", RegionServers: []string{"52.187.53.250"},
				DataProvider: "/usr/bin/provider --fmt %(x)s --tag a#b", HTTPSOnly: true,
			},
		},
		"comments and CRLF line ends": {
			text: "# comment\r\n; other comment\r\n[server]\r\napi = regionInfo\r\ncertLocation = /c\r\nregionsrv = 1.2.3.4\r\n",
			want: Settings{API: "regionInfo", CertLocation: "/c", RegionServers: []string{"1.2.3.4"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.text), "test.cfg")
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		text     string
		wantErrs []error
	}{
		"empty file":         {text: "", wantErrs: []error{ErrMissingKey}},
		"no section headers": {text: "api = regionInfo\n", wantErrs: []error{ErrMissingKey}},
		"section name is case-sensitive": {
			text: strings.Replace(valid, "[server]", "[Server]", 1), wantErrs: []error{ErrMissingKey},
		},
		"missing certLocation": {
			text:     "[server]\napi = regionInfo\nregionsrv = 1.2.3.4\n",
			wantErrs: []error{ErrMissingKey},
		},
		"empty regionsrv": {
			text:     "[server]\napi = regionInfo\ncertLocation = /c\nregionsrv =\n",
			wantErrs: []error{ErrMissingKey},
		},
		"regionsrv of commas only": {
			text:     "[server]\napi = regionInfo\ncertLocation = /c\nregionsrv = , ,\n",
			wantErrs: []error{ErrMissingKey},
		},
		"every problem at once": {
			text:     "[server]\nregionsrv = 1.2.3.4:443, [2001:db8::1]\n",
			wantErrs: []error{ErrMissingKey, ErrInvalidRegionServer},
		},
		"metadata server over http": {
			text: valid + "metadata_server = http://metadata.example.com/smt\n", wantErrs: []error{ErrInsecureMetadataServer},
		},
		"garbage line":       {text: "[server]\nthis is not ini\n", wantErrs: []error{ErrSyntax}},
		"unclosed section":   {text: "[server\napi = x\n", wantErrs: []error{ErrSyntax}},
		"binary":             {text: "\x7fELF\x02\x01\x01\x00\x00=\x00", wantErrs: []error{ErrSyntax}},
		"not UTF-8":          {text: "[server]\napi = \xff\xfe\n", wantErrs: []error{ErrSyntax}},
		"duplicate key":      {text: valid + "regionsrv = 1.2.3.4\n", wantErrs: []error{ErrDuplicateKey}},
		"space separated":    {text: entry("1.2.3.4 5.6.7.8"), wantErrs: []error{ErrInvalidRegionServer}},
		"inline comment":     {text: entry("1.2.3.4 # primary"), wantErrs: []error{ErrInvalidRegionServer}},
		"URL":                {text: entry("https://rgnsrv.example.com"), wantErrs: []error{ErrInvalidRegionServer}},
		"path":               {text: entry("rgnsrv.example.com/regionInfo"), wantErrs: []error{ErrInvalidRegionServer}},
		"bracketed IPv6":     {text: entry("[2001:db8::1]"), wantErrs: []error{ErrInvalidRegionServer}},
		"IPv6 with zone":     {text: entry("fe80::1%eth0"), wantErrs: []error{ErrInvalidRegionServer}},
		"host with port":     {text: entry("rgnsrv.example.com:8443"), wantErrs: []error{ErrInvalidRegionServer}},
		"seed placeholder":   {text: entry("0:0:0:0"), wantErrs: []error{ErrInvalidRegionServer}},
		"IPv4 out of range":  {text: entry("1.2.3.256"), wantErrs: []error{ErrInvalidRegionServer}},
		"short IPv4":         {text: entry("10.0.0"), wantErrs: []error{ErrInvalidRegionServer}},
		"underscore in name": {text: entry("rgn_srv.example.com"), wantErrs: []error{ErrInvalidRegionServer}},
		"quoted entry":       {text: entry(`"1.2.3.4"`), wantErrs: []error{ErrInvalidRegionServer}},
		"trailing dot":       {text: entry("rgnsrv.example.com."), wantErrs: []error{ErrInvalidRegionServer}},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.text), "/etc/regionserverclnt.cfg")
			require.Error(t, err)
			assert.Zero(t, got)
			for _, want := range tc.wantErrs {
				assert.ErrorIs(t, err, want)
			}
			assert.True(t, failure.IsPermanent(err), "a broken file must not be retried")
			// What an administrator needs to find the mistake: the file, the
			// section, the key, the entry.
			msgs.Add(name, err)
		})
	}
}

func entry(e string) string {
	return "[server]\napi = regionInfo\ncertLocation = /c\nregionsrv = " + e + "\n"
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.cfg")
	require.NoError(t, os.WriteFile(good, []byte(valid), 0o644))
	huge := filepath.Join(dir, "huge.cfg")
	require.NoError(t, os.WriteFile(huge, []byte(valid+"#"+strings.Repeat("x", MaxSize)+"\n"), 0o644))

	tests := map[string]struct {
		path     string
		wantErrs []error
	}{
		"readable file":       {path: good},
		"missing file":        {path: filepath.Join(dir, "absent.cfg"), wantErrs: []error{ErrRead, fs.ErrNotExist}},
		"directory mounted":   {path: dir, wantErrs: []error{ErrRead}},
		"larger than MaxSize": {path: huge, wantErrs: []error{ErrRead}},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := Load(tc.path)
			if tc.wantErrs == nil {
				require.NoError(t, err)
				assert.Equal(t, []string{"52.187.53.250"}, s.RegionServers)
				return
			}
			require.Error(t, err)
			for _, want := range tc.wantErrs {
				assert.ErrorIs(t, err, want)
			}
			assert.True(t, failure.IsPermanent(err))
			msgs.Add(name, err, filepath.Dir(tc.path), "<dir>")
		})
	}
}

func TestCertPath(t *testing.T) {
	tests := map[string]struct {
		certLocation, entry, want string
	}{
		"IPv4":                   {"/usr/lib/regionService/certs", "52.187.53.250", "/usr/lib/regionService/certs/52.187.53.250.pem"},
		"IPv6 keeps its colons":  {"/usr/lib/regionService/certs", "2603:1030:603::2e9", "/usr/lib/regionService/certs/2603:1030:603::2e9.pem"},
		"host name":              {"/usr/lib/regionService/certs", "rgnsrv.example.com", "/usr/lib/regionService/certs/rgnsrv.example.com.pem"},
		"trailing slash cleaned": {"/var/lib/regionService/certs/", "1.2.3.4", "/var/lib/regionService/certs/1.2.3.4.pem"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Settings{CertLocation: tc.certLocation}.CertPath(tc.entry))
		})
	}
}

// FuzzParse checks that no file content makes Parse panic, and that whatever
// it accepts honours the guarantees phase 4 relies on.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"seed.cfg", "azure.cfg"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(valid + "[instance]\nhttpsOnly = true\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.cfg")
		if err != nil {
			assert.True(t, failure.IsPermanent(err))
			return
		}
		assert.NotEmpty(t, s.API)
		assert.NotEmpty(t, s.CertLocation)
		require.NotEmpty(t, s.RegionServers)
		for _, e := range s.RegionServers {
			assert.NoError(t, checkRegionServer(e))
		}
		if s.MetadataServer != "" {
			assert.True(t, isHTTPURL(s.MetadataServer))
		}
	})
}
