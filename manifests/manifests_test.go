package manifests

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
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
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/regionconfig"
)

// kustomization is the part of kustomize's Kustomization these files use;
// decoding is strict, so a field outside it is reported, not ignored.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Patches    []struct {
		Path   string `json:"path,omitempty"`
		Patch  string `json:"patch,omitempty"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target,omitempty"`
	} `json:"patches,omitempty"`
	Images []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images,omitempty"`
}

// object is one decoded manifest file.
type object struct {
	file string
	kind string
	name string
	obj  any
}

// typed returns an empty typed object for kind; strict decoding into it
// catches misspelled or misplaced fields that kubectl would reject or, worse,
// drop silently.
func typed(kind string) any {
	switch kind {
	case "ServiceAccount":
		return &corev1.ServiceAccount{}
	case "ConfigMap":
		return &corev1.ConfigMap{}
	case "Secret": // the chart's registration-code
		return &corev1.Secret{}
	case "Namespace":
		return &corev1.Namespace{}
	case "Role":
		return &rbacv1.Role{}
	case "RoleBinding":
		return &rbacv1.RoleBinding{}
	case "ClusterRole":
		return &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "CronJob":
		return &batchv1.CronJob{}
	case "Job": // the chart's run at install and its cleanup hook
		return &batchv1.Job{}
	case "Service": // overlays/e2e: the fake cloud
		return &corev1.Service{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "ValidatingAdmissionPolicy": // the CoreDNS policy
		return &admissionregistrationv1.ValidatingAdmissionPolicy{}
	case "ValidatingAdmissionPolicyBinding":
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	}
	return nil
}

func decode(t *testing.T, file string, data []byte) object {
	t.Helper()
	var tm metav1.TypeMeta
	require.NoError(t, yaml.Unmarshal(data, &tm), file)
	obj := typed(tm.Kind)
	require.NotNil(t, obj, "%s: unexpected kind %q", file, tm.Kind)
	require.NoError(t, yaml.UnmarshalStrict(data, obj), file)
	return object{file: file, kind: tm.Kind, name: obj.(metav1.Object).GetName(), obj: obj}
}

// load decodes every file under base/ and overlays/, checking that each
// kustomization refers only to files that exist.
func load(t *testing.T) (kustomizations map[string]kustomization, objects []object) {
	t.Helper()
	kustomizations = map[string]kustomization{}
	err := fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return nil
		}
		data, err := fs.ReadFile(FS, p)
		require.NoError(t, err)
		if path.Base(p) == "kustomization.yaml" {
			var k kustomization
			require.NoError(t, yaml.UnmarshalStrict(data, &k), p)
			kustomizations[path.Dir(p)] = k
			return nil
		}
		objects = append(objects, decode(t, p, data))
		return nil
	})
	require.NoError(t, err)
	return kustomizations, objects
}

func find[T any](t *testing.T, objects []object, file string) T {
	t.Helper()
	for _, o := range objects {
		if o.file == file {
			v, ok := o.obj.(T)
			require.True(t, ok, "%s is a %s", file, o.kind)
			return v
		}
	}
	require.Failf(t, "missing", "%s not found", file)
	var zero T
	return zero
}

