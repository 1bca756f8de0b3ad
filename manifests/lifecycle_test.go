package manifests

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runJob returns the rendering's run Job (registration-engine-run-<hash>),
// or nil.
func runJob(t *testing.T, objs map[string]rendered) *batchv1.Job {
	t.Helper()
	for k, o := range objs {
		if strings.HasPrefix(k, "Job/"+chartNamespace+"/registration-engine-run-") {
			j, ok := o.typed.(*batchv1.Job)
			require.True(t, ok)
			return j
		}
	}
	return nil
}

// The run after an install is the CronJob's run: the same Job spec (one
// template renders both), named by a hash of what a run reads, and not a
// Helm hook (Helm would wait for it and fail an atomic install with it).
// The cleanup at uninstall is a bounded post-delete hook of the same pod
// template with args ["cleanup"], under its own ServiceAccount.
func TestChartLifecycleJobs(t *testing.T) {
	objs := splitObjects(t, helmTemplate(t, chartDir, goldenValueSets["marketplace"]))
	cj, _ := chartCronJob(t, objs)
	run := runJob(t, objs)
	require.NotNil(t, run, "helm install renders the run Job")
	assert.Equal(t, cj.Spec.JobTemplate.Spec, run.Spec, "the run Job's spec is the CronJob's")
	assert.Empty(t, run.Annotations["helm.sh/hook"], "the run is no hook")
	hash := strings.TrimPrefix(run.Name, "registration-engine-run-")
	assert.Equal(t, hash, cj.Annotations["registration-engine.cattle.io/run-inputs"], "the CronJob records the run's inputs")
	assert.Regexp(t, "^[0-9a-f]{10}$", hash)

	cleanup := renderedAs[*batchv1.Job](t, objs, "Job/"+chartNamespace+"/registration-engine-cleanup")
	assert.Equal(t, "post-delete", cleanup.Annotations["helm.sh/hook"], "a failed hook cannot keep the release installed")
	assert.Contains(t, cleanup.Annotations["helm.sh/hook-delete-policy"], "hook-failed", "a failed hook leaves no Job")
	require.NotNil(t, cleanup.Spec.ActiveDeadlineSeconds, "the hook is bounded")
	assert.EqualValues(t, 90, *cleanup.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, []string{"cleanup"}, cleanup.Spec.Template.Spec.Containers[0].Args)
	pod := cleanup.Spec.Template.Spec
	assert.Equal(t, "registration-engine-cleanup", pod.ServiceAccountName, "the release's ServiceAccount is gone when the hook runs")
	assert.Empty(t, pod.Volumes, "no volume of a ConfigMap the uninstall deleted: the pod would never start")
	assert.Empty(t, pod.Containers[0].VolumeMounts)
	assert.NotContains(t, cleanup.Spec.Template.Labels, "azure.workload.identity/use", "the cleanup needs no Azure credential")
	var env []string
	for _, v := range pod.Containers[0].Env {
		env = append(env, v.Name)
	}
	assert.Equal(t, []string{"POD_NAME", "POD_NAMESPACE", "REGISTRATION_SECRET_NAMESPACE", "LEASE_NAME", "IN_CLUSTER_DNS", "UPDATE_SERVER_DOMAINS", "CLUSTER_ADDRESS_RANGES", "GOMEMLIMIT"}, env,
		"only what registration-engine cleanup reads")
	scheduled := cj.Spec.JobTemplate.Spec.Template.Spec
	pod.ServiceAccountName, scheduled.ServiceAccountName = "", ""
	pod.Containers, scheduled.Containers = nil, nil
	pod.Volumes, scheduled.Volumes = nil, nil
	assert.Equal(t, scheduled, pod, "but for its account, container and volumes, the hook's pod is the CronJob's (node selection, security)")
	c, r := cleanup.Spec.Template.Spec.Containers[0], cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	assert.Equal(t, r.Image, c.Image)
	assert.Equal(t, r.SecurityContext, c.SecurityContext)
	assert.Equal(t, r.Resources, c.Resources)

	// The hook's own access, created before its Job and deleted with it.
	for _, key := range []string{
		"ServiceAccount/" + chartNamespace + "/registration-engine-cleanup",
		"Role/" + chartNamespace + "/registration-engine-cleanup",
		"RoleBinding/" + chartNamespace + "/registration-engine-cleanup",
		"Role/kube-system/registration-engine-cleanup",
		"RoleBinding/kube-system/registration-engine-cleanup",
		"ValidatingAdmissionPolicy//registration-engine-coredns-cleanup",
		"ValidatingAdmissionPolicyBinding//registration-engine-coredns-cleanup",
	} {
		o := renderedAs[metav1.Object](t, objs, key)
		assert.Equal(t, "post-delete", o.GetAnnotations()["helm.sh/hook"], key)
		assert.Equal(t, "-10", o.GetAnnotations()["helm.sh/hook-weight"], key+": created before the Job")
		assert.Equal(t, "before-hook-creation,hook-succeeded", o.GetAnnotations()["helm.sh/hook-delete-policy"], key)
	}

	tests := map[string]struct {
		set     []string
		changed bool
	}{
		"a new registration code":  {[]string{"registrationCode=OTHER"}, true},
		"another plan":             {[]string{"global.azure.marketplace.planId=other"}, true},
		"another region server":    {[]string{"regionServers={203.0.113.9}"}, true},
		"another image":            {[]string{"global.azure.images.engine.digest=sha256:" + strings.Repeat("1", 64)}, true},
		"another credentials mode": {[]string{"azure.credentialMode=workload-identity", "azure.workloadIdentity.clientId=5e2a1a4c-0000-4000-8000-00000000c11e", "azure.workloadIdentity.tenantId=72f988bf-86f1-41af-91ab-2d7cd011db47"}, true},
		"another schedule":         {[]string{"schedule=5 1 * * *"}, false},
		"nothing":                  {nil, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			other := runJob(t, splitObjects(t, helmTemplate(t, chartDir, goldenValueSets["marketplace"], tc.set...)))
			require.NotNil(t, other)
			assert.Equal(t, tc.changed, other.Name != run.Name, "a run Job of its own: %s vs %s", other.Name, run.Name)
		})
	}

	off := splitObjects(t, helmTemplate(t, chartDir, goldenValueSets["marketplace"], "runOnChange=false", "cleanupOnUninstall=false"))
	assert.Nil(t, runJob(t, off))
	assert.NotContains(t, off, "Job/"+chartNamespace+"/registration-engine-cleanup")
}

