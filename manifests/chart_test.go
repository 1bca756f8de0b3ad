package manifests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
)

const (
	chartDir       = "chart/registration-engine"
	releaseName    = "registration-engine"
	chartNamespace = "cattle-scc-system"
)

// helmBin is HELM_BIN, or helm on PATH.
func helmBin(t *testing.T) string { return testkit.Helm(t) }

// kubectlBin is K8S_TESTBIN/kubectl, or kubectl on PATH.
func kubectlBin(t *testing.T) string {
	t.Helper()
	candidate := ""
	if d := os.Getenv("K8S_TESTBIN"); d != "" {
		candidate = filepath.Join(d, "kubectl")
	}
	return testkit.Tool(t, "kubectl", "K8S_TESTBIN", candidate, "make testbin")
}

// run execs bin and returns its standard output; a failure fails the test
// with its standard error.
func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	out, err := runErr(bin, args...)
	require.NoError(t, err)
	return out
}

func runErr(bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return testkit.Command(ctx, bin, args...)
}

// helmTemplate renders dir as `helm install` would, with the values files
// and --set pairs given.
func helmTemplate(t *testing.T, dir string, valueFiles []string, set ...string) []byte {
	t.Helper()
	out, err := helmTemplateErr(helmBin(t), dir, valueFiles, set...)
	require.NoError(t, err)
	return out
}

func helmTemplateErr(helm, dir string, valueFiles []string, set ...string) ([]byte, error) {
	args := []string{"template", releaseName, dir, "--namespace", chartNamespace}
	for _, f := range valueFiles {
		args = append(args, "--values", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return runErr(helm, args...)
}

// rendered is one object of a rendering (helm template or kubectl
// kustomize output).
type rendered struct {
	kind, namespace, name string
	obj                   map[string]any // generic JSON, compared field by field
	typed                 any            // the same object, strictly decoded into its API type
}

func (r rendered) key() string { return r.kind + "/" + r.namespace + "/" + r.name }

// splitObjects decodes a YAML stream into its objects by
// kind/namespace/name, each also strictly into its API type (see decode): a
// field kubectl would reject, or drop, fails here. Documents holding only
// comments are skipped.
func splitObjects(t *testing.T, stream []byte) map[string]rendered {
	t.Helper()
	objs := map[string]rendered{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &m))
		if len(m) == 0 {
			continue
		}
		o := decode(t, fmt.Sprintf("document %d", i), doc)
		r := rendered{kind: o.kind, namespace: o.obj.(metav1.Object).GetNamespace(), name: o.name, obj: m, typed: o.obj}
		require.NotContains(t, objs, r.key(), "rendered twice")
		objs[r.key()] = r
	}
	return objs
}

// renderedAs returns the rendered object key (kind/namespace/name) as its
// API type.
func renderedAs[T any](t *testing.T, objs map[string]rendered, key string) T {
	t.Helper()
	o, ok := objs[key]
	require.True(t, ok, "%s is rendered", key)
	v, ok := o.typed.(T)
	require.True(t, ok, "%s is a %T", key, o.typed)
	return v
}

// chartCronJob returns the rendering's CronJob and its one container.
func chartCronJob(t *testing.T, objs map[string]rendered) (*batchv1.CronJob, *corev1.Container) {
	t.Helper()
	cj := renderedAs[*batchv1.CronJob](t, objs, "CronJob/"+chartNamespace+"/registration-engine")
	require.Len(t, cj.Spec.JobTemplate.Spec.Template.Spec.Containers, 1)
	return cj, &cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
}

// minimal is the least a helm install outside the Marketplace sets: the
// image, the identity, the extension and the plan. The chart refuses to
// render without them (TestChartRefusals).
var minimal = []string{"testdata/chart/minimal.yaml"}

// The value sets of the golden renderings: testdata/chart/<name>.golden.
var goldenValueSets = map[string][]string{
	// The chart's defaults with what `helm install` must be given (docs/install.md, "With Helm").
	"default": minimal,
	// The bundle's values.yaml and what Azure adds at deployment.
	"marketplace": {"marketplace/values.yaml", "testdata/chart/marketplace.yaml"},
	// Rancher's registry convention, outside the Marketplace.
	"rancher": {"testdata/chart/rancher.yaml"},
	// What Azure Arc's extension manager passes a chart on a cluster
	// behind a proxy (Azure.*, Azure.proxySettings with a CA certificate).
	"azure-proxy": {"testdata/chart/minimal.yaml", "testdata/chart/azure-proxy.yaml"},
}

// helmLint runs helm lint --strict on dir with the values files given and
// fails on any error or warning.
func helmLint(t *testing.T, dir string, valueFiles ...string) {
	t.Helper()
	args := []string{"lint", "--strict", dir, "--namespace", chartNamespace}
	for _, f := range valueFiles {
		args = append(args, "--values", f)
	}
	out, err := runErr(helmBin(t), args...)
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "1 chart(s) linted, 0 chart(s) failed")
	assert.NotContains(t, string(out), "[WARNING]")
	assert.NotContains(t, string(out), "[ERROR]")
}

func TestChartLint(t *testing.T) {
	for name, files := range goldenValueSets {
		t.Run(name, func(t *testing.T) { helmLint(t, chartDir, files...) })
	}
	// chart-testing lints and installs with ci/*-values.yaml: the
	// chart's own copy of minimal.yaml, the same values.
	t.Run("chart-testing's ci values", func(t *testing.T) {
		ci := filepath.Join(chartDir, "ci", "minimal-values.yaml")
		helmLint(t, chartDir, ci)
		assert.Equal(t, readValues(t, minimal[0]), readValues(t, ci), "ci/minimal-values.yaml and testdata/chart/minimal.yaml")
	})
	// The defaults refuse to render; helm lint --strict says why as helm
	// template does, after the prefix helm's own fail carries
	// ("execution error at (<template position>): "), and with nothing of
	// the template engine's chain ("no template … associated with
	// template \"gotpl\"") around it.
	t.Run("the defaults' message", func(t *testing.T) {
		out, err := runErr(helmBin(t), "lint", "--strict", chartDir, "--namespace", chartNamespace)
		require.Error(t, err)
		assert.Contains(t, helmStderr(err), "7 value(s) to fix:\n- image.repository is not set", "lint's [INFO] Fail lines, on stderr")
		var errs []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "[ERROR]") {
				errs = append(errs, templateLine.ReplaceAllString(l, "$1"))
			}
		}
		require.Len(t, errs, 1, "%s", out)
		assert.True(t, strings.HasPrefix(errs[0], "[ERROR] templates/: execution error at (registration-engine/templates/validate.yaml): 7 value(s) to fix: [1] image.repository is not set: "), errs[0])
		assert.Contains(t, errs[0], " [7] marketplace.planId is still the placeholder 'REPLACE-ME-plan': ")
		for _, noise := range []string{"no template", "gotpl", "HELM_ERR", "error calling include", `\n`, `\"`} {
			assert.NotContains(t, errs[0], noise)
		}
	})
}

// TestChartGolden pins the full rendering of each value set; every object
// also decodes strictly into its API type. go test -run TestChartGolden
// -update rewrites the golden files.
func TestChartGolden(t *testing.T) {
	for name, files := range goldenValueSets {
		t.Run(name, func(t *testing.T) {
			out := helmTemplate(t, chartDir, files)
			splitObjects(t, out) // every object decodes strictly
			golden := filepath.Join("testdata", "chart", name+".golden")
			testkit.Golden(t, golden, out)
		})
	}
}

// The chart's default rendering and `kubectl kustomize overlays/azure` must be
// the same objects, field for field: whoever changes one (RBAC, the CronJob,
// the region servers) must change the other.
func TestChartMatchesAzureOverlay(t *testing.T) {
	chart, overlay := comparable(t, "overlays/azure", "image.tag="+releaseVersion(t))

	problems := differences(chart, overlay, releaseOnly)
	assert.Empty(t, problems, "chart (helm template %s) and overlay (kubectl kustomize overlays/azure) differ; change both:\n%s",
		chartDir, strings.Join(problems, "\n"))
	assert.Len(t, chart, 13, "besides the run Job and the cleanup hook: SA, three Roles, three RoleBindings (the engine's, CoreDNS's, the operator's Lease), the ClusterRole and its binding, the ConfigMap, the CronJob, the CoreDNS admission policy and its binding")
}

// releaseOnly: a difference only a release has, the variables that name it
// for the engine's remedies (a kustomize install has no release: the
// engine's remedies then name every form).
func releaseOnly(d string) bool {
	return strings.Contains(d, "only in the chart") && (strings.Contains(d, "env[name=RELEASE_MANAGER]") || strings.Contains(d, "env[name=RELEASE_NAME]"))
}

// helmLabels are the labels only a Helm release has (the release, the
// chart, its version): the overlay carries app.kubernetes.io/name alone.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/component",
	"app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// dropHelmLabels deletes helmLabels from every metadata.labels in obj
// (the object's, a CronJob's Job template's, a pod template's).
func dropHelmLabels(v any) {
	switch x := v.(type) {
	case map[string]any:
		if md, ok := x["metadata"].(map[string]any); ok {
			if l, ok := md["labels"].(map[string]any); ok {
				for _, k := range helmLabels {
					delete(l, k)
				}
			}
		}
		for _, e := range x {
			dropHelmLabels(e)
		}
	case []any:
		for _, e := range x {
			dropHelmLabels(e)
		}
	}
}

// With recovery off the kustomize install grants what the chart grants with
// operatorRecovery=false: no delete on scc-registration, no read of the
// operator's Lease. Before components/no-recovery the base granted the
// delete whatever OPERATOR_RECOVERY said, so a stolen token could delete
// the cluster's registration on an install that never recovers.
func TestKustomizeWithoutRecoveryMatchesTheChart(t *testing.T) {
	chart, overlay := comparable(t, "testdata/no-recovery", "operatorRecovery=false", "image.tag="+releaseVersion(t))

	// The component's strategic-merge patch puts the variable it sets
	// first; the order of env matters only to $(VAR) references, which the
	// CronJob has none of (below).
	problems := differences(chart, overlay, func(d string) bool { return strings.Contains(d, ".env: order: ") || releaseOnly(d) })
	assert.Empty(t, problems, "chart (operatorRecovery=false) and overlays/azure with components/no-recovery differ; change both:\n%s", strings.Join(problems, "\n"))
	cj := renderedAs[*batchv1.CronJob](t, overlay, "CronJob/"+chartNamespace+"/registration-engine")
	for _, e := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
		assert.NotContains(t, e.Value, "$(", "%s refers to another variable: env order matters", e.Name)
	}
	assert.Equal(t, "false", env(&cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0])["OPERATOR_RECOVERY"].Value)
	role := renderedAs[*rbacv1.Role](t, overlay, "Role/"+chartNamespace+"/registration-engine")
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") {
			assert.NotContains(t, r.Verbs, "delete", "no delete on the Secret without recovery")
		}
	}
	assert.NotContains(t, overlay, "Role/kube-system/registration-engine-operator-lease")
}

