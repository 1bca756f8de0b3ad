package job

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
)

// ProverFactory builds the prover of one cloud for one run (phase 2).
type ProverFactory func() (providers.Prover, error)

// provers is the one place a cloud's prover is registered. Adding a cloud
// touches providers/<cloud>/ (its detection, its Config with Validate, its
// Prover, which reports the parts of its evidence that are secret, and its
// DocumentInspector) and one line here and in documentInspector; detection
// already names GCP and AWS so that the error says which cloud this is.
func provers(cfg *Config, httpClient *http.Client, log *slog.Logger) (map[providers.Cloud]ProverFactory, error) {
	roots, err := attestationRoots(cfg.AttestationRoots)
	if err != nil {
		return nil, err
	}
	return map[providers.Cloud]ProverFactory{
		providers.Azure: func() (providers.Prover, error) {
			az := cfg.Azure
			az.HTTPClient, az.Roots, az.Log = httpClient, roots, log
			return azure.New(az)
		},
	}, nil
}

// attestationRoots reads the trust anchors that replace the pinned Azure
// roots; nil (the pinned roots) when path is empty.
func attestationRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	certs, err := azure.ReadCertificates(path)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("config: ATTESTATION_ROOTS_FILE: %w", err))
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// documentInspector checks, outside a run, the instance data the proving
// cloud writes: `status` on the Secret's instanceData, `attestation
// inspect` on a document a customer sent. Azure is the one cloud that
// proves; a second would be told apart by its instance data's shape.
func documentInspector() providers.DocumentInspector { return &azure.DocumentInspector{} }
