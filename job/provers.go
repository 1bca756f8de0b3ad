package job

import (
	"crypto/x509"
	"log/slog"
	"net/http"

	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
)

// ProverFactory builds the prover of one cloud for one run (phase 2).
type ProverFactory func() (providers.Prover, error)

// provers is the one place a cloud's prover is registered. Adding a cloud
// touches providers/<cloud>/ (its detection, its Config with Validate, its
// Prover, which reports the parts of its evidence that are secret) and one
// line here; detection already names GCP and AWS so that the error says
// which cloud this is.
func provers(cfg *Config, httpClient *http.Client, roots *x509.CertPool, log *slog.Logger) map[providers.Cloud]ProverFactory {
	return map[providers.Cloud]ProverFactory{
		providers.Azure: func() (providers.Prover, error) {
			az := cfg.Azure
			az.HTTPClient, az.Roots, az.Log = httpClient, roots, log
			return azure.New(az)
		},
	}
}