// diffValues lists the differences between chart value a and overlay value
// b, one line per field. Lists of objects with a name (env, containers,
// volumes) are compared by name and then by order.
func diffValues(path string, a, b any) []string {
	at := func(p string) string {
		if p == "" {
			return "(object)"
		}
		return p
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: chart %s, overlay %s", at(path), show(a), show(b))}
		}
		var out []string
		keys := slices.Sorted(maps.Keys(av))
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ax, aok := av[k]
			bx, bok := bv[k]
			switch {
			case !aok:
				out = append(out, fmt.Sprintf("%s: only in the overlay: %s", p, show(bx)))
			case !bok:
				out = append(out, fmt.Sprintf("%s: only in the chart: %s", p, show(ax)))
			default:
				out = append(out, diffValues(p, ax, bx)...)
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: chart %s, overlay %s", at(path), show(a), show(b))}
		}
		an, aNamed := names(av)
		bn, bNamed := names(bv)
		if aNamed && bNamed {
			var out []string
			for i, n := range an {
				j := slices.Index(bn, n)
				if j < 0 {
					out = append(out, fmt.Sprintf("%s[name=%s]: only in the chart: %s", path, n, show(av[i])))
					continue
				}
				out = append(out, diffValues(fmt.Sprintf("%s[name=%s]", path, n), av[i], bv[j])...)
			}
			for j, n := range bn {
				if !slices.Contains(an, n) {
					out = append(out, fmt.Sprintf("%s[name=%s]: only in the overlay: %s", path, n, show(bv[j])))
				}
			}
			if len(out) == 0 && !slices.Equal(an, bn) {
				out = append(out, fmt.Sprintf("%s: order: chart %v, overlay %v", path, an, bn))
			}
			return out
		}
		if len(av) != len(bv) {
			return []string{fmt.Sprintf("%s: chart %s, overlay %s", path, show(a), show(b))}
		}
		var out []string
		for i := range av {
			out = append(out, diffValues(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	default:
		if fmt.Sprintf("%T %v", a, a) != fmt.Sprintf("%T %v", b, b) {
			return []string{fmt.Sprintf("%s: chart %s, overlay %s", at(path), show(a), show(b))}
		}
		return nil
	}
}

// names returns the name of every element when all are objects with one.
func names(l []any) ([]string, bool) {
	var out []string
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) > 0
}

// show prints a value compactly: JSON when short, else indented YAML.
func show(v any) string {
	if j, err := json.Marshal(v); err == nil && len(j) <= 160 {
		return string(j)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "\n") {
		return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
	}
	return s
}

// imageLine finds `image:` fields in the templates.
var imageLine = regexp.MustCompile(`(?m)^\s*(?:-\s*)?image:\s*(.*)$`)

// Every image reference goes through the image helper, so a Marketplace
// relocation or a Rancher registry prefix reaches all of them, and no
// template hard-codes a registry.
func TestChartImagesGoThroughTheHelper(t *testing.T) {
	templates, err := filepath.Glob(filepath.Join(chartDir, "templates", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, templates)
	// The pod template every Job shares (_jobspec.tpl).
	templates = append(templates, filepath.Join(chartDir, "templates", "_jobspec.tpl"))
	found := 0
	for _, f := range templates {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range imageLine.FindAllStringSubmatch(string(data), -1) {
			found++
			assert.Equal(t, `{{ include "registration-engine.image" . | quote }}`, strings.TrimSpace(m[1]), "%s: an image not from the helper", f)
		}
	}
	assert.Positive(t, found)

	// And what the helper renders, for each convention: every container of
	// every pod template has exactly that image.
	tests := map[string]struct {
		set  []string
		want string
	}{
		"Marketplace digest": {
			set: []string{"global.azure.images.engine.registry=acr.example/relocated", "global.azure.images.engine.image=rancher/registration-engine",
				"global.azure.images.engine.digest=sha256:" + strings.Repeat("ab", 32)},
			want: "acr.example/relocated/rancher/registration-engine@sha256:" + strings.Repeat("ab", 32),
		},
		"Marketplace tag without a digest": {
			set:  []string{"global.azure.images.engine.registry=acr.example", "global.azure.images.engine.image=registration-engine", "global.azure.images.engine.tag=v1.2.3"},
			want: "acr.example/registration-engine:v1.2.3",
		},
		"Rancher systemDefaultRegistry": {
			set:  []string{"global.cattle.systemDefaultRegistry=registry.example:5000", "image.repository=rancher/registration-engine", "image.tag=v9"},
			want: "registry.example:5000/rancher/registration-engine:v9",
		},
		"Rancher without a registry": {
			set:  []string{"image.repository=rancher/registration-engine", "image.tag=v9"},
			want: "rancher/registration-engine:v9",
		},
		"tag defaults to appVersion, which is VERSION": {
			set:  []string{"image.tag="},
			want: "registration-engine:" + releaseVersion(t),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := splitObjects(t, helmTemplate(t, chartDir, minimal, tc.set...))
			n := 0
			for _, o := range objs {
				for _, img := range imagesOf(o.obj) {
					n++
					assert.Equal(t, tc.want, img, o.key())
				}
			}
			assert.Equal(t, 4, n, "one container in each pod template: the CronJob's, the retry CronJob's, the run at install, the cleanup hook")
		})
	}
}

// imagesOf returns every "image" string anywhere in obj.
func imagesOf(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "image" {
				out = append(out, s)
				continue
			}
			out = append(out, imagesOf(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, imagesOf(e)...)
		}
	}
	return out
}

// What the values change, as a user of each install path would see it.
// What Azure injects when it deploys the Marketplace bundle (the values
// marketplace/values.yaml ships as DONOTMODIFY), as --set pairs.
const injectedClientID = "9b2f3c1d-0000-4000-8000-00000000e0e1"

var azureInjected = []string{
	"global.azure.identity.clientId=" + injectedClientID,
	"global.azure.marketplace.planId=premium",
	"global.azure.extension.resourceId=/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/e",
}

