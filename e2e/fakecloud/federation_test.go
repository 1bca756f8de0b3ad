package fakecloud

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signedToken is a service-account token as a kube-apiserver signs it.
func signedToken(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"alg": "RS256", "kid": kid}) + "." + enc(claims)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	require.NoError(t, err)
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Entra takes a federated assertion only when the issuer's key signed it
// and its issuer, subject and audience are the credential's; otherwise it
// answers with the code a customer meets in Entra's own error.
func TestFederationChecksTheAssertionAsEntraDoes(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	require.NoError(t, err)
	var fd federation
	require.NoError(t, fd.set(&Federation{Issuer: "https://kubernetes.default.svc.cluster.local", Subject: "system:serviceaccount:cattle-scc-system:registration-engine", Keys: jwks}))
	cred, keys := fd.get()
	now := time.Now()
	good := map[string]any{"iss": cred.Issuer, "sub": cred.Subject, "aud": []string{TokenExchangeAudience}, "exp": now.Add(time.Hour).Unix()}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for k, v := range good {
			c[k] = v
		}
		c[k] = v
		return c
	}
	tests := map[string]struct {
		token string
		code  int
		says  string
	}{
		"the credential's own token":     {token: signedToken(t, key, "k1", good)},
		"one audience, as a string":      {token: signedToken(t, key, "k1", with("aud", TokenExchangeAudience))},
		"another ServiceAccount":         {token: signedToken(t, key, "k1", with("sub", "system:serviceaccount:cattle-scc-system:other")), code: 70021, says: "Assertion Subject: 'system:serviceaccount:cattle-scc-system:other'"},
		"another issuer":                 {token: signedToken(t, key, "k1", with("iss", "https://oidc.example")), code: 70021, says: "Assertion Issuer: 'https://oidc.example'"},
		"the API server's own audience":  {token: signedToken(t, key, "k1", with("aud", []string{"https://kubernetes.default.svc.cluster.local"})), code: 70021, says: "Assertion Audience: 'https://kubernetes.default.svc.cluster.local'"},
		"expired":                        {token: signedToken(t, key, "k1", with("exp", now.Add(-time.Minute).Unix())), code: 700024},
		"signed by another key":          {token: signedToken(t, other, "k1", good), code: 50013},
		"a key the issuer does not list": {token: signedToken(t, key, "k2", good), code: 50013},
		"not a JWT":                      {token: "eyJhbGciOiJSUzI1NiJ9.fake-service-account-token.sig", code: 50027},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, msg := cred.check(keys, tc.token, now)
			assert.Equal(t, tc.code, code, msg)
			assert.Contains(t, msg, tc.says)
		})
	}
}