func TestKustomizationsReferToExistingFiles(t *testing.T) {
	kustomizations, objects := load(t)
	require.Contains(t, kustomizations, "base")
	require.Contains(t, kustomizations, "overlays/azure")
	require.Contains(t, kustomizations, "overlays/e2e")

	wantNamespace := map[string]string{"base/cattle-scc-system": operator.Namespace, "base/kube-system": "kube-system", "base/corefile-layout": "kube-system", "base/operator-lease": operator.LeaseNamespace}
	baseObjects := map[string]bool{}
	for _, o := range objects {
		if strings.HasPrefix(o.file, "base/") {
			baseObjects[o.kind+"/"+o.name] = true
		}
	}
	for dir, k := range kustomizations {
		assert.Equal(t, "kustomize.config.k8s.io/v1beta1", k.APIVersion, dir)
		assert.Equal(t, "Kustomization", k.Kind, dir)
		// A namespace: anywhere else would move the kube-system Role.
		assert.Equal(t, wantNamespace[dir], k.Namespace, "%s: namespace", dir)
		for _, r := range k.Resources {
			p := path.Clean(path.Join(dir, r))
			st, err := fs.Stat(FS, p)
			require.NoError(t, err, "%s: resource %s", dir, r)
			if st.IsDir() {
				assert.Contains(t, kustomizations, p, "%s: %s has no kustomization.yaml", dir, r)
			}
		}
		for _, pt := range k.Patches {
			if pt.Path == "" {
				// An inline JSON patch names its object in its target.
				require.NotNil(t, pt.Target, "%s: an inline patch without a target", dir)
				assert.True(t, baseObjects[pt.Target.Kind+"/"+pt.Target.Name], "%s patches %s/%s, which base does not have", dir, pt.Target.Kind, pt.Target.Name)
				continue
			}
			p := path.Join(dir, pt.Path)
			data, err := fs.ReadFile(FS, p)
			require.NoError(t, err, "%s: patch %s", dir, pt.Path)
			o := decode(t, p, data)
			assert.True(t, baseObjects[o.kind+"/"+o.name], "%s patches %s/%s, which base does not have", p, o.kind, o.name)
		}
	}
}

func cronJob(t *testing.T, objects []object) (*batchv1.CronJob, *corev1.PodSpec, *corev1.Container) {
	t.Helper()
	cj := find[*batchv1.CronJob](t, objects, "base/cattle-scc-system/cronjob.yaml")
	pod := &cj.Spec.JobTemplate.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	return cj, pod, &pod.Containers[0]
}