func TestChartValues(t *testing.T) {
	type check func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container)
	workloadIdentity := func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
		e := env(c)
		assert.Equal(t, "workload-identity", e["AZURE_CREDENTIAL_MODE"].Value)
		assert.NotContains(t, e, "AZURE_CLIENT_ID", "the webhook injects it")
		assert.Equal(t, "true", cj.Spec.JobTemplate.Spec.Template.Labels["azure.workload.identity/use"])
		sa := renderedAs[*corev1.ServiceAccount](t, objs, "ServiceAccount/"+chartNamespace+"/registration-engine")
		assert.NotEmpty(t, sa.Annotations["azure.workload.identity/client-id"])
		assert.NotEmpty(t, sa.Annotations["azure.workload.identity/tenant-id"])
	}
	tests := map[string]struct {
		set   []string
		files []string
		// refused: the chart refuses the values, by values.schema.json (in
		// helm's words) or a fail in its templates; what the person
		// installing reads is in the golden file.
		refused bool
		check   check
	}{
		"the least an install sets: Workload Identity": {
			check: workloadIdentity,
		},
		"Azure injected a client ID: managed identity": {
			// minimal.yaml's extension ID is another; a bundle passes the
			// injected one's (TestMarketplaceStagedBundle).
			set: append(slices.Clone(azureInjected), "azure.extensionResourceId="),
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				e := env(c)
				assert.Equal(t, "managed-identity", e["AZURE_CREDENTIAL_MODE"].Value)
				assert.Equal(t, injectedClientID, e["AZURE_CLIENT_ID"].Value)
				assert.Equal(t, "premium", e["MARKETPLACE_PLAN_ID"].Value, "global.azure.marketplace.planId")
				assert.True(t, strings.HasSuffix(e["EXTENSION_RESOURCE_ID"].Value, "/extensions/e"), "global.azure.extension.resourceId")
				assert.NotContains(t, cj.Spec.JobTemplate.Spec.Template.Labels, "azure.workload.identity/use",
					"the webhook would otherwise project a federated token the run does not use")
				sa := renderedAs[*corev1.ServiceAccount](t, objs, "ServiceAccount/"+chartNamespace+"/registration-engine")
				assert.Empty(t, sa.Annotations)
			},
		},
		// AKS's IMDS restriction: the engine's pod on the node's network,
		// still asking the cluster's DNS (the handover check).
		// The uninstall hook's cleanup talks to the API server alone: its
		// pod keeps its own network (issue 45).
		"hostNetwork for a cluster with IMDS restriction": {
			set: []string{"hostNetwork=true"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, _ *corev1.Container) {
				pod := cj.Spec.JobTemplate.Spec.Template.Spec
				assert.True(t, pod.HostNetwork)
				assert.Equal(t, corev1.DNSClusterFirstWithHostNet, pod.DNSPolicy)
				cleanup := renderedAs[*batchv1.Job](t, objs, "Job/"+chartNamespace+"/registration-engine-cleanup").Spec.Template.Spec
				assert.False(t, cleanup.HostNetwork, "the cleanup pod needs no IMDS")
				assert.Empty(t, cleanup.DNSPolicy)
			},
		},
		"hostNetwork off by default": {
			check: func(t *testing.T, _ map[string]rendered, cj *batchv1.CronJob, _ *corev1.Container) {
				pod := cj.Spec.JobTemplate.Spec.Template.Spec
				assert.False(t, pod.HostNetwork)
				assert.Empty(t, pod.DNSPolicy, "the default ClusterFirst")
			},
		},
		"Azure injected a client ID, the customer chose Workload Identity": {
			set:   append(slices.Clone(azureInjected), "azure.extensionResourceId=", "azure.credentialMode=workload-identity"),
			check: workloadIdentity,
		},
		"the bundle rendered outside Azure passes DONOTMODIFY on": {
			files: []string{"marketplace/values.yaml"},
			set: []string{"global.azure.images.engine.registry=acr.example", "global.azure.images.engine.image=e", "global.azure.images.engine.digest=sha256:" + strings.Repeat("0", 64),
				"marketplace.publisherId=DONOTMODIFY", "marketplace.offerId=DONOTMODIFY"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				e := env(c)
				for _, k := range []string{"AZURE_CLIENT_ID", "EXTENSION_RESOURCE_ID", "MARKETPLACE_PLAN_ID", "MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID"} {
					assert.Equal(t, "DONOTMODIFY", e[k].Value, "%s: the engine names the setting", k)
				}
				assert.Equal(t, "managed-identity", e["AZURE_CREDENTIAL_MODE"].Value)
			},
		},
		"extra volumes are mounted beside the region server's": {
			set: []string{"extraVolumes[0].name=ca", "extraVolumes[0].configMap.name=proxy-ca",
				"extraVolumeMounts[0].name=ca", "extraVolumeMounts[0].mountPath=/etc/proxy-ca", "extraVolumeMounts[0].readOnly=true"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				vols := cj.Spec.JobTemplate.Spec.Template.Spec.Volumes
				require.Len(t, vols, 3)
				assert.Equal(t, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "proxy-ca"}}}}, vols[2])
				require.Len(t, c.VolumeMounts, 3)
				assert.Equal(t, corev1.VolumeMount{Name: "ca", MountPath: "/etc/proxy-ca", ReadOnly: true}, c.VolumeMounts[2])
			},
		},
		// Azure.proxySettings, which Azure Arc's extension manager passes
		// every extension chart: HTTPS_PROXY, HTTP_PROXY and NO_PROXY on
		// every pod that runs the engine, none on the cleanup's (it talks
		// to the API server alone); the user's extraEnv wins.
		"no Azure values: no proxy, no certificate": {
			check: func(t *testing.T, objs map[string]rendered, _ *batchv1.CronJob, _ *corev1.Container) {
				runs, cleanup := enginePods(t, objs)
				for k, pod := range withCleanup(runs, cleanup) {
					assert.Empty(t, proxyEnv(t, objs, pod), "%s", k)
					assert.Empty(t, proxyCAVolume(pod), "%s", k)
				}
				assert.NotContains(t, objs, "ConfigMap/"+chartNamespace+"/registration-engine-proxy-ca")
			},
		},
		"Azure's proxy settings, the proxy disabled: no proxy": {
			set: append(slices.Clone(arcProxy), "Azure.proxySettings.isProxyEnabled=false"),
			check: func(t *testing.T, objs map[string]rendered, _ *batchv1.CronJob, _ *corev1.Container) {
				runs, cleanup := enginePods(t, objs)
				for k, pod := range withCleanup(runs, cleanup) {
					assert.Empty(t, proxyEnv(t, objs, pod), "%s", k)
				}
			},
		},
		"Azure's proxy enabled: on every pod that runs the engine": {
			set: arcProxy,
			check: func(t *testing.T, objs map[string]rendered, _ *batchv1.CronJob, _ *corev1.Container) {
				runs, cleanup := enginePods(t, objs)
				assert.Empty(t, proxyEnv(t, objs, cleanup), "the cleanup talks to the API server alone")
				for k, pod := range runs {
					assert.Equal(t, map[string]string{
						"HTTPS_PROXY": "http://proxy.example:3128",
						"HTTP_PROXY":  "http://proxy.example:3128",
						"NO_PROXY":    "localhost,127.0.0.1,.svc,10.0.0.0/16",
					}, proxyEnv(t, objs, pod), "%s", k)
					assert.Empty(t, proxyCAVolume(pod), "%s: no proxyCert, no volume", k)
				}
			},
		},
		"Azure's proxy with a list for noProxy": {
			set: []string{"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpsProxy=http://proxy.example:3128", "Azure.proxySettings.noProxy={.svc,10.0.0.0/16}"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, _ *corev1.Container) {
				assert.Equal(t, map[string]string{"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": ".svc,10.0.0.0/16"}, proxyEnv(t, objs, cj.Spec.JobTemplate.Spec.Template.Spec))
			},
		},
		"extraEnv wins over Azure's proxy": {
			set: append(slices.Clone(arcProxy), "extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://mine.example:8080",
				"extraEnv[1].name=no_proxy", "extraEnv[1].value=.example"),
			check: func(t *testing.T, objs map[string]rendered, _ *batchv1.CronJob, _ *corev1.Container) {
				runs, _ := enginePods(t, objs)
				for k, pod := range runs {
					// Once each, and no NO_PROXY beside the user's no_proxy:
					// Go reads NO_PROXY first, which would hide it; a
					// variable twice would leave the pod's value to the
					// kubelet's order.
					assert.Equal(t, map[string]string{
						"HTTPS_PROXY": "http://mine.example:8080",
						"HTTP_PROXY":  "http://proxy.example:3128",
						"no_proxy":    ".example",
					}, proxyEnv(t, objs, pod), "%s", k)
					names := map[string]int{}
					for _, e := range pod.Containers[0].Env {
						names[e.Name]++
					}
					for n, count := range names {
						assert.Equal(t, 1, count, "%s: %s set %d times", k, n, count)
					}
				}
			},
		},
		"Azure's proxy certificate: trusted beside the system roots": {
			set: append(slices.Clone(arcProxy), "Azure.proxySettings.proxyCert="+testProxyCA, "Azure.proxySettings.isCustomCert=true"),
			check: func(t *testing.T, objs map[string]rendered, _ *batchv1.CronJob, _ *corev1.Container) {
				cm := renderedAs[*corev1.ConfigMap](t, objs, "ConfigMap/"+chartNamespace+"/registration-engine-proxy-ca")
				assert.Equal(t, map[string]string{"proxy-ca.crt": testProxyCA + "\n"}, cm.Data)
				runs, cleanup := enginePods(t, objs)
				assert.Empty(t, proxyCAVolume(cleanup), "the cleanup mounts none of the release's ConfigMaps")
				for k, pod := range runs {
					assertProxyCA(t, k, pod, cm.Name)
					assert.Equal(t, "http://proxy.example:3128", proxyEnv(t, objs, pod)["HTTPS_PROXY"], "%s", k)
				}
			},
		},
		// Arc passes a certificate alone for a TLS-inspecting proxy on
		// the way that needs no proxy variables.
		"Azure's proxy certificate without a proxy, as base64": {
			set: []string{"Azure.proxySettings.isProxyEnabled=false", "Azure.proxySettings.proxyCert=" + base64.StdEncoding.EncodeToString([]byte(testProxyCA))},
			check: func(t *testing.T, objs map[string]rendered, _ *batchv1.CronJob, _ *corev1.Container) {
				cm := renderedAs[*corev1.ConfigMap](t, objs, "ConfigMap/"+chartNamespace+"/registration-engine-proxy-ca")
				assert.Equal(t, map[string]string{"proxy-ca.crt": testProxyCA + "\n"}, cm.Data, "decoded")
				runs, _ := enginePods(t, objs)
				for k, pod := range runs {
					assertProxyCA(t, k, pod, cm.Name)
					assert.NotContains(t, proxyEnv(t, objs, pod), "HTTPS_PROXY", "%s", k)
				}
			},
		},
		"a user's SSL_CERT_FILE stays beside Azure's proxy certificate": {
			set: []string{"Azure.proxySettings.proxyCert=" + testProxyCA, "extraEnv[0].name=SSL_CERT_FILE", "extraEnv[0].value=/etc/proxy-ca/bundle.pem"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "/etc/proxy-ca/bundle.pem", env(c)["SSL_CERT_FILE"].Value)
				assertProxyCA(t, "the CronJob", cj.Spec.JobTemplate.Spec.Template.Spec, "registration-engine-proxy-ca")
			},
		},
		"unknown credential mode": {
			set:     []string{"azure.credentialMode=client-secret"},
			refused: true,
		},
		"managed identity without a client ID": {
			set:     []string{"azure.credentialMode=managed-identity"},
			refused: true,
		},
		"Marketplace image without digest or tag": {
			set:     []string{"global.azure.images.engine.registry=acr.example", "global.azure.images.engine.image=e"},
			refused: true,
		},
		"billing label only when asked for": {
			set: []string{"marketplace.billingLabel=true"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, releaseName, cj.Spec.JobTemplate.Spec.Template.Labels["azure-extensions-usage-release-identifier"])
			},
		},
		"no billing label by default": {
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.NotContains(t, cj.Spec.JobTemplate.Spec.Template.Labels, "azure-extensions-usage-release-identifier",
					"per-pod billing would bill the CronJob's pods")
				assert.Equal(t, map[string]string{"kubernetes.io/os": "linux"}, cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector)
			},
		},
		"image by digest, a parent chart's registry and pull secrets": {
			set: []string{"image.digest=sha256:" + strings.Repeat("ab", 32), "global.imageRegistry=registry.example:5000",
				"imagePullSecrets[0].name=ours", "global.imagePullSecrets[0]=parents", "global.imagePullSecrets[1].name=ours"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "registry.example:5000/registration-engine@sha256:"+strings.Repeat("ab", 32), c.Image, "repository@digest, the tag unused")
				assert.Equal(t, []corev1.LocalObjectReference{{Name: "ours"}, {Name: "parents"}}, cj.Spec.JobTemplate.Spec.Template.Spec.ImagePullSecrets, "each once")
			},
		},
		"Rancher's registry prefix wins over a parent's global.imageRegistry": {
			set: []string{"global.cattle.systemDefaultRegistry=rancher.example", "global.imageRegistry=registry.example"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.True(t, strings.HasPrefix(c.Image, "rancher.example/registration-engine:"), c.Image)
			},
		},
		"GOMEMLIMIT follows the memory limit": {
			set: []string{"resources.limits.memory=128Mi", "extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://proxy.example:3128"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "96MiB", env(c)["GOMEMLIMIT"].Value, "three quarters of 128Mi")
				assert.Equal(t, "http://proxy.example:3128", env(c)["HTTPS_PROXY"].Value, "a variable the chart does not set passes")
			},
		},
		"registration code: a Secret the CronJob reads": {
			set: []string{"registrationCode=CODE-123"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				s := renderedAs[*corev1.Secret](t, objs, "Secret/"+chartNamespace+"/registration-code")
				assert.Equal(t, "CODE-123", string(s.Data["regCode"]))
				ref := env(c)["REGISTRATION_CODE"].ValueFrom.SecretKeyRef
				require.NotNil(t, ref)
				assert.Equal(t, s.Name, ref.Name)
				assert.Contains(t, s.Data, ref.Key)
			},
		},
		"registration code pasted with white space around it: trimmed": {
			set: []string{"registrationCode= CODE-123\t"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				s := renderedAs[*corev1.Secret](t, objs, "Secret/"+chartNamespace+"/registration-code")
				assert.Equal(t, "CODE-123", string(s.Data["regCode"]))
			},
		},
		"a blank registration code is none: no Secret": {
			set: []string{"registrationCode=  "},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.NotContains(t, objs, "Secret/"+chartNamespace+"/registration-code")
			},
		},
		"no registration code: no Secret, so a hand-made one is not overwritten": {
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.NotContains(t, objs, "Secret/"+chartNamespace+"/registration-code")
			},
		},
		"inClusterDNS=false drops CoreDNS's Roles and the policy, not the operator's Lease": {
			set: []string{"inClusterDNS=false"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "false", env(c)["IN_CLUSTER_DNS"].Value)
				for k := range objs {
					assert.NotContains(t, k, "coredns")
					assert.NotContains(t, k, "corefile")
					assert.NotContains(t, k, "ValidatingAdmissionPolicy")
				}
				assert.Contains(t, objs, "Role/kube-system/registration-engine-operator-lease", "recovery still reads the operator's Lease")
			},
		},
		"operatorRecovery=false drops the Secret's delete and the operator's Lease": {
			set: []string{"operatorRecovery=false"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "false", env(c)["OPERATOR_RECOVERY"].Value)
				assert.NotContains(t, objs, "Role/kube-system/registration-engine-operator-lease")
				assert.NotContains(t, objs, "RoleBinding/kube-system/registration-engine-operator-lease")
				role := renderedAs[*rbacv1.Role](t, objs, "Role/"+chartNamespace+"/registration-engine")
				for _, r := range role.Rules {
					if slices.Contains(r.Resources, "secrets") {
						assert.Equal(t, []string{"get", "create", "patch"}, r.Verbs, "no delete without recovery")
					}
				}
				assert.Contains(t, objs, "Role/kube-system/registration-engine-coredns", "the CoreDNS grants stay")
			},
		},
		"AKS's CoreDNS layout by default: coredns is only read": {
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				role := renderedAs[*rbacv1.Role](t, objs, "Role/kube-system/registration-engine-coredns")
				for _, r := range role.Rules {
					if slices.Contains(r.Verbs, "patch") {
						assert.Equal(t, []string{"coredns-custom"}, r.ResourceNames, "only coredns-custom is patched on AKS")
					}
				}
				assert.NotContains(t, objs, "Role/kube-system/registration-engine-corefile")
				assert.Contains(t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns")
			},
		},
		"coreDNSLayout=corefile: patch on the Corefile too": {
			set: []string{"coreDNSLayout=corefile"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				role := renderedAs[*rbacv1.Role](t, objs, "Role/kube-system/registration-engine-corefile")
				assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"coredns"}, Verbs: []string{"patch"}}}, role.Rules)
				rb := renderedAs[*rbacv1.RoleBinding](t, objs, "RoleBinding/kube-system/registration-engine-corefile")
				assert.Equal(t, role.Name, rb.RoleRef.Name)
				assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "registration-engine", Namespace: chartNamespace}}, rb.Subjects)
			},
		},
		"unknown CoreDNS layout": {
			set:     []string{"coreDNSLayout=kubeadm"},
			refused: true,
		},
		"updateServerDomains reach the engine and the admission policy": {
			set: []string{"updateServerDomains={susecloud.net,smt.example.org}"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "susecloud.net,smt.example.org", env(c)["UPDATE_SERVER_DOMAINS"].Value)
				assert.Equal(t, "['susecloud.net', 'smt.example.org']", policyVariable(t, objs, "domains"))
			},
		},
		"clusterAddressRanges reach the engine and the admission policy": {
			set: []string{"clusterAddressRanges={10.0.0.0/8,203.0.113.0/24}"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				assert.Equal(t, "10.0.0.0/8,203.0.113.0/24", env(c)["CLUSTER_ADDRESS_RANGES"].Value)
				assert.Equal(t, "['10.0.0.0/8', '203.0.113.0/24']", policyVariable(t, objs, "clusterRanges"))
			},
		},
		"loopback entries only for test installs": {
			set: []string{"inClusterDNSTestLoopback=true"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				vap := renderedAs[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns")
				require.NotEmpty(t, vap.Spec.Variables)
				assert.Equal(t, admissionregistrationv1.Variable{Name: "allowLoopback", Expression: "true"}, vap.Spec.Variables[0])
			},
		},
		"an update server domain that is no DNS name": {
			set:     []string{"updateServerDomains={susecloud.net']}"},
			refused: true,
		},
		"the admission policy binds the release's ServiceAccount": {
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				vap := renderedAs[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns")
				require.Len(t, vap.Spec.MatchConditions, 1)
				assert.Equal(t, "request.userInfo.username == 'system:serviceaccount:"+chartNamespace+":"+cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName+"'", vap.Spec.MatchConditions[0].Expression)
			},
		},
		"region-server certificates from the values": {
			set: []string{"regionServerCerts.23\\.100\\.36\\.229\\.pem=-----BEGIN CERTIFICATE-----A"},
			check: func(t *testing.T, objs map[string]rendered, cj *batchv1.CronJob, c *corev1.Container) {
				cm := renderedAs[*corev1.ConfigMap](t, objs, "ConfigMap/"+chartNamespace+"/region-server-certs")
				assert.Equal(t, map[string]string{"23.100.36.229.pem": "-----BEGIN CERTIFICATE-----A\n"}, cm.Data)
			},
		},
	}
	helm := helmBin(t)
	// What the chart's own refusals say, the value to set and where it
	// comes from among it: the golden file.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = minimal
			}
			out, err := helmTemplateErr(helm, chartDir, files, tc.set...)
			if tc.refused {
				require.Error(t, err)
				msgs.Add(name, chartRefusal(err))
				return
			}
			require.NoError(t, err)
			objs := splitObjects(t, out)
			cj, c := chartCronJob(t, objs)
			tc.check(t, objs, cj, c)
		})
	}
}

