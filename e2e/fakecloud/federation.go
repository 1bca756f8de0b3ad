package fakecloud

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// TokenExchangeAudience is the audience a federated identity credential of
// a Kubernetes workload names, and so the one Azure's Workload Identity
// webhook projects tokens for.
const TokenExchangeAudience = "api://AzureADTokenExchange"

// Federation is a federated identity credential as an admin creates it in
// Entra (az identity federated-credential create --issuer --subject
// --audiences), with the issuer's signing keys as Entra fetches them from
// the issuer's OIDC discovery document (jwks_uri). Set on a running cloud
// (Cloud.SetFederation, PUT /fakecloud/federation), Entra then takes a
// client assertion only when it is a JWT signed by one of Keys whose iss,
// sub and aud are these and that has not expired, and refuses any other
// with Entra's own codes: AADSTS50013 (signature), AADSTS700024 (expired),
// AADSTS70021 (no credential for this issuer, subject and audience, the
// assertion's values quoted as Entra quotes them).
type Federation struct {
	Issuer   string          `json:"issuer"`
	Subject  string          `json:"subject"`
	Audience string          `json:"audience,omitempty"` // default TokenExchangeAudience
	Keys     json.RawMessage `json:"keys"`               // the issuer's JWKS document ({"keys":[…]})
}

// federation holds the credential Entra checks assertions against.
type federation struct {
	mu   sync.Mutex
	cred *Federation
	keys map[string]*rsa.PublicKey // by kid
}

// set validates f and makes it the one Entra checks.
func (fd *federation) set(f *Federation) error {
	if f.Issuer == "" || f.Subject == "" {
		return errors.New("federation: issuer and subject are required")
	}
	if f.Audience == "" {
		f.Audience = TokenExchangeAudience
	}
	keys, err := parseJWKS(f.Keys)
	if err != nil {
		return fmt.Errorf("federation: %w", err)
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.cred, fd.keys = f, keys
	return nil
}

func (fd *federation) get() (*Federation, map[string]*rsa.PublicKey) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	return fd.cred, fd.keys
}

// SetFederation makes Entra check client assertions against f (see
// Federation) instead of the FederatedSubject option's unsigned check.
func (c *Cloud) SetFederation(f Federation) error { return c.federation.set(&f) }

// parseJWKS reads the RSA keys of a JWKS document (what a Kubernetes API
// server serves at /openid/v1/jwks; its service-account keys are RSA).
func parseJWKS(doc []byte) (map[string]*rsa.PublicKey, error) {
	var jwks struct {
		Keys []struct {
			Kty, Kid, N, E string
		} `json:"keys"`
	}
	if err := json.Unmarshal(doc, &jwks); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range jwks.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Kid, err)
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	if len(keys) == 0 {
		return nil, errors.New("keys: no RSA key")
	}
	return keys, nil
}

// assertion is what Entra reads of a client assertion.
type assertion struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Exp int64           `json:"exp"`
}

func (a assertion) audiences() []string {
	var auds []string
	if json.Unmarshal(a.Aud, &auds) != nil {
		var one string
		if json.Unmarshal(a.Aud, &one) == nil {
			auds = []string{one}
		}
	}
	return auds
}

// check is Entra's verdict on jwt under credential f with the issuer's
// keys: nil when it matches, else the AADSTS code and message Entra answers.
func (f *Federation) check(keys map[string]*rsa.PublicKey, jwt string, now time.Time) (int, string) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return 50027, "Invalid JWT token. The token is not in JWS compact format."
	}
	var header struct{ Alg, Kid string }
	var claims assertion
	h, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	p, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if errors.Join(err1, err2, err3) != nil || json.Unmarshal(h, &header) != nil || json.Unmarshal(p, &claims) != nil {
		return 50027, "Invalid JWT token. The token is malformed."
	}
	key := keys[header.Kid]
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if header.Alg != "RS256" || key == nil || rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) != nil {
		return 50013, fmt.Sprintf("Assertion failed signature validation. [Reason - The key was not found., Thumbprint of key used by client: '%s']", header.Kid)
	}
	if claims.Exp <= now.Unix() {
		return 700024, "Client assertion is not within its valid time range."
	}
	if claims.Iss != f.Issuer || claims.Sub != f.Subject || !slices.Contains(claims.audiences(), f.Audience) {
		return 70021, fmt.Sprintf("No matching federated identity record found for presented assertion. Assertion Issuer: '%s'. Assertion Subject: '%s'. Assertion Audience: '%s'.",
			claims.Iss, claims.Sub, strings.Join(claims.audiences(), ","))
	}
	return 0, ""
}

// acceptFederated is Entra's token endpoint with a federated identity
// credential: while Federation is set, an assertion it accepts is handed on
// as the configured federated token and one it refuses is answered with
// Entra's error; before that, an unsigned ServiceAccount token of subject
// sub (when set) is taken as the FederatedSubject option describes.
func (c *Cloud) acceptFederated(entra http.Handler, sub, federatedToken string) http.Handler {
	unsigned := entra
	if sub != "" {
		unsigned = acceptServiceAccount(entra, sub, federatedToken)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, keys := c.federation.get()
		if cred == nil || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token") {
			unsigned.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, entraError("invalid_request", 900144, "The request body must be a form."))
			return
		}
		if code, msg := cred.check(keys, r.PostForm.Get("client_assertion"), time.Now()); code != 0 {
			c.Azure.TokenRequests.Add(1)
			writeJSON(w, http.StatusBadRequest, entraError("invalid_client", code, msg))
			return
		}
		r.PostForm.Set("client_assertion", federatedToken)
		entra.ServeHTTP(w, r)
	})
}