func env(c *corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestCronJobShape(t *testing.T) {
	_, objects := load(t)
	cj, pod, c := cronJob(t, objects)
	spec := cj.Spec.JobTemplate.Spec

	assert.Equal(t, "registration-engine", cj.Name)
	assert.Equal(t, "0 */18 * * *", cj.Spec.Schedule)
	assert.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	require.NotNil(t, cj.Spec.StartingDeadlineSeconds)
	require.NotNil(t, cj.Spec.SuccessfulJobsHistoryLimit)
	require.NotNil(t, cj.Spec.FailedJobsHistoryLimit)
	require.NotNil(t, spec.BackoffLimit)
	require.NotNil(t, spec.TTLSecondsAfterFinished)
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)

	// The Job must outlive one sleeping run plus its retries.
	e := env(c)
	runDeadline, err := time.ParseDuration(e["RUN_DEADLINE"].Value)
	require.NoError(t, err)
	sleepMax, err := time.ParseDuration(e["STARTUP_SLEEP_MAX"].Value)
	require.NoError(t, err)
	require.NotNil(t, spec.ActiveDeadlineSeconds)
	active := time.Duration(*spec.ActiveDeadlineSeconds) * time.Second
	assert.Greater(t, active, job.ScheduledWindow+sleepMax+runDeadline*time.Duration(1+*spec.BackoffLimit))

	// Exit 2 (permanent) fails the Job at once; disruptions do not count.
	require.NotNil(t, spec.PodFailurePolicy)
	var failOn2, ignoreDisruption bool
	for _, r := range spec.PodFailurePolicy.Rules {
		if r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil &&
			r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Contains(r.OnExitCodes.Values, 2) {
			failOn2 = true
			require.NotNil(t, r.OnExitCodes.ContainerName)
			assert.Equal(t, c.Name, *r.OnExitCodes.ContainerName)
		}
		if r.Action == batchv1.PodFailurePolicyActionIgnore && len(r.OnPodConditions) == 1 && r.OnPodConditions[0].Type == corev1.DisruptionTarget {
			ignoreDisruption = true
		}
	}
	assert.True(t, failOn2, "podFailurePolicy: FailJob on exit code 2")
	assert.True(t, ignoreDisruption, "podFailurePolicy: Ignore DisruptionTarget")

	// Security: what Pod Security "restricted" demands, and more.
	require.NotNil(t, pod.SecurityContext)
	require.NotNil(t, pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.RunAsUser)
	assert.Equal(t, int64(65532), *pod.SecurityContext.RunAsUser)
	require.NotNil(t, pod.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
	assert.Nil(t, sc.Privileged)

	assert.Equal(t, "registration-engine:"+releaseVersion(t), c.Image, "the release's version, never latest")
	assert.False(t, c.Resources.Requests.Cpu().IsZero())
	assert.False(t, c.Resources.Requests.Memory().IsZero())
	assert.False(t, c.Resources.Limits.Memory().IsZero())

	// Downward API: the Lease holder and the startup-sleep signal.
	fieldPaths := map[string]string{
		"POD_NAME":                      "metadata.name",
		"POD_NAMESPACE":                 "metadata.namespace",
		"JOB_NAME":                      "metadata.labels['batch.kubernetes.io/job-name']",
		"JOB_UID":                       "metadata.labels['batch.kubernetes.io/controller-uid']",
		"REGISTRATION_SECRET_NAMESPACE": "metadata.namespace",
	}
	for name, fp := range fieldPaths {
		require.Contains(t, e, name)
		require.NotNil(t, e[name].ValueFrom, name)
		require.NotNil(t, e[name].ValueFrom.FieldRef, name)
		assert.Equal(t, fp, e[name].ValueFrom.FieldRef.FieldPath, name)
	}
	assert.Equal(t, cj.Name, e["CRONJOB_NAME"].Value, "the startup sleep recognises the CronJob's Jobs by this name")
	assert.Equal(t, operator.SecretName, e["REGISTRATION_SECRET_NAME"].Value)
	assert.Equal(t, "true", e["IN_CLUSTER_DNS"].Value)
	assert.Equal(t, "/etc/regionserverclnt.cfg", e["REGIONSRV_CONFIG"].Value)

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
		assert.True(t, m.ReadOnly, m.MountPath)
	}
	assert.Equal(t, "regionserverclnt.cfg", mounts["/etc/regionserverclnt.cfg"].SubPath)
	require.Contains(t, mounts, "/usr/lib/regionService/certs")
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	require.NotNil(t, volumes[mounts["/etc/regionserverclnt.cfg"].Name].ConfigMap)
	assert.Equal(t, "regionserverclnt-config", volumes[mounts["/etc/regionserverclnt.cfg"].Name].ConfigMap.Name)
	require.NotNil(t, volumes[mounts["/usr/lib/regionService/certs"].Name].ConfigMap)
	assert.Equal(t, "region-server-certs", volumes[mounts["/usr/lib/regionService/certs"].Name].ConfigMap.Name)

	sa := find[*corev1.ServiceAccount](t, objects, "base/cattle-scc-system/serviceaccount.yaml")
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
}