// arcProxy is what Azure Arc's extension manager passes an extension
// chart for a cluster behind a proxy (Azure.proxySettings).
var arcProxy = []string{
	"Azure.proxySettings.isProxyEnabled=true",
	"Azure.proxySettings.httpsProxy=http://proxy.example:3128",
	"Azure.proxySettings.httpProxy=http://proxy.example:3128",
	`Azure.proxySettings.noProxy=localhost\,127.0.0.1\,.svc\,10.0.0.0/16`,
	"Azure.proxySettings.isCustomCert=false",
}

// testProxyCA is a proxy's CA certificate (self-signed, P-256).
const testProxyCA = `-----BEGIN CERTIFICATE-----
MIIBeTCCASGgAwIBAgIUSEWdGNbZxQjMuU+aly5F94zjW3MwCgYIKoZIzj0EAwIw
EzERMA8GA1UEAwwIcHJveHktY2EwHhcNMjYxMjA1MDI0NjA2WhcNMzYxMjAyMDI0
NjA2WjATMREwDwYDVQQDDAhwcm94eS1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABOIHDruAfuugbY+tsXOBZ0xsn9ZP3+pQtWlwBOxo5emyEK76zfJ8NuacHfaR
7j+B0/v+5eGIjrmj6PdXlrIRIf6jUzBRMB0GA1UdDgQWBBRz8QLa7gEcGqmsfhfo
Bv/Nc1NMvTAfBgNVHSMEGDAWgBRz8QLa7gEcGqmsfhfoBv/Nc1NMvTAPBgNVHRMB
Af8EBTADAQH/MAoGCCqGSM49BAMCA0YAMEMCHz5dEySYRn+jy7x9g1HoC/EDWm7q
vIP2aXKVX/BSDU4CIH3T3gs4R+GbTDNH3hU/Ihlu0Mpq4ZQ9eoz45TtkW+6b
-----END CERTIFICATE-----`

// enginePods are the pod specs of every Job the release renders that runs
// the engine: those that register, by object (the CronJob's, the retry
// CronJob's, the run at install's), and the uninstall hook's cleanup.
func enginePods(t *testing.T, objs map[string]rendered) (runs map[string]corev1.PodSpec, cleanup corev1.PodSpec) {
	t.Helper()
	runs = map[string]corev1.PodSpec{}
	for k, o := range objs {
		switch v := o.typed.(type) {
		case *batchv1.CronJob:
			runs[k] = v.Spec.JobTemplate.Spec.Template.Spec
		case *batchv1.Job:
			runs[k] = v.Spec.Template.Spec
		}
	}
	const cleanupJob = "Job/" + chartNamespace + "/registration-engine-cleanup"
	require.Contains(t, runs, cleanupJob)
	cleanup = runs[cleanupJob]
	delete(runs, cleanupJob)
	require.Len(t, runs, 3, "the CronJob, the retry CronJob and the run at install: %v", slices.Collect(maps.Keys(runs)))
	return runs, cleanup
}

// withCleanup is runs and the cleanup's pod, for what holds for all four.
func withCleanup(runs map[string]corev1.PodSpec, cleanup corev1.PodSpec) map[string]corev1.PodSpec {
	all := maps.Clone(runs)
	all["the cleanup"] = cleanup
	return all
}

// proxyEnv are the proxy variables of the pod's engine container (any
// case), and SSL_CERT_DIR, as the container gets them: a variable the pod
// takes from a Secret (secretKeyRef) has the value of that Secret in objs,
// which the release must render.
func proxyEnv(t *testing.T, objs map[string]rendered, pod corev1.PodSpec) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		switch strings.ToUpper(e.Name) {
		case "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_DIR":
			out[e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ref := e.ValueFrom.SecretKeyRef
				secret := renderedAs[*corev1.Secret](t, objs, "Secret/"+chartNamespace+"/"+ref.Name)
				require.Contains(t, secret.Data, ref.Key, "%s: the Secret %s holds %s", e.Name, ref.Name, ref.Key)
				out[e.Name] = string(secret.Data[ref.Key])
			}
		}
	}
	return out
}

// proxyCAVolume is the name of the ConfigMap the pod mounts as proxy-ca,
// or "".
func proxyCAVolume(pod corev1.PodSpec) string {
	for _, v := range pod.Volumes {
		if v.Name == "proxy-ca" && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}

// assertProxyCA: the pod mounts the ConfigMap cm read-only and its
// SSL_CERT_DIR lists the mount beside the system directories Go reads
// by default (crypto/x509 root_linux.go), so the system roots stay.
func assertProxyCA(t *testing.T, what string, pod corev1.PodSpec, cm string) {
	t.Helper()
	assert.Equal(t, cm, proxyCAVolume(pod), "%s", what)
	var mount *corev1.VolumeMount
	for i, m := range pod.Containers[0].VolumeMounts {
		if m.Name == "proxy-ca" {
			mount = &pod.Containers[0].VolumeMounts[i]
		}
	}
	require.NotNil(t, mount, "%s mounts proxy-ca", what)
	assert.True(t, mount.ReadOnly, "%s", what)
	var certDir string
	for _, e := range pod.Containers[0].Env {
		if e.Name == "SSL_CERT_DIR" {
			certDir = e.Value
		}
	}
	dirs := strings.Split(certDir, ":")
	assert.Equal(t, []string{mount.MountPath, "/etc/ssl/certs", "/etc/pki/tls/certs"}, dirs, "%s: SSL_CERT_DIR", what)
}

// The certificates shipped as chart files (certs/*.pem), which a
// Marketplace install needs since it cannot run a manual step, reach the
// ConfigMap; a value of the same name replaces one.
func TestChartShipsCertificateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registration-engine")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	certs, err := filepath.Glob(filepath.Join(dir, "certs", "*.pem"))
	require.NoError(t, err)
	require.Empty(t, certs, "the repository ships no certificates; this test adds its own")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "certs", "40.121.202.140.pem"), []byte("PEM-FILE-B\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "certs", "52.187.53.250.pem"), []byte("PEM-FILE-C\n"), 0o644))

	objs := splitObjects(t, helmTemplate(t, dir, minimal, "regionServerCerts.52\\.187\\.53\\.250\\.pem=-----BEGIN CERTIFICATE-----VALUE-C"))
	cm := renderedAs[*corev1.ConfigMap](t, objs, "ConfigMap/"+chartNamespace+"/region-server-certs")
	assert.Equal(t, map[string]string{"40.121.202.140.pem": "PEM-FILE-B\n", "52.187.53.250.pem": "-----BEGIN CERTIFICATE-----VALUE-C\n"}, cm.Data)

	// And the CronJob mounts that ConfigMap at the certLocation of the
	// rendered regionserverclnt.cfg.
	cj, c := chartCronJob(t, objs)
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/usr/lib/regionService/certs" {
			volume = m.Name
		}
	}
	require.NotEmpty(t, volume, "a mount at /usr/lib/regionService/certs")
	var source string
	for _, v := range cj.Spec.JobTemplate.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			source = v.ConfigMap.Name
		}
	}
	assert.Equal(t, cm.Name, source, "the volume mounted at certLocation")
	cfg := renderedAs[*corev1.ConfigMap](t, objs, "ConfigMap/"+chartNamespace+"/regionserverclnt-config")
	assert.Contains(t, cfg.Data["regionserverclnt.cfg"], "certLocation = /usr/lib/regionService/certs")
}

// archLabel is the node label the scheduler matches the image's
// architectures against.
const archLabel = "kubernetes.io/arch"

// schedulableArchitectures returns the kubernetes.io/arch values a pod may
// be scheduled on, from its nodeSelector and its required node affinity;
// nil when nothing restricts them, so the pod may land on any node. Only
// what the scheduler enforces counts: preferred affinity does not.
func schedulableArchitectures(t *testing.T, pod corev1.PodSpec) []string {
	t.Helper()
	var allowed []string
	restrict := func(values []string) {
		if allowed == nil {
			allowed = slices.Clone(values)
			return
		}
		allowed = slices.DeleteFunc(allowed, func(a string) bool { return !slices.Contains(values, a) })
	}
	if a, ok := pod.NodeSelector[archLabel]; ok {
		restrict([]string{a})
	}
	if pod.Affinity != nil && pod.Affinity.NodeAffinity != nil && pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		// Terms are ORed: each must restrict the architecture, or one of
		// them lets the pod onto any node. Expressions within one are ANDed.
		terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		restricts := len(terms) > 0
		union := []string{}
		for _, term := range terms {
			var inTerm []string
			found := false
			for _, e := range term.MatchExpressions {
				if e.Key != archLabel {
					continue
				}
				require.Equal(t, corev1.NodeSelectorOpIn, e.Operator, "kubernetes.io/arch is matched with In")
				if found {
					inTerm = slices.DeleteFunc(inTerm, func(a string) bool { return !slices.Contains(e.Values, a) })
				} else {
					inTerm, found = slices.Clone(e.Values), true
				}
			}
			restricts = restricts && found
			for _, a := range inTerm {
				if !slices.Contains(union, a) {
					union = append(union, a)
				}
			}
		}
		if restricts {
			restrict(union)
		}
	}
	if allowed != nil {
		slices.Sort(allowed)
	}
	return allowed
}

// The engine's pod is scheduled only on nodes whose architecture its image
// carries: on any other it dies with "exec format error", and AKS clusters
// commonly add arm64 node pools. The chart's default and the overlays allow
// both architectures `make image` builds; the Marketplace bundle, whose image
// is linux/amd64 only, allows amd64 alone, and so does the kind overlay,
// whose image is built for the kind node only.
func TestChartSchedulesOnlyWhereTheImageRuns(t *testing.T) {
	both, amd64 := []string{"amd64", "arm64"}, []string{"amd64"}
	chart := map[string]struct {
		files []string
		set   []string
		want  []string
	}{
		"chart defaults":                       {files: minimal, want: both},
		"Marketplace bundle, as Azure runs it": {files: goldenValueSets["marketplace"], want: amd64},
		"Rancher install":                      {files: goldenValueSets["rancher"], want: both},
		"an arm64-only image":                  {files: minimal, set: []string{"architectures={arm64}"}, want: []string{"arm64"}},
	}
	helm := helmBin(t)
	for name, tc := range chart {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplateErr(helm, chartDir, tc.files, tc.set...)
			require.NoError(t, err)
			cj, _ := chartCronJob(t, splitObjects(t, out))
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			assert.Equal(t, tc.want, schedulableArchitectures(t, pod), "the architectures the engine's pod may be scheduled on")
			assert.Equal(t, "linux", pod.NodeSelector["kubernetes.io/os"])
		})
	}
	// What the refusal says, the values to list and why: the golden file.
	msgs := testkit.NewMessages(t)
	t.Run("an empty list is refused", func(t *testing.T) {
		_, err := helmTemplateErr(helm, chartDir, minimal, "architectures=null")
		require.Error(t, err)
		msgs.Add("an empty list", chartRefusal(err))
	})
}

// The overlays, as kubectl kustomize renders them, schedule the engine's pod
// (and the kind tier's fake cloud) only where its image runs, like the
// chart (TestChartSchedulesOnlyWhereTheImageRuns).
func TestKustomizeSchedulesOnlyWhereTheImageRuns(t *testing.T) {
	both, amd64 := []string{"amd64", "arm64"}, []string{"amd64"}
	kubectl := kubectlBin(t)
	for dir, want := range map[string][]string{"base": both, "overlays/azure": both, "overlays/e2e": amd64} {
		t.Run("kustomize "+dir, func(t *testing.T) {
			objs := splitObjects(t, run(t, kubectl, "kustomize", dir))
			cj := renderedAs[*batchv1.CronJob](t, objs, "CronJob/cattle-scc-system/registration-engine")
			assert.Equal(t, want, schedulableArchitectures(t, cj.Spec.JobTemplate.Spec.Template.Spec), "the architectures the engine's pod may be scheduled on")
			for k, o := range objs {
				if d, ok := o.typed.(*appsv1.Deployment); ok {
					assert.Equal(t, amd64, schedulableArchitectures(t, d.Spec.Template.Spec), "%s: its image is built for amd64 only", k)
				}
			}
		})
	}
}

// releaseVersion is the one version source, VERSION at the repository's
// root.
func releaseVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "VERSION"))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// helmStderr is what helm printed on its standard error, from runErr's
// error (testkit.Command appends it after the exit status).
func helmStderr(err error) string {
	_, after, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimSpace(after)
}

