package kind

import (
	"io/fs"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/manifests"
)

func decodeOverlay(t *testing.T, file string, into any) {
	t.Helper()
	b, err := fs.ReadFile(manifests.FS, file)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, into), file)
}

// The engine's side of overlays/e2e (cronjob.yaml, regionserverclnt-config)
// and the fake cloud's (fakecloud-*.yaml) must agree on every address, port
// and identity; otherwise only the kind tier, which needs Docker, would
// notice. This runs in go test ./... without it.
func TestOverlayPointsTheEngineAtTheFakeCloud(t *testing.T) {
	var dep appsv1.Deployment
	decodeOverlay(t, "overlays/e2e/fakecloud-deployment.yaml", &dep)
	var svc corev1.Service
	decodeOverlay(t, "overlays/e2e/fakecloud-service.yaml", &svc)
	var cj batchv1.CronJob
	decodeOverlay(t, "overlays/e2e/cronjob.yaml", &cj)
	var cfg corev1.ConfigMap
	decodeOverlay(t, "overlays/e2e/regionserverclnt-config.yaml", &cfg)
	var base batchv1.CronJob
	decodeOverlay(t, "base/cattle-scc-system/cronjob.yaml", &base)

	require.Len(t, dep.Spec.Template.Spec.Containers, 1)
	fc := dep.Spec.Template.Spec.Containers[0]
	flags := map[string]string{}
	for _, a := range fc.Args {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, ok, "fake cloud argument %q is not --name=value", a)
		flags[k] = v
	}
	host := flags["host"]
	require.Equal(t, svc.Name+"."+svc.Namespace+".svc", host, "the fake cloud's certificates must name its Service")
	assert.Equal(t, "0.0.0.0", flags["listen"])
	assert.Equal(t, "$(POD_IP)", flags["update-ip"], "the region server hands out the pod's own address")

	containerPort := map[string]string{} // port name → number
	for _, p := range fc.Ports {
		containerPort[p.Name] = itoa(p.ContainerPort)
	}
	servicePort := map[string]string{} // target port name → Service port
	for _, p := range svc.Spec.Ports {
		servicePort[p.TargetPort.String()] = itoa(p.Port)
	}

	require.Len(t, cj.Spec.JobTemplate.Spec.Template.Spec.Containers, 1)
	engine := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range engine.Env {
		env[e.Name] = e.Value
	}

	// endpoint: the engine's URL for a server reaches the Service port in
	// front of the container port the fake cloud's flag fixes.
	endpoint := func(t *testing.T, rawURL, server string) {
		u, err := url.Parse(strings.Split(rawURL, ",")[0])
		require.NoError(t, err)
		assert.Equal(t, host, u.Hostname())
		assert.Equal(t, flags[server+"-port"], containerPort[server], "container port %s", server)
		assert.Equal(t, servicePort[server], u.Port(), "the Service port in front of %s", server)
	}
	tests := map[string]func(t *testing.T){
		"IMDS":         func(t *testing.T) { endpoint(t, env["AZURE_IMDS_ENDPOINT"], "imds") },
		"GCP metadata": func(t *testing.T) { endpoint(t, env["GCP_METADATA_ENDPOINTS"], "imds") },
		"AWS IMDS":     func(t *testing.T) { endpoint(t, env["AWS_IMDS_ENDPOINTS"], "imds") },
		"Entra":        func(t *testing.T) { endpoint(t, env["AZURE_AUTHORITY_HOST"], "entra") },
		"ARM":          func(t *testing.T) { endpoint(t, env["ARM_ENDPOINT"], "arm") },
		"AIA": func(t *testing.T) {
			h, p, err := net.SplitHostPort(env["AIA_ALLOWED_HOSTS"])
			require.NoError(t, err)
			assert.Equal(t, host, h)
			assert.Equal(t, servicePort["imds"], p)
		},
		"region server": func(t *testing.T) {
			s, err := regionconfig.Parse([]byte(cfg.Data["regionserverclnt.cfg"]), "regionserverclnt-config.yaml")
			require.NoError(t, err)
			assert.Equal(t, []string{host}, s.RegionServers)
			assert.Equal(t, servicePort["region"], env["REGION_SERVER_PORT"])
			assert.Equal(t, flags["region-port"], containerPort["region"])
		},
		"update server (the pod's address, no Service)": func(t *testing.T) {
			assert.Equal(t, flags["update-https-port"], env["UPDATE_SERVER_HTTPS_PORT"])
			// rancher/scc-operator dials https://<name>, port 443; so
			// does the engine's check before it hands the Secret over.
			assert.Equal(t, "443", flags["update-https-port"], "the operator reaches the update server only on 443")
			assert.Equal(t, "443", containerPort["update-https"])
			var unprivileged string
			for _, s := range dep.Spec.Template.Spec.SecurityContext.Sysctls {
				if s.Name == "net.ipv4.ip_unprivileged_port_start" {
					unprivileged = s.Value
				}
			}
			assert.Equal(t, "0", unprivileged, "user %d binds 443 only with the sysctl", *dep.Spec.Template.Spec.SecurityContext.RunAsUser)
			assert.Equal(t, flags["update-http-port"], env["UPDATE_SERVER_HTTP_PORT"])
		},
		"Entra accepts the CronJob's projected token": func(t *testing.T) {
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			var audience string
			for _, v := range pod.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					if src.ServiceAccountToken != nil {
						audience = src.ServiceAccountToken.Audience
					}
				}
			}
			assert.Equal(t, "api://AzureADTokenExchange", audience)
			// The base names the ServiceAccount, the overlay the namespace.
			sa := base.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
			assert.Equal(t, "system:serviceaccount:"+cj.Namespace+":"+sa, flags["federated-subject"])
		},
	}
	for name, check := range tests {
		t.Run(name, check)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
