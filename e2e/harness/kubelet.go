package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// kubeletRedirects are the variables the process kubelet takes from the fake
// cloud instead of from the pod. A host process has no volumes, so every
// file the pod spec mounts (the federated token, the CA bundle, the attested
// document's roots, the region-server configuration with its certificate
// directory, DMI) is replaced by the fake cloud's own file; and the fake
// cloud listens on random loopback ports no manifest can name. Everything
// else comes from the pod as the API server built it: the Workload Identity
// IDs, the extension and the plan (which must equal the fake cloud's, see
// kubeletMustMatch), the registration code, the names from the downward API,
// the startup sleep and the CoreDNS switch.
var kubeletRedirects = []string{
	// Endpoints.
	"AZURE_IMDS_ENDPOINT", "GCP_METADATA_ENDPOINTS", "AWS_IMDS_ENDPOINTS", "AZURE_AUTHORITY_HOST",
	"ARM_ENDPOINT", "AIA_ALLOWED_HOSTS", "REGION_SERVER_PORT", "UPDATE_SERVER_HTTPS_PORT", "UPDATE_SERVER_HTTP_PORT",
	// The fake cloud's update servers listen on loopback, where a pod's
	// fake (kind) listens on the pod's address and needs no exception.
	"UPDATE_SERVER_ALLOW_LOOPBACK",
	// Files from volumes.
	"AZURE_FEDERATED_TOKEN_FILE", "SSL_CERT_FILE", "ATTESTATION_ROOTS_FILE", "REGIONSRV_CONFIG", "DMI_DIR_PATH",
}

// kubeletMustMatch are set by manifests/overlays/e2e and by the fake cloud
// alike; a difference means the overlay drifted from DefaultAzureConfig.
var kubeletMustMatch = []string{
	"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "EXTENSION_RESOURCE_ID",
	"MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID", "MARKETPLACE_PLAN_ID",
}

// kubeletIgnores are the fake cloud's settings for runs outside a pod that
// the pod sets for itself.
var kubeletIgnores = []string{"STARTUP_SLEEP_MAX", "VERIFY_RETRY_BACKOFF"}

// workloadIdentityOnly are what the Workload Identity webhook injects into a
// pod labelled for it (the token file, the authority, the IDs). A pod in
// managed-identity mode gets none of them, as on AKS: its AZURE_CLIENT_ID is
// the extension's identity, which the fake IMDS must know.
var workloadIdentityOnly = []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST"}