// chartRefusal is helm's standard error for a refusal of the chart's own
// (a fail in its templates), the template line numbers left out: they move
// with every edit of the templates, the message does not.
func chartRefusal(err error) error {
	return errors.New(templateLine.ReplaceAllString(helmStderr(err), "$1"))
}

var (
	templateLine = regexp.MustCompile(`(\.(?:tpl|yaml)):\d+:\d+`)
	nonWord      = regexp.MustCompile(`[^a-z0-9]+`)
)

// refusal is values the chart refuses (TestChartRefusals).
type refusal struct {
	files []string
	set   []string
	// names are what the message must name, each value at fault.
	names []string
	// lintKeepsDefault: helm lint, unlike install and template, reads a
	// values file's null as the chart's default, and passes.
	lintKeepsDefault bool
}

// badValues are the values a customer tried (issue 54) that rendered and
// then broke: at install (the API server refuses the pod, an atomic
// install rolls back), in the scheduler (never scheduled), at the engine's
// load (every run exits 2) or in every run (its deadline, a skipped
// schedule, a proxy dropped). Each is now refused at render, naming the
// value and the fix; TestChartBadValuesRefused counts them.
var badValues = map[string]refusal{
	"cluster address ranges null": {
		files: append(slices.Clone(minimal), "testdata/chart/null-cluster-address-ranges.yaml"), names: []string{"clusterAddressRanges", "empty or null"},
		lintKeepsDefault: true,
	},
	"a cluster address range with prefix 33": {files: minimal, set: []string{"clusterAddressRanges={10.0.0.0/33}"}, names: []string{"clusterAddressRanges[0]", "10.0.0.0/33", "not a CIDR"}},
	"a cluster address range 300.1.1.1/99":   {files: minimal, set: []string{"clusterAddressRanges={10.0.0.0/8,300.1.1.1/99}"}, names: []string{"clusterAddressRanges[1]", "300.1.1.1/99"}},
	"a run deadline of 1s":                   {files: minimal, set: []string{"runDeadline=1s"}, names: []string{"runDeadline 1s", "under 5m"}},
	"a run deadline of 500ms":                {files: minimal, set: []string{"runDeadline=500ms"}, names: []string{"runDeadline 500ms", "under 5m"}},
	"a run deadline of 1ns":                  {files: minimal, set: []string{"runDeadline=1ns"}, names: []string{"runDeadline 1ns", "under 5m"}},
	"a run deadline of 1 second":             {files: minimal, set: []string{"runDeadline=1"}, names: []string{"runDeadline 1", "under 5m"}},
	"a schedule @hourly":                     {files: minimal, set: []string{"schedule=@hourly"}, names: []string{"startupSleepMax", "runDeadline", "@hourly", "pass 1h"}},
	"a schedule at minute 0 of every hour":   {files: minimal, set: []string{"schedule=0 * * * *"}, names: []string{"0 * * * *", "pass 1h"}},
	"a schedule @every 1h":                   {files: minimal, set: []string{"schedule=@every 1h"}, names: []string{"@every 1h", "pass 1h"}},
	"four runs a day and a long sleep": {
		files: minimal, set: []string{`schedule=0 0\,6\,12\,18 * * *`, "startupSleepMax=5h40m"}, names: []string{"startupSleepMax 5h40m", "0 0,6,12,18 * * *", "pass 6h"},
	},
	"two runs 4 h apart across midnight on two days": {
		files: minimal, set: []string{`schedule=7 3\,23 * * mon\,tue`, "startupSleepMax=3h40m"}, names: []string{"startupSleepMax 3h40m", "7 3,23 * * mon,tue", "pass 4h"},
	},
	"a memory request over its limit": {files: minimal, set: []string{"resources.requests.memory=128Mi"}, names: []string{"resources.requests.memory 128Mi", "resources.limits.memory 64Mi"}},
	"a memory of lots":                {files: minimal, set: []string{"resources.limits.memory=lots"}, names: []string{"resources.limits.memory", "lots", "not a quantity"}},
	"a volume mount without a volume": {
		files: minimal, set: []string{"extraVolumeMounts[0].name=ca", "extraVolumeMounts[0].mountPath=/etc/proxy-ca"}, names: []string{"extraVolumeMounts[0] mounts", "extraVolumes"},
	},
	"an image with an empty path component": {files: minimal, set: []string{"image.repository=reg.example//engine"}, names: []string{"reg.example//engine", "image.repository"}},
	"a node selector for Windows":           {files: minimal, set: []string{`nodeSelector.kubernetes\.io/os=windows`}, names: []string{"nodeSelector kubernetes.io/os=windows", "Linux"}},
	"a proxy port 99999": {
		files: minimal, set: []string{"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpsProxy=http://proxy.example:99999"},
		names: []string{"Azure.proxySettings.httpsProxy", "port 99999 is out of range"},
	},
	"extraEnv https_proxy that is no URL": {files: minimal, set: []string{"extraEnv[0].name=https_proxy", "extraEnv[0].value=notaurl"}, names: []string{"extraEnv[0] https_proxy", "notaurl", "not a proxy URL"}},
	"a plan ID with a space and a bang":   {files: minimal, set: []string{"marketplace.planId=bad plan!"}, names: []string{"marketplace.planId", "bad plan!", "Partner Center"}},
	// S6-02, S6-04: a password with the characters the old mask stopped
	// at, a percent-escape Go cannot read.
	"Azure's proxy with a password holding / # ? @": {
		files: minimal, set: []string{"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpsProxy=http://user:PASSWORD-SECRET/x#y?z@w@proxy.example:3128"},
		names: []string{"Azure.proxySettings.httpsProxy", "http://***@proxy.example:3128", "percent-encode it"},
	},
	"Azure's proxy with a password Go cannot read": {
		files: minimal, set: []string{"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpProxy=http://u:Pa%ss-PASSWORD-SECRET@proxy.example:3128"},
		names: []string{"Azure.proxySettings.httpProxy", "http://***@proxy.example:3128", "percent-encode it"},
	},
}

