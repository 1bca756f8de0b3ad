package kube

import (
	"cmp"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rancher/registration-engine/internal/failure"
)

// In-cluster defaults: where the kubelet mounts the ServiceAccount.
const (
	DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	DefaultCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

	// InsecureCACert is the seed's KUBERNETES_CA_CERT value that turns off
	// verification of the API server's certificate.
	InsecureCACert = "False"

	// RequestTimeout bounds every API request, also with a kubeconfig that
	// sets none.
	RequestTimeout = 15 * time.Second

	// FieldManager names the engine in the managedFields of everything it
	// writes (the Secret, the Lease, Events, the CoreDNS entry). Server-side
	// apply keys ownership on it: changing it between releases turns the
	// engine's own earlier writes into another manager's fields.
	FieldManager = "registration-engine"
)

// ClientOptions says how to reach the API server. The zero value means
// in-cluster with the kubelet's ServiceAccount files.
type ClientOptions struct {
	// Kubeconfig (--kubeconfig, or KUBECONFIG with its list of files)
	// wins over everything else: a run from a workstation.
	Kubeconfig string
	// Host and Port are KUBERNETES_SERVICE_HOST/_PORT, which Kubernetes
	// injects into every pod. An empty Host means "not in a cluster".
	Host, Port string
	// TokenFile is the bearer token file (KUBERNETES_TOKEN). It is re-read
	// as the kubelet rotates it. Default DefaultTokenFile.
	TokenFile string
	// CACert is the API server's CA file (KUBERNETES_CA_CERT), or "False"
	// to skip verification, which logs a warning. Default DefaultCAFile.
	CACert    string
	UserAgent string
}

// RESTConfig builds the client configuration: from the kubeconfig when one
// is given, otherwise in-cluster from the options. Outside a cluster with no
// kubeconfig it fails with a permanent ErrNotInCluster; an unreadable token
// or CA file fails permanently too, naming the file.
func RESTConfig(o ClientOptions, log *slog.Logger) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		// One file must exist; a KUBECONFIG-style list merges the files
		// that do, as kubectl does.
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}
		if paths := filepath.SplitList(o.Kubeconfig); len(paths) > 1 {
			rules = &clientcmd.ClientConfigLoadingRules{Precedence: paths}
		}
		cfg, err = fromKubeconfig(rules, "", "kubeconfig "+o.Kubeconfig)
	} else {
		cfg, err = inCluster(o, logger(log))
	}
	if err != nil {
		return nil, err
	}
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	return cfg, nil
}

// WorkstationConfig loads the client configuration the way kubectl does,
// for a person running a subcommand with their own credentials: an explicit
// kubeconfig path when given, otherwise KUBECONFIG, then ~/.kube/config,
// then the in-cluster ServiceAccount. kubeContext, when set, picks a context
// other than the current one.
func WorkstationConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return fromKubeconfig(rules, kubeContext, "kubeconfig")
}

// fromKubeconfig loads kubeconfig files through rules, in kubeContext (""
// for the current context), and bounds every request by RequestTimeout
// unless the kubeconfig sets a timeout. what names the files in the error.
func fromKubeconfig(rules *clientcmd.ClientConfigLoadingRules, kubeContext, what string) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: %s: %w", what, err))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = RequestTimeout
	}
	return cfg, nil
}

func inCluster(o ClientOptions, log *slog.Logger) (*rest.Config, error) {
	if o.Host == "" {
		return nil, failure.Permanent(fmt.Errorf("kube: %w: KUBERNETES_SERVICE_HOST is unset; pass --kubeconfig to run from a workstation", ErrNotInCluster))
	}
	port := cmp.Or(o.Port, "443")
	tokenFile := cmp.Or(o.TokenFile, DefaultTokenFile)
	if fi, err := os.Stat(tokenFile); err != nil {
		return nil, failure.Permanent(fmt.Errorf("kube: token file (KUBERNETES_TOKEN): %w", err))
	} else if fi.IsDir() {
		return nil, failure.Permanent(fmt.Errorf("kube: token file (KUBERNETES_TOKEN) %s is a directory", tokenFile))
	}
	cfg := &rest.Config{
		Host:            "https://" + net.JoinHostPort(strings.Trim(o.Host, "[]"), port),
		BearerTokenFile: tokenFile,
		Timeout:         RequestTimeout,
		// The API server is the cluster's own Service: never through an
		// egress proxy, whatever HTTPS_PROXY and NO_PROXY say (client-go
		// would otherwise apply them; NO_PROXY rarely lists the Service IP).
		Proxy: NoProxy,
	}
	switch ca := cmp.Or(o.CACert, DefaultCAFile); {
	case strings.EqualFold(ca, InsecureCACert):
		log.Warn("KUBERNETES_CA_CERT is False: the API server's certificate is not verified; anyone on the path can read the registration code")
		cfg.Insecure = true
	default:
		pemBytes, err := os.ReadFile(ca)
		if err != nil {
			return nil, failure.Permanent(fmt.Errorf("kube: CA file (KUBERNETES_CA_CERT): %w", err))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pemBytes) {
			return nil, failure.Permanent(fmt.Errorf("kube: CA file (KUBERNETES_CA_CERT) %s holds no PEM certificate", ca))
		}
		cfg.CAFile = ca
	}
	return cfg, nil
}

// Clients are the parts of the API the engine uses, and only those (see
// api.go for why not the typed clientset).
type Clients struct {
	Secrets    SecretsGetter
	ConfigMaps ConfigMapsGetter
	Leases     LeasesGetter
	Events     EventsGetter
	// EndpointSlices finds CoreDNS's replicas for the handover.
	EndpointSlices EndpointSlicesGetter
	// Registrations reads rancher/scc-operator's Registrations.
	Registrations RegistrationsInterface
	// Deployments reads rancher/scc-operator's Deployment (its proxy
	// settings).
	Deployments DeploymentsGetter
	// CronJobs suspends and resumes the retry CronJob (RetryCronJob).
	CronJobs CronJobsGetter
}

// NewClients builds the clients on one shared HTTP client, so they share
// connections and the token.
func NewClients(cfg *rest.Config) (*Clients, error) {
	a, err := newAPI(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Secrets: a, ConfigMaps: a, Leases: a, Events: a, EndpointSlices: a, Registrations: registrations{a.scc}, Deployments: a, CronJobs: a}, nil
}

// NoProxy is a proxy function that never uses a proxy, for peers inside the
// cluster or on the node.
func NoProxy(*http.Request) (*url.URL, error) { return nil, nil }
