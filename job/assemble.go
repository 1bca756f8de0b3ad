package job

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/proxyconnect"
	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/redact"
	"github.com/rancher/registration-engine/job/retry"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
)

// New assembles the Job that cfg describes: production collaborators pointed
// at the configured endpoints. stdout receives the dry run's Secret. secrets
// is the registry log's handler redacts through (see NewLogger); the Job,
// its Secret store and its Event recorder add to it and redact with it.
func New(cfg *Config, log *slog.Logger, secrets *redact.Registry, stdout io.Writer) (*Job, error) {
	httpClient, err := tlsClient(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	provers, err := provers(cfg, httpClient, log)
	if err != nil {
		return nil, err
	}
	j := &Job{
		Log: log,
		Detector: &providers.Detector{
			AzureEndpoints: []string{cfg.Azure.IMDSEndpoint},
			GCPEndpoints:   cfg.GCPMetadataEndpoints,
			AWSEndpoints:   cfg.AWSIMDSEndpoints,
			Budget:         cfg.DetectBudget,
			DMI:            os.DirFS(cfg.DMIDir),
			Dmidecode:      providers.RunDmidecode,
			Log:            log,
		},
		Provers: provers,
		// The configuration read and checked the file at start; phase 3
		// reports it.
		Settings:     cfg.RegionSettings,
		Finder:       &smt.Finder{Config: cfg.SMT, Log: log},
		RegCode:      cfg.RegCode,
		Secrets:      secrets,
		Deadline:     cfg.RunDeadline,
		SleepMax:     cfg.StartupSleepMax,
		Scheduled:    ScheduledRun(cfg.JobName, cfg.CronJobName, time.Now()),
		Retry:        retry.Policy{Tick: cfg.RetryInterval},
		FirstContact: cfg.FirstContact,
		OnlyWhenDue:  cfg.OnlyWhenDue,
	}

	switch {
	case cfg.DryRun:
		j.Store = PrintStore{W: stdout, Namespace: cfg.SecretNamespace, Name: cfg.SecretName}
		return j, nil
	case cfg.Output != "":
		j.Store = FileStore{Path: cfg.Output, Namespace: cfg.SecretNamespace, Name: cfg.SecretName}
		return j, nil
	}

	rc, err := kube.RESTConfig(kube.ClientOptions{
		Kubeconfig: cfg.Kubeconfig,
		Host:       cfg.KubeHost,
		Port:       cfg.KubePort,
		TokenFile:  cfg.KubeToken,
		CACert:     cfg.KubeCACert,
		UserAgent:  "registration-engine/" + Version,
	}, log)
	if err != nil {
		return nil, err
	}
	clients, err := kube.NewClients(rc)
	if err != nil {
		return nil, err
	}
	holder := cfg.PodName
	if holder == "" {
		holder, _ = os.Hostname()
	}
	store := &operator.SecretStore{
		Secrets:      clients.Secrets,
		Namespace:    cfg.SecretNamespace,
		Name:         cfg.SecretName,
		RetryMax:     cfg.K8sRetryMax,
		RetryBackoff: cfg.K8sRetryBackoff,
		Log:          log,
		Redact:       secrets,
	}
	j.Store = store
	lease := &kube.Lease{
		Leases:    clients.Leases,
		Namespace: cfg.SecretNamespace,
		Name:      cfg.LeaseName,
		Holder:    holder,
		Duration:  cfg.RunDeadline,
		JobName:   cfg.JobName,
		JobUID:    cfg.JobUID,
		Clock:     clock.RealClock{},
		Log:       log,
	}
	j.Lock, j.Runs, j.LastRun, j.JobName = lease, lease, lease, cfg.JobName
	if cfg.RetryCronJobName != "" {
		j.Retries = &kube.RetryCronJob{CronJobs: clients.CronJobs, Namespace: cfg.SecretNamespace, Name: cfg.RetryCronJobName}
	}
	in := cfg.InCluster
	in.OutsidePod, in.Port, in.Domains = cfg.Kubeconfig != "", cfg.SMT.HTTPSPort, cfg.SMT.Domains
	j.InCluster = incluster.New(in, clients, log)
	j.SecretRef = cfg.SecretNamespace + "/" + cfg.SecretName
	j.CodeRemedy = regCodeRemedy(cfg.remedies())
	watch := &operator.Watch{
		Secrets:       clients.Secrets,
		Registrations: clients.Registrations,
		Namespace:     cfg.SecretNamespace,
		Name:          cfg.SecretName,
		Log:           log,
	}
	j.Operator = &operator.Step{
		Watch:     watch,
		Wait:      cfg.OperatorWait,
		Recovery:  operator.NewRecovery(cfg.Recovery, clients, store, lease, watch, cfg.OperatorWait, secrets.String),
		SecretRef: j.SecretRef,
		CronJob:   cfg.CronJobName,
		Proxy:     operator.ProxyDeployment{Deployments: clients.Deployments},
	}
	// The Job runs in the Secret's namespace (the manifests set
	// REGISTRATION_SECRET_NAMESPACE from the pod's).
	if cfg.JobName != "" && cfg.JobUID != "" {
		j.Events = &kube.JobEvents{
			Events:    clients.Events,
			Namespace: cfg.SecretNamespace,
			JobName:   cfg.JobName,
			JobUID:    cfg.JobUID,
			Instance:  holder,
			Redact:    secrets,
		}
	}
	return j, nil
}

// tlsClient is the client for Entra and ARM: the system roots plus, when
// given, the PEM bundle of --ca-file / SSL_CERT_FILE.
func tlsClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("config: SSL_CERT_FILE: %w", err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, failure.Permanent(fmt.Errorf("config: SSL_CERT_FILE %s holds no PEM certificate", caFile))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr.OnProxyConnectResponse = proxyconnect.OnResponse // a refused tunnel names the proxy
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// Version is set at build time with -ldflags "-X ...job.Version=v1.2.3".
var Version = "dev"

// NewLogger is the run's logger: JSON (or text) on w at cfg's level, every
// line redacted through secrets, which starts with the configured code.
// klog's lines (client-go's) go through it too once main hands it over.
func NewLogger(w io.Writer, cfg *Config) (*slog.Logger, *redact.Registry) {
	secrets := redact.New(cfg.RegCode.Reveal())
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(redact.NewHandler(h, secrets)), secrets
}