// Values the chart refuses before anything reaches a cluster, each with the
// value named in the message: helm template and helm lint --strict fail
// alike. Without the refusal each would fail only at the first scheduled
// run, hours after the install, or never fire. The messages are golden:
// testdata/chart/refusals/<name>.golden (go test -run TestChartRefusals
// -update rewrites them).
func TestChartRefusals(t *testing.T) {
	marketplace := goldenValueSets["marketplace"]
	tests := map[string]refusal{
		"defaults: no image, the REPLACE-ME placeholders": {
			names: []string{"image.repository", "azure.workloadIdentity.clientId", "azure.workloadIdentity.tenantId",
				"azure.extensionResourceId", "marketplace.publisherId", "marketplace.offerId", "marketplace.planId"},
		},
		"one placeholder left": {files: minimal, set: []string{"marketplace.offerId=REPLACE-ME-offer"}, names: []string{"marketplace.offerId"}},
		"Marketplace bundle not staged": {
			files: []string{"marketplace/values.yaml"}, set: azureInjected,
			names: []string{"global.azure.images.engine.image", "global.azure.images.engine.registry", "global.azure.images.engine.digest"},
		},
		"Marketplace: publisher and offer not passed": {
			files: marketplace, set: []string{"marketplace.publisherId=", "marketplace.offerId="},
			names: []string{"marketplace.publisherId", "marketplace.offerId"},
		},
		"Marketplace: no injected plan, the chart's placeholder": {
			files: marketplace, set: []string{"global.azure.marketplace.planId=", "marketplace.planId=REPLACE-ME-plan"},
			names: []string{"marketplace.planId"},
		},
		"negative run deadline":            {files: minimal, set: []string{"runDeadline=-5m"}, names: []string{"runDeadline"}},
		"zero run deadline":                {files: minimal, set: []string{"runDeadline=0s"}, names: []string{"runDeadline"}},
		"a duration the chart cannot read": {files: minimal, set: []string{"startupSleepMax=an hour"}, names: []string{"startupSleepMax"}},
		"unknown log level":                {files: minimal, set: []string{"logLevel=verbose"}, names: []string{"logLevel"}},
		"unknown log format":               {files: minimal, set: []string{"logFormat=xml"}, names: []string{"logFormat"}},
		"schedule is no cron":              {files: minimal, set: []string{"schedule=garbage"}, names: []string{"schedule"}},
		"schedule hour out of range":       {files: minimal, set: []string{"schedule=0 24 * * *"}, names: []string{"schedule"}},
		"schedule with a time zone":        {files: minimal, set: []string{"schedule=CRON_TZ=Europe/Berlin 0 3 * * *"}, names: []string{"schedule"}},
		// Values that rendered and broke (issue 43).
		"a run deadline past int64":                 {files: minimal, set: []string{"runDeadline=999999999999999999999"}, names: []string{"runDeadline"}},
		"a run deadline of 3000 years":              {files: minimal, set: []string{"runDeadline=99999999999"}, names: []string{"runDeadline"}},
		"a run deadline past the 6 h gap":           {files: minimal, set: []string{"runDeadline=7h"}, names: []string{"runDeadline"}},
		"a sleep past the 6 h gap":                  {files: minimal, set: []string{"startupSleepMax=7h"}, names: []string{"startupSleepMax"}},
		"a sleep of 100 h":                          {files: minimal, set: []string{"startupSleepMax=100h"}, names: []string{"startupSleepMax"}},
		"a schedule that never fires":               {files: minimal, set: []string{"schedule=0 0 31 2 *"}, names: []string{"schedule", "never"}},
		"a schedule every minute":                   {files: minimal, set: []string{"schedule=* * * * *"}, names: []string{"schedule", "once an hour"}},
		"extraEnv setting a value the chart checks": {files: minimal, set: []string{"extraEnv[0].name=RUN_DEADLINE", "extraEnv[0].value=99h"}, names: []string{"extraEnv[0] RUN_DEADLINE", "runDeadline"}},
		"extraEnv with a number":                    {files: minimal, set: []string{"extraEnv[0].name=RETRIES", "extraEnv[0].value=5"}, names: []string{"/extraEnv/0/value"}},

		// The engine's forms are taken (Go's 1.5h, 500ms), not others.
		"a run deadline past int64 in a values file": {files: []string{minimal[0], "testdata/chart/huge-run-deadline.yaml"}, names: []string{"runDeadline", "too large"}},
		"a run deadline under a nanosecond":          {files: minimal, set: []string{"runDeadline=0.5ns"}, names: []string{"runDeadline", "under 1ns"}},
		"a duration with an exponent":                {files: minimal, set: []string{"startupSleepMax=1e3s"}, names: []string{"startupSleepMax", "not a duration"}},
		"a duration without its unit in between":     {files: minimal, set: []string{"runDeadline=1h30"}, names: []string{"runDeadline", "not a duration"}},
		"a fractional sleep past the 6 h gap":        {files: minimal, set: []string{"startupSleepMax=5.6h"}, names: []string{"startupSleepMax"}},
		"an @every in plain seconds":                 {files: minimal, set: []string{"schedule=@every 3600"}, names: []string{"schedule", "unknown macro"}},
		"an Azure Arc cluster's extension": {
			files: minimal, set: []string{"azure.extensionResourceId=/subscriptions/ce73a2b0-d2e7-4ff6-b987-b32d6908de4e/resourceGroups/rg/providers/Microsoft.Kubernetes/connectedClusters/arc-1/providers/Microsoft.KubernetesConfiguration/extensions/suse"},
			names: []string{"azure.extensionResourceId", "connectedClusters"},
		},
		"an image digest that is no digest":        {files: minimal, set: []string{"image.digest=latest"}, names: []string{"/image/digest"}},
		"a memory limit under the request":         {files: minimal, set: []string{"resources.limits.memory=16Mi"}, names: []string{"resources.limits.memory"}},
		"a schedule every second":                  {files: minimal, set: []string{"schedule=@every 1s"}, names: []string{"schedule", "once an hour"}},
		"a schedule every five minutes in an hour": {files: minimal, set: []string{"schedule=*/5 3 * * *"}, names: []string{"schedule", "once an hour"}},
		"sleep beyond the Job's deadline": {
			files: minimal, set: []string{"startupSleepMax=3h", "jobDeadline=2h"},
			names: []string{"jobDeadline", "startupSleepMax"},
		},
		"client ID that is no GUID": {files: minimal, set: []string{"azure.workloadIdentity.clientId=my-app"}, names: []string{"clientId"}},
		"unknown pull policy":       {files: minimal, set: []string{"image.pullPolicy=Sometimes"}, names: []string{"pullPolicy"}},
		"an architecture not built": {files: minimal, set: []string{"architectures={s390x}"}, names: []string{"architectures"}},
		"a misspelt value":          {files: minimal, set: []string{"runDeadLine=5m"}, names: []string{"runDeadLine"}},
		"no cluster address range": {
			files: append(slices.Clone(minimal), "testdata/chart/no-cluster-address-ranges.yaml"), names: []string{"clusterAddressRanges"},
		},
		"unknown credential mode":     {files: minimal, set: []string{"azure.credentialMode=client-secret"}, names: []string{"credentialMode"}},
		"unknown CoreDNS layout":      {files: minimal, set: []string{"coreDNSLayout=kubeadm"}, names: []string{"coreDNSLayout"}},
		"a pull secret with no name":  {files: minimal, set: []string{"imagePullSecrets[0].namespace=x"}, names: []string{"imagePullSecrets"}},
		"a pod label that is no text": {files: minimal, set: []string{"podLabels.tier=1"}, names: []string{"podLabels"}},
		// The list reaches the CoreDNS admission policy: the cluster
		// domain there lets the engine's token map the cluster's Services.
		"the cluster domain as an update server domain": {files: minimal, set: []string{"updateServerDomains={susecloud.net,cluster.local}"}, names: []string{"updateServerDomains", "cluster.local"}},
		"a domain under the cluster domain":             {files: minimal, set: []string{"updateServerDomains={svc.cluster.local}"}, names: []string{"updateServerDomains", "svc.cluster.local"}},
		"a domain covering the cluster domain":          {files: minimal, set: []string{"updateServerDomains={local}"}, names: []string{"updateServerDomains"}},
		// The code reaches SCC through the operator as it is; the message
		// never shows it (a schema pattern would).
		"a registration code with a space inside": {files: minimal, set: []string{"registrationCode=CODE-SECRET-1 CODE-SECRET-2"}, names: []string{"registrationCode", "not shown"}},
		"a placeholder registration code":         {files: minimal, set: []string{"registrationCode=REPLACE-ME-code"}, names: []string{"registrationCode", "placeholder"}},
		// Azure.proxySettings (Azure Arc's extension manager): a proxy
		// enabled without a proxy, a proxy that is no URL (the message
		// masks a password in it), a certificate that is none.
		"Azure's proxy enabled without a proxy": {
			files: minimal, set: []string{"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.noProxy=.svc"},
			names: []string{"Azure.proxySettings.isProxyEnabled", "httpsProxy"},
		},
		"Azure's proxy that is no URL, a password in another": {
			files: minimal, set: []string{"Azure.proxySettings.isProxyEnabled=true", "Azure.proxySettings.httpsProxy=proxy.example:3128", "Azure.proxySettings.httpProxy=http://user:PASSWORD-SECRET@proxy example:3128"},
			names: []string{"Azure.proxySettings.httpsProxy", "proxy.example:3128", "Azure.proxySettings.httpProxy", "http://***@proxy example:3128"},
		},
		"Azure's proxy certificate that is none": {
			files: minimal, set: []string{"Azure.proxySettings.proxyCert=not a certificate"},
			names: []string{"Azure.proxySettings.proxyCert"},
		},
		// The image reaches the status command NOTES print for a shell.
		"an injected image with a shell command": {
			files: marketplace, set: []string{`global.azure.images.engine.image=engine';touch /tmp/pwned;'`},
			names: []string{"/global/azure/images/engine/image"},
		},
		"an injected registry with a command substitution": {
			files: marketplace, set: []string{`global.azure.images.engine.registry=reg.example/$(id)`},
			names: []string{"/global/azure/images/engine/registry"},
		},
		"an injected tag with a quote": {
			files: marketplace, set: []string{"global.azure.images.engine.digest=", `global.azure.images.engine.tag=1.0'"`},
			names: []string{"/global/azure/images/engine/tag"},
		},
		// Values that rendered and broke (issue 54), each refused naming
		// the value and the fix: badValues.
		"a repository with a tag": {files: minimal, set: []string{"image.repository=reg.example/engine:1.0"}, names: []string{"/image/repository"}},
		"a repository hiding a command behind the placeholder": {
			files: minimal, set: []string{`image.repository=REPLACE-ME';id;'`}, names: []string{"/image/repository"},
		},
	}
	for name, tc := range badValues {
		require.NotContains(t, tests, name)
		tests[name] = tc
	}
	helm := helmBin(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := helmTemplateErr(helm, chartDir, tc.files, tc.set...)
			require.Error(t, err, "helm template accepted %v %v", tc.files, tc.set)
			msg := helmStderr(err)
			for _, n := range tc.names {
				assert.Contains(t, msg, n, "helm template's message names the value")
			}

			args := []string{"lint", "--strict", chartDir, "--namespace", chartNamespace}
			for _, f := range tc.files {
				args = append(args, "--values", f)
			}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := runErr(helm, args...)
			if tc.lintKeepsDefault {
				// helm lint merges a values file's null over the
				// chart's default without removing it: what it checks
				// is the default, which is fine.
				require.NoError(t, err, "helm lint --strict:\n%s", out)
				out = []byte("[ERROR] none: lint keeps the default where a values file says null\n")
			} else {
				require.Error(t, err, "helm lint --strict accepted %v %v:\n%s", tc.files, tc.set, out)
			}
			var lint []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "[ERROR]") {
					lint = append(lint, l)
				}
			}
			require.NotEmpty(t, lint, "helm lint --strict names an error:\n%s", out)
			for _, n := range tc.names {
				if !tc.lintKeepsDefault {
					assert.Contains(t, strings.Join(lint, "\n"), n, "helm lint's message names the value")
				}
			}

			// Template line numbers left out: they move with every edit
			// of the templates, the messages do not.
			golden := templateLine.ReplaceAllString(fmt.Sprintf("helm template %s\n%s\n\nhelm lint --strict\n%s\n",
				strings.Join(append(slices.Clone(tc.files), tc.set...), " "), msg, strings.Join(lint, "\n")), "$1")
			file := strings.Trim(nonWord.ReplaceAllString(strings.ToLower(name), "-"), "-") + ".golden"
			assert.NotContains(t, msg+strings.Join(lint, "\n"), "CODE-SECRET", "a refusal never shows the registration code")
			assert.NotContains(t, msg+strings.Join(lint, "\n"), "PASSWORD-SECRET", "a refusal never shows a proxy's password")
			testkit.Golden(t, filepath.Join("testdata", "chart", "refusals", file), []byte(golden))
		})
	}
	if !t.Failed() {
		t.Logf("proved: %d bad values that used to render (issue 54) tried, %d refused by helm template naming the value (and by helm lint --strict, but for a values file's null, which lint reads as the default); 0 rendered", len(badValues), len(badValues))
	}
}

// The values each of which is checked by values.schema.json: every value
// of values.yaml has a schema entry, and the schema knows no value
// values.yaml lacks, so a value added to one is added to the other.
func TestChartSchemaCoversEveryValue(t *testing.T) {
	var schema struct {
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	readJSON(t, filepath.Join(chartDir, "values.schema.json"), &schema)
	require.NotNil(t, schema.AdditionalProperties)
	assert.False(t, *schema.AdditionalProperties, "a misspelt value is refused, not ignored")
	values := readValues(t, filepath.Join(chartDir, "values.yaml"))
	// What an extension manager may inject at the top level: accepted by
	// the schema, absent from values.yaml (TestMarketplaceStagedBundle).
	injected := []string{"Azure", "enabled"}
	assert.ElementsMatch(t, append(slices.Collect(maps.Keys(values)), injected...), slices.Collect(maps.Keys(schema.Properties)),
		"values.yaml's top-level values and values.schema.json's properties")
}

// Every object the chart renders, whatever the values, carries the
// standard labels, so `kubectl get -l app.kubernetes.io/instance=<release>`
// finds all of a release; none is the Secret scc-registration, which the
// engine writes and rancher/scc-operator adopts only without
// app.kubernetes.io/managed-by.
func TestChartLabels(t *testing.T) {
	version := releaseVersion(t)
	want := map[string]string{
		"app.kubernetes.io/name":       "registration-engine",
		"app.kubernetes.io/instance":   releaseName,
		"app.kubernetes.io/version":    version,
		"app.kubernetes.io/component":  "registration",
		"app.kubernetes.io/part-of":    "rancher",
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                "registration-engine-" + version,
	}
	sets := map[string]struct {
		files []string
		set   []string
	}{
		"minimal":     {files: minimal},
		"marketplace": {files: goldenValueSets["marketplace"]},
		"rancher":     {files: goldenValueSets["rancher"]},
		// Every optional object: the registration code, the certificates,
		// the Corefile's Role, the proxy's CA certificate Azure passed.
		"every object": {files: minimal, set: []string{"registrationCode=C", "coreDNSLayout=corefile", "regionServerCerts.a\\.pem=-----BEGIN CERTIFICATE-----", "Azure.proxySettings.proxyCert=" + testProxyCA}},
	}
	for name, tc := range sets {
		t.Run(name, func(t *testing.T) {
			objs := splitObjects(t, helmTemplate(t, chartDir, tc.files, tc.set...))
			require.NotEmpty(t, objs)
			for k, o := range objs {
				labels := o.typed.(metav1.Object).GetLabels()
				for lk, lv := range want {
					assert.Equal(t, lv, labels[lk], "%s: label %s", k, lk)
				}
				assert.NotEqual(t, "scc-registration", o.name, "%s: the engine writes scc-registration; a chart-managed one would never be adopted by rancher/scc-operator", k)
			}
			if name == "every object" {
				assert.Len(t, objs, 38, "the objects the test means to cover (with the run at install, the retry CronJob and its Role and RoleBinding, the cleanup hook and its own ServiceAccount, two Roles, two RoleBindings and policy copy, status's ServiceAccount, two Roles, two RoleBindings, its ClusterRole and two ClusterRoleBindings, and the proxy's CA certificate)")
			}
			// The engine's pods carry them too, so that a pod's log or an
			// Event on it leads back to the release.
			cj, _ := chartCronJob(t, objs)
			for _, l := range []map[string]string{cj.Spec.JobTemplate.Labels, cj.Spec.JobTemplate.Spec.Template.Labels} {
				for lk, lv := range want {
					assert.Equal(t, lv, l[lk], "the CronJob's Job and pod templates: label %s", lk)
				}
			}
		})
	}
}

// The pod values reach the engine's pod; the chart's own labels cannot be
// replaced by podLabels.
func TestChartPodValues(t *testing.T) {
	out := helmTemplate(t, chartDir, minimal,
		"imagePullSecrets[0].name=private-registry", "priorityClassName=system-cluster-critical",
		"podLabels.team=platform", "podLabels.app\\.kubernetes\\.io/name=other",
		"podAnnotations.example\\.com/owner=ops", "logFormat=text")
	cj, c := chartCronJob(t, splitObjects(t, out))
	pod := cj.Spec.JobTemplate.Spec.Template
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "private-registry"}}, pod.Spec.ImagePullSecrets)
	assert.Equal(t, "system-cluster-critical", pod.Spec.PriorityClassName)
	assert.Equal(t, "platform", pod.Labels["team"])
	assert.Equal(t, "registration-engine", pod.Labels["app.kubernetes.io/name"], "podLabels do not replace the chart's")
	assert.Equal(t, "true", pod.Labels["azure.workload.identity/use"])
	assert.Equal(t, map[string]string{"example.com/owner": "ops"}, pod.Annotations)
	assert.Equal(t, "text", env(c)["LOG_FORMAT"].Value, "the engine's LOG_FORMAT setting")

	// And none of it by default.
	cj, c = chartCronJob(t, splitObjects(t, helmTemplate(t, chartDir, minimal)))
	pod = cj.Spec.JobTemplate.Spec.Template
	assert.Empty(t, pod.Spec.ImagePullSecrets)
	assert.Empty(t, pod.Spec.PriorityClassName)
	assert.Empty(t, pod.Annotations)
	assert.Equal(t, "json", env(c)["LOG_FORMAT"].Value)
}