// The Role covers exactly what job/kube and job/incluster/coredns write, by
// name, and nothing else.
func TestRBACMatchesTheEngine(t *testing.T) {
	_, objects := load(t)
	_, _, c := cronJob(t, objects)
	leaseName := env(c)["LEASE_NAME"].Value
	require.NotEmpty(t, leaseName)

	role := find[*rbacv1.Role](t, objects, "base/cattle-scc-system/role.yaml")
	rules := map[string]rbacv1.PolicyRule{}
	for _, r := range role.Rules {
		require.Len(t, r.Resources, 1)
		rules[r.Resources[0]] = r
		if r.Resources[0] == "events" {
			// Events have generated names: create cannot name them.
			assert.Equal(t, []string{"events.k8s.io"}, r.APIGroups)
			assert.Equal(t, []string{"create"}, r.Verbs, "the engine only creates its Events")
			continue
		}
		assert.NotEmpty(t, r.ResourceNames, "every other rule is limited by resourceNames")
	}
	assert.Equal(t, []string{operator.SecretName}, rules["secrets"].ResourceNames)
	assert.Equal(t, []string{leaseName}, rules["leases"].ResourceNames)
	// Exactly the verbs the engine calls, nothing more: server-side apply
	// (get, then a patch that creates by name, so create too); the Lease is
	// also taken over and released with update. The Secret is never updated;
	// it is deleted only to recover a Failed Registration. The Lease is
	// never deleted by the engine: the chart's cleanup hook, under its own
	// ServiceAccount, removes it at uninstall.
	assert.ElementsMatch(t, []string{"get", "create", "patch", "delete"}, rules["secrets"].Verbs, "secrets")
	assert.ElementsMatch(t, []string{"get", "create", "update", "patch"}, rules["leases"].Verbs, "leases")
	// rancher/scc-operator's Deployment, read by name: the proxy settings
	// it runs with (job/operator CheckProxy).
	assert.Equal(t, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{operator.Deployment}, Verbs: []string{"get"}}, rules["deployments"])
	assert.Len(t, rules, 4)

	// Cluster-wide, only a read of the operator's Registrations.
	cr := find[*rbacv1.ClusterRole](t, objects, "base/cattle-scc-system/clusterrole.yaml")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{kube.RegistrationGroup}, Resources: []string{kube.RegistrationResource}, Verbs: []string{"get"}}}, cr.Rules)
	crb := find[*rbacv1.ClusterRoleBinding](t, objects, "base/cattle-scc-system/clusterrolebinding.yaml")
	assert.Equal(t, cr.Name, crb.RoleRef.Name)
	assert.Equal(t, "ClusterRole", crb.RoleRef.Kind)

	// In kube-system: both CoreDNS ConfigMaps read (the layout is decided
	// by whether coredns-custom exists, and the Corefile must reload), only
	// coredns-custom merge-patched (AKS's layout: the chart's default and
	// overlays/azure), and a list of EndpointSlices (the CoreDNS pods the
	// handover asks); no rule on the coredns Deployment, which the engine
	// never restarts.
	corednsRole := find[*rbacv1.Role](t, objects, "base/kube-system/role.yaml")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{coredns.CustomConfigMap, coredns.ConfigMap}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{coredns.CustomConfigMap}, Verbs: []string{"patch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
	}, corednsRole.Rules, "AKS's layout: get both, patch only coredns-custom (never created, never updated), list EndpointSlices (the one call coredns.Replicas makes)")
	// The Corefile layout (kubeadm, kind) adds the patch of coredns alone.
	corefile := find[*rbacv1.Role](t, objects, "base/corefile-layout/role.yaml")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{coredns.ConfigMap}, Verbs: []string{"patch"}},
	}, corefile.Rules)

	// In kube-system also a get of the operator's Lease, by name, and
	// nothing else: the recovery's check that the operator runs.
	opLease := find[*rbacv1.Role](t, objects, "base/operator-lease/role.yaml")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{operator.LeaseName}, Verbs: []string{"get"}}}, opLease.Rules)
	assert.NotContains(t, env(c), "OPERATOR_LEASE", "the default, kube-system/scc-controllers, is the Lease the Role names")

	for file, roleName := range map[string]string{
		"base/cattle-scc-system/rolebinding.yaml": role.Name,
		"base/kube-system/rolebinding.yaml":       corednsRole.Name,
		"base/corefile-layout/rolebinding.yaml":   corefile.Name,
		"base/operator-lease/rolebinding.yaml":    opLease.Name,
	} {
		rb := find[*rbacv1.RoleBinding](t, objects, file)
		assert.Equal(t, roleName, rb.RoleRef.Name, file)
		require.Len(t, rb.Subjects, 1, file)
		assert.Equal(t, rbacv1.Subject{Kind: "ServiceAccount", Name: "registration-engine", Namespace: operator.Namespace}, rb.Subjects[0], file)
	}
}

