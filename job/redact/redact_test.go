package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/failure"
)

// A document shaped like Azure's attested one: quotes, a slash and angle
// brackets, so every escaping form differs from the raw one.
const (
	code = "INTERNAL-USE-ONLY-0000-0000"
	sig  = "MIIKZwYJKoZIhvcNAQcCoIIKWDCCClQ+/abcdefghijklmnopqrstuvwxyz0123456789=="
	doc  = `<document>{"encoding":"pkcs7","signature":"` + sig + `"}</document>`
)

func TestRegistryRedactsEveryEncodingAPeerMayEcho(t *testing.T) {
	r := New(code, doc, sig)
	jsonOnce := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	goOnce := func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
	tests := map[string]string{
		"code as it is":                           code,
		"code std base64":                         base64.StdEncoding.EncodeToString([]byte(code)),
		"code std base64 without padding":         base64.RawStdEncoding.EncodeToString([]byte(code)),
		"code URL base64":                         base64.URLEncoding.EncodeToString([]byte(code)),
		"code URL base64 without padding":         base64.RawURLEncoding.EncodeToString([]byte(code)),
		"document as it is":                       doc,
		"document std base64":                     base64.StdEncoding.EncodeToString([]byte(doc)),
		"document URL base64 unpadded":            base64.RawURLEncoding.EncodeToString([]byte(doc)),
		"document as a JSON string":               jsonOnce(doc),
		"document as a Go string":                 goOnce(doc),
		"document quoted twice (JSON in Go)":      goOnce(jsonOnce(doc)),
		"document quoted twice (JSON)":            jsonOnce(jsonOnce(doc)),
		"signature alone":                         sig,
		"signature alone, re-serialized document": `{"signature": "` + sig + `", "encoding": "pkcs7"}`,
	}
	for name, leaked := range tests {
		t.Run(name, func(t *testing.T) {
			msg := `admission webhook "policy.example.com" is unavailable for object {` + leaked + `}`
			got := r.String(msg)
			assert.Contains(t, got, Redacted)
			for _, secret := range []string{code, sig, doc} {
				for _, f := range Forms(secret) {
					assert.NotContains(t, got, f)
				}
			}
			assert.Contains(t, got, `admission webhook "policy.example.com" is unavailable`, "the rest of the message stays")
		})
	}
}

func TestRegistryIgnoresEmptyAndNil(t *testing.T) {
	var nilReg *Registry
	assert.Equal(t, "a b", nilReg.String("a b"))
	nilReg.Add("x")
	r := New("")
	assert.Equal(t, "a b", r.String("a b"))
}

func TestErrorKeepsItsClass(t *testing.T) {
	sentinel := errors.New("denied")
	r := New(code)
	err := r.Error(failure.Permanent(fmt.Errorf("apply: %w: regCode %s", sentinel, code)))
	assert.Equal(t, "apply: denied: regCode REDACTED", err.Error())
	assert.ErrorIs(t, err, sentinel)
	assert.True(t, failure.IsPermanent(err))
	plain := errors.New("nothing secret")
	assert.Same(t, plain, r.Error(plain))
}

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

func TestHandlerRedactsEveryAttribute(t *testing.T) {
	var buf bytes.Buffer
	reg := New()
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), reg))
	// Derived before the code is known, as a package's logger is.
	derived := log.With(slog.String("early", "kept "+code)).WithGroup("g")
	reg.Add(code)

	log.Warn("kubernetes request failed, retrying "+code,
		slog.String("error", `{"regCode":"`+base64.StdEncoding.EncodeToString([]byte(code))+`"}`),
		slog.Any("err", errors.New("denied "+code)),
		slog.Group("nested", slog.Group("deeper", slog.String("x", code))),
		slog.Any("slice", []string{"a", code}),
		slog.Any("stringer", stringer{code}),
		slog.Any("bytes", []byte(code)),
		slog.Any("data", map[string][]byte{"regCode": []byte(code)}),
		slog.Int("attempt", 1),
	)
	derived.Info("m", slog.String("y", code))
	out := buf.String()
	for _, f := range Forms(code) {
		assert.NotContains(t, out, f)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var first map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	assert.Equal(t, "kubernetes request failed, retrying REDACTED", first["msg"])
	assert.Equal(t, `{"regCode":"REDACTED"}`, first["error"])
	assert.Equal(t, "denied REDACTED", first["err"])
	assert.Equal(t, map[string]any{"deeper": map[string]any{"x": "REDACTED"}}, first["nested"])
	assert.EqualValues(t, 1, first["attempt"], "other kinds pass unchanged")
	var second map[string]any
	require.NoError(t, json.Unmarshal(lines[1], &second))
	assert.Equal(t, "kept REDACTED", second["early"], "an attribute derived before the value was learnt")
	assert.Equal(t, map[string]any{"y": "REDACTED"}, second["g"])
}
