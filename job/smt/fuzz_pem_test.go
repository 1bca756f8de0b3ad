package smt

import (
	"bytes"
	"testing"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// FuzzVerifyCert feeds arbitrary update-server certificate downloads to the
// PEM and fingerprint check: it must never panic, and whatever it accepts
// must be exactly one parseable certificate whose fingerprint matched.
func FuzzVerifyCert(f *testing.F) {
	_, certPEM, err := fakecloud.SelfSigned("smt.example")
	if err != nil {
		f.Fatal(err)
	}
	fp, err := Fingerprint(certPEM)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(certPEM, fp)
	f.Add(append(append([]byte{}, certPEM...), certPEM...), fp)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), "00")
	f.Add([]byte("garbage"), "")
	f.Fuzz(func(t *testing.T, body []byte, fingerprint string) {
		got, err := verifyCert(body, fingerprint)
		if err != nil {
			return
		}
		again, err := verifyCert(got, fingerprint)
		if err != nil || !bytes.Equal(got, again) {
			t.Fatalf("accepted certificate does not verify again: %v", err)
		}
	})
}
