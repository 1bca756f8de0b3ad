package azure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
)

// TestRealDocumentsMeetTheRules holds the verifier's rules against what
// Azure really signs (testdata/realdoc): the content digest, the signer
// certificate (end entity, digitalSignature, serverAuth, a SAN under
// metadata.azure.com) and the signed content's fields and time, each
// checked at the time the document was made. A rule that refused one of
// them would refuse every genuine document.
func TestRealDocumentsMeetTheRules(t *testing.T) {
	tests := map[string]struct {
		file, signer string
		created      time.Time
	}{
		"2020, Microsoft IT TLS CA 1": {file: "suse-azuremetadata-2020.json", signer: "westeurope.metadata.azure.com",
			created: time.Date(2020, 2, 21, 14, 53, 22, 0, time.UTC)},
		"2022, Microsoft RSA TLS CA 01": {file: "coder-regular-2022.b64", signer: "metadata.azure.com",
			created: time.Date(2022, 4, 19, 1, 27, 21, 0, time.UTC)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "realdoc", tc.file))
			require.NoError(t, err)
			sig, err := extractSignature(raw)
			require.NoError(t, err)
			d, err := parseDocument(sig)
			require.NoError(t, err)
			assert.NoError(t, d.verifySignature())
			name, err := d.checkSigner()
			assert.NoError(t, err)
			assert.Equal(t, tc.signer, name, "the first SAN under metadata.azure.com")
			c, err := d.parseContent()
			require.NoError(t, err)
			assert.NoError(t, c.check(), "the fields and times a genuine document carries")
			assert.NoError(t, checkClock(c, tc.created), "at its own time")
			assert.NoError(t, checkClock(c, tc.created.Add(-maxClockAhead)), "on a node whose clock is behind by the tolerance")
			assert.ErrorIs(t, checkClock(c, tc.created.Add(-maxClockAhead-time.Minute)), ErrDocumentNotYetValid, "beyond it")
			exp, err := c.expiresOn()
			require.NoError(t, err)
			assert.ErrorIs(t, checkClock(c, exp), ErrDocumentExpired, "at its expiry")
		})
	}
}

// TestRealDocumentWithSHA1DigestIsRefused changes only the digest algorithm
// of a real document's SignerInfo to SHA-1: the rule is on the algorithm,
// before any signature arithmetic.
func TestRealDocumentWithSHA1DigestIsRefused(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "realdoc", "coder-regular-2022.b64"))
	require.NoError(t, err)
	der, err := decodeBase64(string(raw))
	require.NoError(t, err)
	// sha256WithRSAEncryption (…1.1.11) → sha1WithRSAEncryption (…1.1.5),
	// in the digest set and in the SignerInfo alike.
	sha256RSA := []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b}
	require.Positive(t, bytes.Count(der, sha256RSA))
	weak := bytes.ReplaceAll(der, sha256RSA, []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05})
	d, err := parseDocument(base64.StdEncoding.EncodeToString(weak))
	require.NoError(t, err)
	err = d.verifySignature()
	require.Error(t, err)
	// What it says, the algorithm refused and the one Azure uses: the
	// golden file.
	testkit.NewMessages(t).Add("SHA-1 digest", err)
	var v any
	assert.NoError(t, json.Unmarshal(d.content, &v), "only the algorithm changed")
}