// The Job's deadline follows the startup sleep and the run deadline, so a
// long sleep no longer meets a fixed 2 h and dies in its sleep. Durations
// take the engine's forms (Go's 1.5h, 90m, 1h30m, 500ms, or seconds) and
// reach it as written; only activeDeadlineSeconds, an integer, is rounded
// up to the second.
func TestChartJobDeadline(t *testing.T) {
	tests := map[string]struct {
		set   []string
		files []string
		want  int64
		// env: RUN_DEADLINE and STARTUP_SLEEP_MAX as the engine reads
		// them, when the case says.
		env map[string]string
	}{
		// 15 + 60 + 10 + 2 × 11 = 107 min, rounded up to the hour.
		"defaults":    {want: 7200},
		"a 3 h sleep": {set: []string{"startupSleepMax=3h"}, want: 4 * 3600},
		"no sleep":    {set: []string{"startupSleepMax=0"}, want: 3600},
		// 15 + 90 + 90 + 2 × 91 min = 6 h 17 min.
		"seconds and composite forms":   {set: []string{"startupSleepMax=5400", "runDeadline=1h30m"}, want: 7 * 3600},
		"jobDeadline set":               {set: []string{"jobDeadline=5h"}, want: 5 * 3600},
		"jobDeadline just long enough":  {set: []string{"jobDeadline=107m"}, want: 107 * 60},
		"jobDeadline in plain seconds":  {set: []string{"jobDeadline=9000"}, want: 9000},
		"run deadline in plain seconds": {set: []string{"runDeadline=600"}, want: 7200},
		// 15 + 60 + 90 + 2 × 91 min = 5 h 47 min.
		"fractional hours: 1.5h": {set: []string{"runDeadline=1.5h"}, want: 6 * 3600,
			env: map[string]string{"RUN_DEADLINE": "1.5h", "STARTUP_SLEEP_MAX": "1h"}},
		// 15 + 90 + 10 + 2 × 11 min = 2 h 17 min.
		"minutes past the hour: 90m": {set: []string{"startupSleepMax=90m"}, want: 3 * 3600,
			env: map[string]string{"RUN_DEADLINE": "10m", "STARTUP_SLEEP_MAX": "90m"}},
		"hours and minutes: 1h30m":        {set: []string{"startupSleepMax=1h30m"}, want: 3 * 3600},
		"fractional hours the same: 1.5h": {set: []string{"startupSleepMax=1.5h"}, want: 3 * 3600},
		// 900 + 0.5 + 300 + 2 × 360 s = 1920.5 s.
		"sub-second: 500ms": {set: []string{"startupSleepMax=500ms", "runDeadline=5m"}, want: 3600,
			env: map[string]string{"RUN_DEADLINE": "5m", "STARTUP_SLEEP_MAX": "500ms"}},
		"seconds with a fraction": {set: []string{"runDeadline=599.5"}, want: 7200,
			env: map[string]string{"RUN_DEADLINE": "599.5"}},
		// Kubernetes' activeDeadlineSeconds is whole seconds: rounded up,
		// never below what was asked.
		"jobDeadline with a fraction of a second, rounded up": {set: []string{"jobDeadline=107m0.5s"}, want: 107*60 + 1},
		"jobDeadline in fractional hours":                     {set: []string{"jobDeadline=1.8h"}, want: 6480},
		// A number in a values file is a float to Helm (YAML 1.5, 600):
		// written out in full, never 1.5e+00 or 6e+02.
		"numbers in a values file": {files: []string{"testdata/chart/duration-numbers.yaml"}, want: 7200,
			env: map[string]string{"RUN_DEADLINE": "599.5", "STARTUP_SLEEP_MAX": "3600"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := splitObjects(t, helmTemplate(t, chartDir, append(slices.Clone(minimal), tc.files...), tc.set...))
			cj, c := chartCronJob(t, objs)
			require.NotNil(t, cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds)
			assert.Equal(t, tc.want, *cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds)
			for k, v := range tc.env {
				assert.Equal(t, v, env(c)[k].Value, "%s, as the engine reads it", k)
			}
			// Every Job that sleeps or runs has the same deadline.
			run := runJob(t, objs)
			require.NotNil(t, run.Spec.ActiveDeadlineSeconds)
			assert.Equal(t, tc.want, *run.Spec.ActiveDeadlineSeconds, "the run at install")
		})
	}
}

// The chart reads a duration as the engine does: each form, as jobDeadline,
// becomes the activeDeadlineSeconds that the engine's own reading of it (as
// RUN_DEADLINE, job.LoadConfig) rounds up to.
func TestChartDurationsAsTheEngineReadsThem(t *testing.T) {
	forms := []string{"2h", "1.79h", "107m0.5s", "1h47m0.000000001s", "6420000ms", "6420000000us", "6420000000µs",
		"6420000000000ns", ".5h1h30m", "1h1h", "+2h", "2h0m0s", "7200", "6420.25", "6420."}
	helm := helmBin(t)
	regionConfig := filepath.Join("..", "job", "regionconfig", "testdata", "azure.cfg")
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			c, err := job.LoadConfig(nil, func(k string) string {
				return map[string]string{"RUN_DEADLINE": form, "REGIONSRV_CONFIG": regionConfig}[k]
			})
			require.NoError(t, err, "the engine reads %s", form)
			want := c.RunDeadline
			out, err := helmTemplateErr(helm, chartDir, minimal, "jobDeadline="+form)
			require.NoError(t, err)
			cj, _ := chartCronJob(t, splitObjects(t, out))
			require.NotNil(t, cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds)
			assert.Equal(t, int64(math.Ceil(want.Seconds())), *cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds)
		})
	}
}

// NOTES.txt, which helm install prints, says the schedule the CronJob got.
// helm template does not render NOTES.txt and helm install needs a
// cluster, so the test renders the file's text with helm's engine through
// a copy of the chart that holds it as a ConfigMap's data.
func TestChartNotes(t *testing.T) {
	tests := map[string]struct {
		set  []string
		want []string
	}{
		"the default: a per-install schedule, 18 h and 6 h apart": {want: []string{" UTC (gaps of ", " h and ",
			"first sleeps a random while of up to 1h; a run takes up to 10m,\nand its Job is stopped after 2h."}},
		"the design card's schedule": {set: []string{"schedule=0 */18 * * *"}, want: []string{"runs every day at 00:00 and 18:00 UTC (gaps of 18 h and 6 h)"}},
		"every 6 h at half past":     {set: []string{"schedule=30 */6 * * *"}, want: []string{"every day at 00:30, 06:30, 12:30 and 18:30 UTC (every 6 h)"}},
		"once a day":                 {set: []string{"schedule=15 3 * * *", "startupSleepMax=0"}, want: []string{"every day at 03:15 UTC", "A run takes up to 10m, and its Job is stopped after 1h."}},
		"a list and a range":         {set: []string{"schedule=0 1\\,4-5 * * *", "startupSleepMax=0"}, want: []string{"every day at 01:00, 04:00 and 05:00 UTC (gaps of 3 h, 1 h and 20 h)"}},
		"weekly":                     {set: []string{"schedule=0 3 * * 1"}, want: []string{`on the cron schedule "0 3 * * 1" (UTC)`}},
		"a macro":                    {set: []string{"schedule=@daily"}, want: []string{`on the cron schedule "@daily" (UTC)`}},
		"durations as written":       {set: []string{"startupSleepMax=1.5h", "runDeadline=5m0.5s"}, want: []string{"first sleeps a random while of up to 1h30m; a run takes up to 5m0.5s,"}},
		"no registration code: how to set it": {want: []string{"No registration code in this release (registrationCode)", "waiting for one (Event RegistrationCodeMissing)",
			"az k8s-extension update --resource-group <group> --cluster-name <cluster> --cluster-type managedClusters --name <extension> --configuration-protected-settings registrationCode=<code>",
			"helm upgrade registration-engine <chart> -n cattle-scc-system --reset-then-reuse-values --set registrationCode=<code>"}},
		"status in the cluster": {want: []string{
			"kubectl -n cattle-scc-system run registration-engine-status --rm -i --quiet --restart=Never --image='registration-engine:",
			`"serviceAccountName":"registration-engine-status"`, `"args":["status"]`}},
	}
	dir := notesChart(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			notes, err := renderNotes(t, dir, minimal, tc.set...)
			require.NoError(t, err)
			for _, w := range tc.want {
				assert.Contains(t, notes, w)
			}
			assert.NotContains(t, notes, "REPLACE-ME")
		})
	}
}

// notesChart is a copy of the chart whose NOTES.txt helm template also
// renders, into the ConfigMap notes-under-test (helm template prints no
// NOTES).
func notesChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "registration-engine")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	notes, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "_notes_under_test.tpl"),
		[]byte(`{{- define "notes-under-test" -}}`+string(notes)+`{{- end }}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "notes-under-test.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\ndata:\n  notes: {{ include \"notes-under-test\" . | quote }}\n"), 0o644))
	return dir
}

// renderNotes renders notesChart's NOTES with the values files and
// settings given (arguments of helm template, such as
// --skip-schema-validation, may follow the settings).
func renderNotes(t *testing.T, dir string, files []string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", releaseName, dir, "--namespace", chartNamespace, "--show-only", "templates/notes-under-test.yaml"}
	for _, f := range files {
		args = append(args, "--values", f)
	}
	for _, s := range set {
		if strings.HasPrefix(s, "--") {
			args = append(args, s)
			continue
		}
		args = append(args, "--set", s)
	}
	out, err := runErr(helmBin(t), args...)
	if err != nil {
		return "", err
	}
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(out, &cm))
	require.NotEmpty(t, cm.Data["notes"])
	return cm.Data["notes"], nil
}

// The status command NOTES print is pasted into a shell by whoever
// installs the chart, and it carries the image, which on Azure comes from
// injected values (global.azure.images.engine). Pasted into sh -c with
// kubectl a function that prints its arguments, it runs nothing else and
// hands kubectl exactly the image the CronJob runs; values with shell
// syntax in them are refused, by the schema and, with the schema skipped,
// by the chart's own check of the image reference.
func TestChartNotesStatusCommandRunsNothing(t *testing.T) {
	dir := notesChart(t)
	accepted := map[string]struct {
		files     []string
		set       []string
		wantImage string
	}{
		"Marketplace": {files: goldenValueSets["marketplace"],
			wantImage: "marketplace.azurecr.io/relocated/rancher/registration-engine@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		"Marketplace with a tag": {files: goldenValueSets["marketplace"], set: []string{"global.azure.images.engine.digest=", "global.azure.images.engine.tag=1.2.3"},
			wantImage: "marketplace.azurecr.io/relocated/rancher/registration-engine:1.2.3"},
		"a registry with a port": {files: minimal, set: []string{"image.repository=registry.example:5000/rancher/registration-engine", "image.tag=v1_2-rc.3"},
			wantImage: "registry.example:5000/rancher/registration-engine:v1_2-rc.3"},
	}
	for name, tc := range accepted {
		t.Run(name, func(t *testing.T) {
			notes, err := renderNotes(t, dir, tc.files, tc.set...)
			require.NoError(t, err)
			var command string
			for l := range strings.SplitSeq(notes, "\n") {
				if strings.Contains(l, "kubectl") && strings.Contains(l, " run ") {
					command = strings.TrimSpace(l)
				}
			}
			require.NotEmpty(t, command, "NOTES print the status command:\n%s", notes)
			work := t.TempDir()
			cmd := exec.Command("sh", "-c", `kubectl() { printf '%s\n' "$@"; }; `+command)
			cmd.Dir = work
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			args := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			require.Len(t, args, 10, "kubectl gets exactly the NOTES' arguments: %q", args)
			assert.Equal(t, []string{"-n", chartNamespace, "run", "registration-engine-status", "--rm", "-i", "--quiet", "--restart=Never", "--image=" + tc.wantImage}, args[:9])
			overrides, ok := strings.CutPrefix(args[9], "--overrides=")
			require.True(t, ok, args[9])
			var pod corev1.Pod
			require.NoError(t, json.Unmarshal([]byte(overrides), &pod), "the overrides are one JSON argument")
			require.Len(t, pod.Spec.Containers, 1)
			assert.Equal(t, tc.wantImage, pod.Spec.Containers[0].Image)
			assert.Equal(t, []string{"status"}, pod.Spec.Containers[0].Args)
			entries, err := os.ReadDir(work)
			require.NoError(t, err)
			assert.Empty(t, entries, "the pasted command created nothing")
		})
	}

	hostile := map[string]struct {
		files []string
		set   []string
	}{
		"a quote and a command in the injected image":     {files: goldenValueSets["marketplace"], set: []string{`global.azure.images.engine.image=engine';touch pwned;'`}},
		"a command substitution in the injected registry": {files: goldenValueSets["marketplace"], set: []string{`global.azure.images.engine.registry=reg.example/$(touch pwned)`}},
		"a backtick in the injected tag":                  {files: goldenValueSets["marketplace"], set: []string{"global.azure.images.engine.digest=", "global.azure.images.engine.tag=1`touch pwned`"}},
		"a quote in the repository":                       {files: minimal, set: []string{`image.repository=reg.example/engine"'$(touch pwned)`}},
		"a semicolon in the registry prefix":              {files: minimal, set: []string{"global.cattle.systemDefaultRegistry=reg.example;touch pwned;"}},
	}
	for name, tc := range hostile {
		t.Run(name, func(t *testing.T) {
			_, err := renderNotes(t, dir, tc.files, tc.set...)
			require.Error(t, err, "the schema refuses it")
			_, err = renderNotes(t, dir, tc.files, append(tc.set, "--skip-schema-validation")...)
			require.Error(t, err, "with the schema skipped, the chart's own check refuses it")
			assert.Contains(t, helmStderr(err), "has a character no image reference has")
		})
	}
}

