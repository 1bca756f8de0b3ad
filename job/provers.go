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

// cloud is one cloud that can prove itself, registered whole: the prover
// a run builds (phase 2) and the inspector that checks, outside a run, the
// instance data that prover writes (`status` on the Secret's instanceData,
// `attestation inspect` on a document a customer sent).
type cloud struct {
	prover    func(cfg *Config, httpClient *http.Client, roots *x509.CertPool, log *slog.Logger) (providers.Prover, error)
	inspector func() providers.DocumentInspector
}

// clouds is the one place a cloud is registered, one line each. Adding a
// cloud touches providers/<cloud>/ (its detection, its Config with
// Validate, its Prover, which reports the parts of its evidence that are
// secret, and its DocumentInspector), its Config's field and Validate call
// in config.go, its settings in settings.go, and one line here; detection
// already names GCP and AWS so that the error says which cloud this is.
var clouds = map[providers.Cloud]cloud{
	providers.Azure: {prover: azureProver, inspector: func() providers.DocumentInspector { return &azure.DocumentInspector{} }},
}

// provers are the registered clouds' provers for one run, which read the
// trust anchors of ATTESTATION_ROOTS_FILE once.
func provers(cfg *Config, httpClient *http.Client, log *slog.Logger) (map[providers.Cloud]ProverFactory, error) {
	roots, err := attestationRoots(cfg.AttestationRoots)
	if err != nil {
		return nil, err
	}
	factories := make(map[providers.Cloud]ProverFactory, len(clouds))
	for c, reg := range clouds {
		factories[c] = func() (providers.Prover, error) { return reg.prover(cfg, httpClient, roots, log) }
	}
	return factories, nil
}

// azureProver is Azure's prover, from the Azure settings and the run's
// HTTP client, trust anchors and log.
func azureProver(cfg *Config, httpClient *http.Client, roots *x509.CertPool, log *slog.Logger) (providers.Prover, error) {
	az := cfg.Azure
	az.HTTPClient, az.Roots, az.Log = httpClient, roots, log
	az.HostNetworkRemedy = cfg.remedies().SetValues(false, "hostNetwork=true")
	return azure.New(az)
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

// documentInspector is the inspector of the cloud that proves, for
// `status` and `attestation inspect`. Azure is the one so far; with a
// second, this would try each registered inspector, told apart by the
// instance data's shape (Inspect's error says it is no document of its
// cloud).
func documentInspector() providers.DocumentInspector { return clouds[providers.Azure].inspector() }