// The CoreDNS admission policy speaks of the engine the manifests install:
// its ServiceAccount, its key in coredns-custom, the two ConfigMaps and the
// CronJob's UPDATE_SERVER_DOMAINS and CLUSTER_ADDRESS_RANGES. A drift in any of them would refuse the
// engine's own write (or bind the policy to nobody). What the expressions
// admit is proven on a real API server: e2e TestCoreDNSAdmissionPolicy.
func TestCoreDNSPolicyMatchesTheEngine(t *testing.T) {
	_, objects := load(t)
	_, _, c := cronJob(t, objects)
	sa := find[*corev1.ServiceAccount](t, objects, "base/cattle-scc-system/serviceaccount.yaml")
	vap := find[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objects, "base/coredns-policy.yaml")

	require.NotNil(t, vap.Spec.FailurePolicy)
	assert.Equal(t, admissionregistrationv1.Fail, *vap.Spec.FailurePolicy, "an expression that cannot be evaluated refuses")
	require.Len(t, vap.Spec.MatchConditions, 1)
	assert.Equal(t, "request.userInfo.username == 'system:serviceaccount:"+operator.Namespace+":"+sa.Name+"'", vap.Spec.MatchConditions[0].Expression,
		"bound to the engine's ServiceAccount alone")
	mc := vap.Spec.MatchConstraints
	require.NotNil(t, mc)
	require.NotNil(t, mc.NamespaceSelector)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "kube-system"}, mc.NamespaceSelector.MatchLabels)
	require.Len(t, mc.ResourceRules, 1)
	rule := mc.ResourceRules[0]
	assert.ElementsMatch(t, []string{coredns.CustomConfigMap, coredns.ConfigMap}, rule.ResourceNames)
	assert.Equal(t, []string{"configmaps"}, rule.Resources)
	assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, rule.Operations, "a patch is an UPDATE")

	vars := map[string]string{}
	for _, v := range vap.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	domains := strings.Split(env(c)["UPDATE_SERVER_DOMAINS"].Value, ",")
	require.NotEmpty(t, domains[0], "the CronJob sets UPDATE_SERVER_DOMAINS")
	assert.Equal(t, celList(domains), vars["domains"], "the policy's domains are the CronJob's UPDATE_SERVER_DOMAINS")
	ranges := strings.Split(env(c)["CLUSTER_ADDRESS_RANGES"].Value, ",")
	require.NotEmpty(t, ranges[0], "the CronJob sets CLUSTER_ADDRESS_RANGES")
	assert.Equal(t, celList(ranges), vars["clusterRanges"], "the policy's clusterRanges are the CronJob's CLUSTER_ADDRESS_RANGES")
	assert.Equal(t, "false", vars["allowLoopback"], "no loopback entries outside test installs (overlays/e2e turns them on)")
	assert.Contains(t, vars["ownKey"], "'"+coredns.DefaultHostsKey+"'")
	assert.Contains(t, vars["ownKey"], "'"+coredns.CorefileKey+"'")

	b := find[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objects, "base/coredns-policy-binding.yaml")
	assert.Equal(t, vap.Name, b.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
}

func TestRegionServerConfigs(t *testing.T) {
	_, objects := load(t)
	tests := map[string]struct {
		file    string
		servers []string // nil: the engine must refuse the file
	}{
		// The seed's placeholder is not even an address: base alone stops
		// at load-config instead of querying anything.
		"base (the seed's sample)": {file: "base/cattle-scc-system/regionserverclnt-config.yaml"},
		"azure": {
			file:    "overlays/azure/regionserverclnt-config.yaml",
			servers: []string{"23.100.36.229", "40.121.202.140", "52.187.53.250", "104.45.31.195", "191.237.254.253"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cm := find[*corev1.ConfigMap](t, objects, tc.file)
			s, err := regionconfig.Parse([]byte(cm.Data["regionserverclnt.cfg"]), tc.file)
			if tc.servers == nil {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.servers, s.RegionServers)
			assert.Equal(t, "/usr/lib/regionService/certs", s.CertLocation, "where the CronJob mounts region-server-certs")
			assert.True(t, s.HTTPSOnly)
		})
	}
}