// comparable renders the chart (minimal.yaml and set) and the kustomize
// overlay dir, with the overlay's REPLACE-ME filled in as minimal.yaml
// fills the chart's, and without what only a Helm release has: its labels,
// the run at install and the cleanup hook, and on the CronJob the schedule
// chosen per install with what the next upgrade compares (kubectl apply
// has no install, upgrade or uninstall to hang them on).
func comparable(t *testing.T, dir string, set ...string) (chart, overlay map[string]rendered) {
	t.Helper()
	chart = splitObjects(t, helmTemplate(t, chartDir, minimal, set...))
	for _, o := range chart {
		dropHelmLabels(o.obj)
	}
	// The overlay with its REPLACE-ME filled in as minimal.yaml fills the
	// chart's.
	var filled struct {
		Azure struct {
			WorkloadIdentity    struct{ ClientID, TenantID string } `json:"workloadIdentity"`
			ExtensionResourceID string                              `json:"extensionResourceId"`
		} `json:"azure"`
		Marketplace struct{ PublisherID, OfferID, PlanID string } `json:"marketplace"`
	}
	data, err := os.ReadFile(minimal[0])
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &filled))
	overlayYAML := string(run(t, kubectlBin(t), "kustomize", dir))
	extensionPlaceholder := "/subscriptions/REPLACE-ME/resourceGroups/REPLACE-ME/providers/Microsoft.ContainerService/managedClusters/REPLACE-ME/providers/Microsoft.KubernetesConfiguration/extensions/REPLACE-ME"
	overlayYAML = strings.NewReplacer(
		extensionPlaceholder, filled.Azure.ExtensionResourceID,
		"REPLACE-ME-client-id", filled.Azure.WorkloadIdentity.ClientID,
		"REPLACE-ME-tenant-id", filled.Azure.WorkloadIdentity.TenantID,
		"REPLACE-ME-publisher", filled.Marketplace.PublisherID,
		"REPLACE-ME-offer", filled.Marketplace.OfferID,
		"REPLACE-ME-plan", filled.Marketplace.PlanID,
	).Replace(overlayYAML)
	require.NotContains(t, overlayYAML, "REPLACE-ME", "a placeholder of the overlay this test does not fill")
	overlay = splitObjects(t, []byte(overlayYAML))
	// What only a release has (docs/install.md, docs/uninstall.md): the
	// run at install and the cleanup hook, and on the CronJob the schedule
	// chosen per install with what the next upgrade compares. kubectl
	// apply has no install, upgrade or uninstall to hang them on.
	require.Contains(t, chart, "Job/cattle-scc-system/registration-engine-cleanup")
	for k, o := range chart {
		if strings.HasPrefix(k, "Job/cattle-scc-system/registration-engine-run-") {
			delete(chart, k)
		}
		if hook, _, _ := unstructured.NestedString(o.obj, "metadata", "annotations", "helm.sh/hook"); hook != "" {
			delete(chart, k) // the cleanup hook's Job and its own access
			continue
		}
		if strings.HasPrefix(o.name, "registration-engine-status") {
			delete(chart, k) // status's read-only access, for the command the NOTES print
			continue
		}
		if o.name == "registration-engine-retry" {
			delete(chart, k) // the retries of a failed run and the engine's patch of their suspend: the chart's (docs/install.md, "When a run fails")
			continue
		}
		if o.kind == "CronJob" {
			dropEnv(t, o.obj, "RETRY_CRONJOB_NAME") // the retry CronJob the runs switch: the chart's
			unstructured.RemoveNestedField(o.obj, "metadata", "annotations")
			unstructured.RemoveNestedField(o.obj, "spec", "schedule")
			unstructured.RemoveNestedField(overlay[k].obj, "spec", "schedule")
		}
	}
	return chart, overlay
}

// dropEnv removes the variable name from the containers of a CronJob's pod
// template.
func dropEnv(t *testing.T, cronJob map[string]any, name string) {
	t.Helper()
	path := []string{"spec", "jobTemplate", "spec", "template", "spec", "containers"}
	containers, ok, err := unstructured.NestedSlice(cronJob, path...)
	require.NoError(t, err)
	require.True(t, ok)
	for _, c := range containers {
		c := c.(map[string]any)
		env, _ := c["env"].([]any)
		c["env"] = slices.DeleteFunc(env, func(e any) bool { return e.(map[string]any)["name"] == name })
	}
	require.NoError(t, unstructured.SetNestedSlice(cronJob, containers, path...))
}

// differences lists, by object, what tells chart and overlay apart: an
// object only one renders, or a field that differs. ignore, when set, drops
// a difference the caller has a reason to accept.
func differences(chart, overlay map[string]rendered, ignore func(string) bool) []string {
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(overlay)) {
		if _, ok := chart[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s: in the overlay, not rendered by the chart", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(chart)) {
		o, ok := overlay[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: rendered by the chart, not in the overlay", k))
			continue
		}
		for _, d := range diffValues("", chart[k].obj, o.obj) {
			if ignore == nil || !ignore(d) {
				problems = append(problems, k+": "+d)
			}
		}
	}
	return problems
}

// policyVariable is the expression of the chart's CoreDNS admission
// policy's variable name.
func policyVariable(t *testing.T, objs map[string]rendered, name string) string {
	t.Helper()
	vap := renderedAs[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns")
	for _, v := range vap.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	require.Failf(t, "no such variable", "the policy has no variable %s", name)
	return ""
}

// celList is list as the policy's CEL writes a list of strings.
func celList(list []string) string {
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = "'" + s + "'"
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// The chart's default clusterAddressRanges, which its CoreDNS admission
// policy refuses entries for in a hosts block that answers reverse
// queries, are the engine's default CLUSTER_ADDRESS_RANGES (which the
// engine loads as that list: job's TestClusterAddressRanges): otherwise an entry
// the engine thinks allowed is refused at admission (HTTP 422 instead of
// the engine's own verdict naming the range), or the other way round. The
// cleanup hook gets the list too, to remove only what the policy lets it.
func TestClusterAddressRangesMatchEngine(t *testing.T) {
	want := make([]string, len(coredns.DefaultClusterRanges))
	for i, p := range coredns.DefaultClusterRanges {
		want[i] = p.String()
	}
	objs := splitObjects(t, helmTemplate(t, chartDir, minimal))
	_, c := chartCronJob(t, objs)
	value := env(c)["CLUSTER_ADDRESS_RANGES"].Value
	assert.Equal(t, strings.Join(want, ","), value, "the chart passes its default, the engine's")
	assert.Equal(t, celList(want), policyVariable(t, objs, "clusterRanges"), "the policy's ranges are the engine's default")

	cleanup := renderedAs[*batchv1.Job](t, objs, "Job/"+chartNamespace+"/registration-engine-cleanup")
	assert.Equal(t, value, env(&cleanup.Spec.Template.Spec.Containers[0])["CLUSTER_ADDRESS_RANGES"].Value)
}

// Azure's configuration settings are a map of strings (ARM's
// configurationSettings), and how its extension manager hands them to Helm
// is not documented: taking the least favourable reading, every boolean and
// whole-number value arrives as a string ("false", "15"). Go templates read
// the string "false" as true, so each must render exactly as its typed
// value: every boolean of the schema turned from its default and every
// whole number changed, once with --set and once with --set-string.
func TestChartTakesAzureSettingsAsStrings(t *testing.T) {
	helm := helmBin(t)
	schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(schema, &s))
	defaults := readValues(t, filepath.Join(chartDir, "values.yaml"))
	var set []string
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for k, v := range props {
			path := strings.TrimPrefix(prefix+"."+k, ".")
			p := v.(map[string]any)
			// Azure.* is what Azure Arc passes, strings taken already.
			if enum, ok := p["enum"].([]any); ok && slices.Contains(enum, any(true)) && !strings.HasPrefix(path, "Azure.") {
				def, _ := lookup(defaults, path)
				set = append(set, fmt.Sprintf("%s=%t", path, def != true))
			}
			walk(path, p)
		}
	}
	walk("", s)
	set = append(set, "cleanupDeadlineSeconds=120", "retry.intervalMinutes=15", "prometheusRule.noSuccessHours=48", "prometheusRule.notRegisteredHours=3")
	slices.Sort(set)
	require.GreaterOrEqual(t, len(set), 14, "every boolean and whole number: %v", set)
	render := func(flag string) string {
		args := []string{"template", releaseName, chartDir, "--namespace", chartNamespace, "--values", minimal[0]}
		for _, kv := range set {
			args = append(args, flag, kv)
		}
		out, err := runErr(helm, args...)
		require.NoError(t, err, "helm template %s", flag)
		return string(out)
	}
	typed, asStrings := render("--set"), render("--set-string")
	assert.Equal(t, typed, asStrings, "the values as strings render as the typed ones")
	assert.Contains(t, asStrings, "hostNetwork: true", `hostNetwork "true" is on`)
	assert.Regexp(t, `name: IN_CLUSTER_DNS\s+value: "false"`, asStrings, `inClusterDNS "false" is off`)
	assert.NotContains(t, asStrings, "kind: ValidatingAdmissionPolicy\n", `inClusterDNS "false": no CoreDNS policy`)

	// A whole number out of its bounds is refused as a string too.
	out, err := runErr(helm, "template", releaseName, chartDir, "--namespace", chartNamespace, "--values", minimal[0], "--set-string", "cleanupDeadlineSeconds=5")
	require.Error(t, err, "%s", out)
	assert.Contains(t, helmStderr(err), `cleanupDeadlineSeconds "5": want a whole number from 10 to 3600`)
	t.Logf("%d values as strings render as typed: %s", len(set), strings.Join(set, " "))
}

// The chart takes a clusterAddressRanges entry exactly when the engine
// does (coredns.ParseClusterRanges, net/netip): one it renders never stops
// every run at load (exit 2), one it refuses the engine would refuse too.
func TestClusterAddressRangesAsTheEngineReadsThem(t *testing.T) {
	ranges := []string{"10.0.0.0/8", "10.0.0.1/32", "0.0.0.0/0", "255.255.255.255/32", "fc00::/7", "::/0", "::1/128",
		"2001:db8::1/64", "2001:db8:0:0:0:0:0:1/128", "fe80::1:2:3:4:5:6/10",
		"10.0.0.0/33", "300.1.1.1/99", "256.0.0.0/8", "010.0.0.0/8", "10.0.0/8", "10.0.0.0", "10.0.0.0/", "10.0.0.0/08",
		"fc00::/129", "fc00:::1/64", "1:2:3:4:5:6:7:8:9/64", "12345::/16", "1::2::3/64", "fe80::1%eth0/64"}
	helm := helmBin(t)
	for _, r := range ranges {
		t.Run(r, func(t *testing.T) {
			_, engineErr := coredns.ParseClusterRanges(r)
			_, err := helmTemplateErr(helm, chartDir, minimal, "clusterAddressRanges={"+r+"}")
			if engineErr != nil {
				require.Error(t, err, "the chart renders %s, which the engine refuses: %v", r, engineErr)
				assert.Contains(t, helmStderr(err), "clusterAddressRanges")
				return
			}
			require.NoError(t, err, "the chart refuses %s, which the engine reads", r)
		})
	}
}
