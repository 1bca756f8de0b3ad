package job

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadConfigRefusesAProxyGoCannotUse: a proxy URL net/http cannot
// parse (it would drop it without a word and go direct) is refused at load,
// exit 2, naming the variable, with the password masked and how to write
// it; one Go reads as meant is accepted. Both forms of a pair count: the
// standard library reads the upper-case one first, x/net's httpproxy the
// lower-case one.
func TestLoadConfigRefusesAProxyGoCannotUse(t *testing.T) {
	tests := map[string]struct {
		env      map[string]string
		refused  string // the variable and its masked value, "" when accepted
		says     string
		password string // never in the message
	}{
		"a % not percent-encoded in the password": {env: map[string]string{"HTTPS_PROXY": "http://u:Pa%ss@proxy:3128"},
			refused: `HTTPS_PROXY="http://u:REDACTED@proxy:3128"`, says: "percent-encode it", password: "Pa%ss"},
		"a / in the password, lower case": {env: map[string]string{"https_proxy": "http://u:p/ss@proxy:3128"},
			refused: `https_proxy="http://u:REDACTED@proxy:3128"`, says: "percent-encode it", password: "p/ss"},
		"an @ and a # in the password": {env: map[string]string{"HTTP_PROXY": "http://user:p@s#s@proxy:3128"},
			refused: `HTTP_PROXY="http://user:REDACTED@proxy:3128"`, says: "percent-encode it", password: "p@s#s"},
		"a port out of range":         {env: map[string]string{"HTTPS_PROXY": "http://proxy:99999"}, refused: `HTTPS_PROXY="http://proxy:99999"`, says: "want 1 to 65535"},
		"a scheme Go has no proxy of": {env: map[string]string{"HTTPS_PROXY": "ftp://proxy:21"}, refused: `HTTPS_PROXY="ftp://proxy:21"`, says: "socks5://"},
		// The region servers' httpproxy reads the lower-case one first.
		"a broken lower-case one beside a good upper-case one": {env: map[string]string{"HTTPS_PROXY": "http://proxy:3128", "https_proxy": "http://u:Pa%ss@proxy:3128"},
			refused: `https_proxy="http://u:REDACTED@proxy:3128"`, says: "percent-encode it", password: "Pa%ss"},
		"the password percent-encoded": {env: map[string]string{"HTTPS_PROXY": "http://u:Pa%25ss@proxy:3128"}},
		"a bare host:port":             {env: map[string]string{"HTTPS_PROXY": "proxy.corp:3128", "HTTP_PROXY": "proxy.corp:3128"}},
		"socks5":                       {env: map[string]string{"HTTPS_PROXY": "socks5://proxy:1080"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(nil, env(tc.env))
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrProxyURL)
			assert.Equal(t, ExitPermanent, ExitCode(err))
			assert.Contains(t, err.Error(), tc.refused)
			assert.Contains(t, err.Error(), tc.says)
			if tc.password != "" {
				assert.NotContains(t, err.Error(), tc.password)
			}
		})
	}
}

// TestTroubleshootQuotesTheProxyRefusal: docs/troubleshoot.md quotes the
// refusal of an unparseable proxy URL as the engine says it.
func TestTroubleshootQuotesTheProxyRefusal(t *testing.T) {
	_, err := LoadConfig(nil, env(map[string]string{"HTTPS_PROXY": "http://u:Pa%ss@proxy:3128"}))
	require.ErrorIs(t, err, ErrProxyURL)
	b, rerr := os.ReadFile("../docs/troubleshoot.md")
	require.NoError(t, rerr)
	assert.Contains(t, strings.Join(strings.Fields(string(b)), " "), err.Error())
}