var chosenSchedule = regexp.MustCompile(`^([0-9]{1,2}) ([0-9]{1,2}),([0-9]{1,2}) \* \* \*$`)

// TestChartSchedule: with schedule empty each cluster gets its own minute
// and hour in the shape of "0 */18 * * *" (runs 18 h then 6 h apart), the
// same for the same cluster on every rendering; a user's schedule wins.
func TestChartSchedule(t *testing.T) {
	seen := map[string]bool{}
	for i := range 8 {
		id := "/subscriptions/00000000-0000-0000-0000-00000000000" + strconv.Itoa(i) + "/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.KubernetesConfiguration/extensions/rancher"
		set := "global.azure.extension.resourceId=" + id
		cj, _ := chartCronJob(t, splitObjects(t, helmTemplate(t, chartDir, goldenValueSets["marketplace"], set)))
		m := chosenSchedule.FindStringSubmatch(cj.Spec.Schedule)
		require.NotNil(t, m, "schedule %q", cj.Spec.Schedule)
		minute, _ := strconv.Atoi(m[1])
		h1, _ := strconv.Atoi(m[2])
		h2, _ := strconv.Atoi(m[3])
		assert.Less(t, minute, 60)
		assert.Less(t, h1, h2)
		assert.Contains(t, []int{6, 18}, h2-h1, "18 h then 6 h apart: %s", cj.Spec.Schedule)
		offset, err := strconv.Atoi(cj.Annotations["registration-engine.cattle.io/schedule-offset"])
		require.NoError(t, err)
		assert.Equal(t, offset%60, minute, "the offset the next upgrade keeps is this schedule's")
		again, _ := chartCronJob(t, splitObjects(t, helmTemplate(t, chartDir, goldenValueSets["marketplace"], set)))
		assert.Equal(t, cj.Spec.Schedule, again.Spec.Schedule, "the same cluster, the same schedule")
		seen[cj.Spec.Schedule] = true
	}
	assert.Greater(t, len(seen), 4, "clusters get schedules of their own")

	cj, _ := chartCronJob(t, splitObjects(t, helmTemplate(t, chartDir, goldenValueSets["marketplace"], "schedule=0 */18 * * *")))
	assert.Equal(t, "0 */18 * * *", cj.Spec.Schedule, "a user-set schedule wins")
}

// The cleanup hook's ServiceAccount may patch only the ConfigMap the engine
// writes for the layout, under a copy of the engine's admission policy
// bound to it; without in-cluster DNS it has nothing in kube-system.
func TestChartCleanupAccess(t *testing.T) {
	const sa = "system:serviceaccount:" + chartNamespace + ":registration-engine-cleanup"
	for layout, patched := range map[string]string{"aks": "coredns-custom", "corefile": "coredns"} {
		objs := splitObjects(t, helmTemplate(t, chartDir, minimal, "coreDNSLayout="+layout))
		role := renderedAs[*rbacv1.Role](t, objs, "Role/kube-system/registration-engine-cleanup")
		var patches []string
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "patch") {
				patches = append(patches, r.ResourceNames...)
			}
		}
		assert.Equal(t, []string{patched}, patches, "layout %s", layout)
		engine := renderedAs[*admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns")
		hook := renderedAs[*admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy//registration-engine-coredns-cleanup")
		assert.Contains(t, hook.Spec.MatchConditions[0].Expression, "'"+sa+"'")
		hook.Spec.MatchConditions, engine.Spec.MatchConditions = nil, nil
		// The hook's copy has one rule more: its token only removes
		// (issue 45, S5-07).
		require.Len(t, hook.Spec.Validations, len(engine.Spec.Validations)+1)
		removeOnly := hook.Spec.Validations[len(hook.Spec.Validations)-1]
		assert.Contains(t, removeOnly.MessageExpression, "may only remove the engine")
		hook.Spec.Validations = hook.Spec.Validations[:len(engine.Spec.Validations)]
		assert.Equal(t, engine.Spec, hook.Spec, "the hook's policy is the engine's but for whom it matches and its removal-only rule")
		binding := renderedAs[*admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding//registration-engine-coredns-cleanup")
		assert.Equal(t, "registration-engine-coredns-cleanup", binding.Spec.PolicyName)
		assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)
	}
	objs := splitObjects(t, helmTemplate(t, chartDir, minimal, "inClusterDNS=false"))
	assert.Contains(t, objs, "Job/"+chartNamespace+"/registration-engine-cleanup", "the Lease still goes")
	for k := range objs {
		assert.False(t, strings.HasSuffix(k, "kube-system/registration-engine-cleanup") || strings.Contains(k, "ValidatingAdmissionPolicy"), "%s without inClusterDNS", k)
	}
}