// KubeletEnv turns a pod's environment into the engine's: podEnv overlaid by
// the fake cloud's kubeletRedirects, plus KUBERNETES_TOKEN (a file holding
// the token the kubelet minted for the pod, where the projected
// ServiceAccount volume would put it) and KUBERNETES_CA_CERT (the plane's
// CA, that volume's ca.crt).
func KubeletEnv(podEnv []string, c Cloud, tokenFile, caFile string) ([]string, error) {
	cloudEnv, pod := c.Vars(), envMap(podEnv)
	var errs []error
	for k := range cloudEnv {
		if !slices.Contains(kubeletRedirects, k) && !slices.Contains(kubeletMustMatch, k) && !slices.Contains(kubeletIgnores, k) {
			errs = append(errs, fmt.Errorf("the fake cloud sets %s, which the process kubelet neither redirects nor checks", k))
		}
	}
	managed := pod["AZURE_CREDENTIAL_MODE"] == "managed-identity"
	for _, k := range kubeletMustMatch {
		want := cloudEnv[k]
		if managed && slices.Contains(workloadIdentityOnly, k) {
			want = ""
			if k == "AZURE_CLIENT_ID" {
				want = fakecloud.DefaultAzureConfig().ManagedIdentityClientID
			}
		}
		if pod[k] != want {
			errs = append(errs, fmt.Errorf("%s: the pod has %q, the fake cloud wants %q (align manifests/overlays/e2e/cronjob.yaml or the chart's values)", k, pod[k], want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	env := slices.Clone(podEnv)
	for _, k := range kubeletRedirects {
		if managed && slices.Contains(workloadIdentityOnly, k) {
			continue
		}
		env = append(env, k+"="+cloudEnv[k])
	}
	return append(env, "KUBERNETES_TOKEN="+tokenFile, "KUBERNETES_CA_CERT="+caFile), nil
}

// PodRun is one pod the process kubelet ran: its Job, its name, the
// engine's result, or why it could not run.
type PodRun struct {
	Job, Pod string
	Res      Result
	Err      error
}

// PodRuns are the pods a process kubelet ran, in the order they ended.
type PodRuns struct {
	mu   sync.Mutex
	runs []PodRun
}

func (r *PodRuns) add(pr PodRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, pr)
}

// ForJob returns the runs of the Job's pods; the test fails if any pod of
// the namespace could not be run.
func (r *PodRuns) ForJob(t testing.TB, name string) []PodRun {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []PodRun
	for _, p := range r.runs {
		require.NoError(t, p.Err, "pod %s", p.Pod)
		if p.Job == name {
			out = append(out, p)
		}
	}
	return out
}

// All returns every run so far; the test fails if any pod of the namespace
// could not be run.
func (r *PodRuns) All(t testing.TB) []PodRun {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.runs {
		require.NoError(t, p.Err, "pod %s", p.Pod)
	}
	return slices.Clone(r.runs)
}

// StartKubelet runs the Jobs' pods of namespace ns as engine processes
// against cloud c until the test ends, each with HANDOVER_SETTLE=e.Settle
// unless the pod sets its own (e.Settle as it is now).
func (e *Cluster) StartKubelet(ctx context.Context, t testing.TB, ns string, c Cloud) *PodRuns {
	runs := &PodRuns{}
	dir := t.TempDir()
	settle := e.Settle
	k := &controlplane.Kubelet{
		Plane: e.Plane, Namespace: ns, Logf: t.Logf,
		Run: func(ctx context.Context, pod *corev1.Pod, env []string, token string) int {
			pr := PodRun{Job: pod.Labels[batchv1.JobNameLabel], Pod: pod.Name, Res: Result{Code: -1}}
			defer func() { runs.add(pr) }()
			if e.Admission != nil {
				if env, pr.Err = e.Admission(ctx, pod, env); pr.Err != nil {
					return 1
				}
			}
			tokenFile := filepath.Join(dir, pod.Name+".token")
			if pr.Err = os.WriteFile(tokenFile, []byte(token), 0o600); pr.Err != nil {
				return 1
			}
			var full []string
			if args := pod.Spec.Containers[0].Args; len(args) > 0 && args[0] == "cleanup" {
				// The uninstall hook reaches the API server only, and its
				// pod carries no Workload Identity label: nothing of the
				// cloud, only its ServiceAccount's token.
				full = append(slices.Clone(env), "KUBERNETES_TOKEN="+tokenFile, "KUBERNETES_CA_CERT="+e.Plane.CAFile)
			} else if full, pr.Err = KubeletEnv(env, c, tokenFile, e.Plane.CAFile); pr.Err != nil {
				return 1
			}
			// The pod's resolver would be the cluster's DNS; a process asks e.DNS.
			full = append(full, "HANDOVER_DNS_SERVER="+e.DNS.Addr)
			if _, own := envMap(env)["HANDOVER_SETTLE"]; !own && settle > 0 {
				full = append(full, "HANDOVER_SETTLE="+settle.String())
			}
			wait, err := StartEngine(ctx, full, pod.Spec.Containers[0].Args...)
			if pr.Err = err; err != nil {
				return 1
			}
			pr.Res, pr.Err = wait()
			return pr.Res.Code
		},
	}
	k.Start(ctx)
	t.Cleanup(func() { assert.NoError(t, k.Stop(), "process kubelet") })
	return runs
}