func TestAzureOverlay(t *testing.T) {
	_, objects := load(t)
	sa := find[*corev1.ServiceAccount](t, objects, "overlays/azure/workload-identity.yaml")
	assert.Contains(t, sa.Annotations, "azure.workload.identity/client-id")
	assert.Contains(t, sa.Annotations, "azure.workload.identity/tenant-id")

	cj := find[*batchv1.CronJob](t, objects, "overlays/azure/cronjob.yaml")
	tpl := cj.Spec.JobTemplate.Spec.Template
	assert.Equal(t, "true", tpl.Labels["azure.workload.identity/use"])
	require.Len(t, tpl.Spec.Containers, 1)
	e := env(&tpl.Spec.Containers[0])
	assert.Equal(t, "workload-identity", e["AZURE_CREDENTIAL_MODE"].Value, "the mode is chosen explicitly")
	for _, name := range []string{"EXTENSION_RESOURCE_ID", "MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID", "MARKETPLACE_PLAN_ID"} {
		assert.NotEmpty(t, e[name].Value, name)
	}
	code := e["REGISTRATION_CODE"]
	require.NotNil(t, code.ValueFrom)
	require.NotNil(t, code.ValueFrom.SecretKeyRef, "the code comes from a Secret, never a literal")
	assert.Empty(t, code.Value)
}

func TestKindConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "kind-config.yaml"))
	require.NoError(t, err)
	var c kindv1alpha4.Cluster
	require.NoError(t, yaml.UnmarshalStrict(data, &c))
	assert.Equal(t, "Cluster", c.Kind)
	assert.Equal(t, "kind.x-k8s.io/v1alpha4", c.APIVersion)
	require.Len(t, c.Nodes, 1)
	assert.Equal(t, kindv1alpha4.ControlPlaneRole, c.Nodes[0].Role)
	assert.Empty(t, c.Nodes[0].Image, "the node image is chosen at create time")
}

// kubectl kustomize renders each overlay as users will apply it. Skipped
// without kubectl (K8S_TESTBIN/kubectl or on PATH) unless CI is set; the
// real-control-plane tests apply the rendered output.
func TestKustomizeRenders(t *testing.T) {
	kubectl := kubectlBin(t)
	for _, dir := range []string{"base", "overlays/azure", "overlays/e2e"} {
		t.Run(dir, func(t *testing.T) {
			objs := splitObjects(t, run(t, kubectl, "kustomize", dir))
			for k, o := range objs {
				if !slices.Contains([]string{"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, o.kind) {
					assert.NotEmpty(t, o.namespace, "%s has a namespace", k)
				}
			}
			assert.Contains(t, objs, "Role/kube-system/registration-engine-coredns")
			assert.Contains(t, objs, "Role/cattle-scc-system/registration-engine")
			assert.Contains(t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns")
			assert.Contains(t, objs, "ValidatingAdmissionPolicyBinding//registration-engine-coredns")
			if dir == "overlays/e2e" {
				assert.Contains(t, objs, "Role/kube-system/registration-engine-corefile", "kind's CoreDNS is kubeadm's: the Corefile layout")
			} else {
				assert.NotContains(t, objs, "Role/kube-system/registration-engine-corefile", "AKS's layout: coredns is only read")
			}
			cj := renderedAs[*batchv1.CronJob](t, objs, "CronJob/cattle-scc-system/registration-engine")
			c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers
			require.Len(t, c, 1, "the overlay's container merged into the base's")
			e := env(&c[0])
			assert.Contains(t, e, "POD_NAME")
			if dir == "overlays/azure" {
				assert.Contains(t, e, "MARKETPLACE_PLAN_ID")
			}
			// What the cluster really gets, after every patch of the overlay:
			// non-root, read-only root, no capabilities, RuntimeDefault
			// seccomp, and a permanent failure failing the Job at once.
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			require.NotNil(t, pod.SecurityContext, "patches keep the pod's security settings")
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			assert.Equal(t, int64(65532), *pod.SecurityContext.RunAsUser)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
			sc := c[0].SecurityContext
			require.NotNil(t, sc, "patches keep the container's security settings")
			assert.True(t, *sc.ReadOnlyRootFilesystem)
			assert.False(t, *sc.AllowPrivilegeEscalation)
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.Empty(t, sc.Capabilities.Add)
			pfp := cj.Spec.JobTemplate.Spec.PodFailurePolicy
			require.NotNil(t, pfp)
			assert.Equal(t, batchv1.PodFailurePolicyActionFailJob, pfp.Rules[0].Action)
			assert.Equal(t, []int32{2}, pfp.Rules[0].OnExitCodes.Values)
		})
	}
}
