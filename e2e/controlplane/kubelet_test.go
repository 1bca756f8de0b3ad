package controlplane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

// run is what the process kubelet handed to Run for one pod.
type run struct {
	pod   string
	env   []string
	token string
}

// TestKubeletRunsJobs proves the process kubelet drives the real Job
// controller: a zero exit completes the Job, an exit code named by a
// podFailurePolicy FailJob rule fails it at once without a second pod, and
// any other failure makes the controller retry with a new pod. The pod gets
// the environment and ServiceAccount token a real kubelet would give it.
func TestKubeletRunsJobs(t *testing.T) {
	p := controlplane.Shared(t)
	tests := map[string]struct {
		exits         []int // exit code of the first, second, ... pod
		want          batchv1.JobConditionType
		wantReason    string
		wantPods      int
		wantFailed    int32
		wantSucceeded int32
	}{
		"exit 0 completes the Job": {
			exits: []int{0}, want: batchv1.JobComplete, wantPods: 1, wantSucceeded: 1,
		},
		"exit code of a FailJob rule fails the Job without a retry": {
			exits: []int{2}, want: batchv1.JobFailed, wantReason: batchv1.JobReasonPodFailurePolicy,
			wantPods: 1, wantFailed: 1,
		},
		"another non-zero exit is retried in a new pod": {
			exits: []int{1, 0}, want: batchv1.JobComplete, wantPods: 2, wantFailed: 1, wantSucceeded: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			admin := p.AdminClient(t)
			ns, err := admin.CoreV1().Namespaces().Create(ctx,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubelet-"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = admin.CoreV1().ServiceAccounts(ns.Name).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{})
			require.NoError(t, err)

			var mu sync.Mutex
			var runs []run
			k := &controlplane.Kubelet{
				Plane: p, Namespace: ns.Name, Logf: t.Logf,
				Run: func(_ context.Context, pod *corev1.Pod, env []string, token string) int {
					mu.Lock()
					defer mu.Unlock()
					runs = append(runs, run{pod: pod.Name, env: env, token: token})
					return tc.exits[min(len(runs), len(tc.exits))-1]
				},
			}
			k.Start(ctx)
			t.Cleanup(func() { assert.NoError(t, k.Stop()) })

			job, err := admin.BatchV1().Jobs(ns.Name).Create(ctx, testJob(), metav1.CreateOptions{})
			require.NoError(t, err)
			done := controlplane.WaitJobFinished(ctx, t, admin, ns.Name, job.Name)

			cond := controlplane.FinishedCondition(done)
			require.NotNil(t, cond)
			assert.Equal(t, tc.want, cond.Type)
			if tc.wantReason != "" {
				assert.Equal(t, tc.wantReason, cond.Reason)
			}
			assert.Equal(t, tc.wantFailed, done.Status.Failed, "failed pods")
			assert.Equal(t, tc.wantSucceeded, done.Status.Succeeded, "succeeded pods")
			pods, err := admin.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job.Name})
			require.NoError(t, err)
			assert.Len(t, pods.Items, tc.wantPods, "pods the Job controller created")

			mu.Lock()
			first := runs[0]
			assert.Len(t, runs, tc.wantPods, "pods run")
			mu.Unlock()
			for _, kv := range []string{
				"POD_NAME=" + first.pod,
				"POD_NAMESPACE=" + ns.Name,
				"JOB_NAME=" + job.Name,
				"TARGET=" + ns.Name + "/scc-registration",
				"KUBERNETES_SERVICE_HOST=" + p.Host,
				"KUBERNETES_SERVICE_PORT=" + p.Port,
			} {
				assert.Contains(t, first.env, kv)
			}
			review, err := kubernetes.NewForConfigOrDie(p.ClientAs(t, first.token)).AuthenticationV1().
				SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			require.NoError(t, err)
			assert.Equal(t, "system:serviceaccount:"+ns.Name+":runner", review.Status.UserInfo.Username)
			assert.Equal(t, authenticationv1.ExtraValue{first.pod}, review.Status.UserInfo.Extra["authentication.kubernetes.io/pod-name"],
				"the token is bound to its pod, like a projected token")
		})
	}
}

// testJob is shaped like the engine's CronJob template: restartPolicy
// Never, backoffLimit 3, a FailJob rule for the permanent-failure exit code
// 2, and downward-API env. The image and command are never run.
func testJob() *batchv1.Job {
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "run-"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(int32(3)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{2},
				},
			}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:      corev1.RestartPolicyNever,
				ServiceAccountName: "runner",
				Containers: []corev1.Container{{
					Name: "engine", Image: "registration-engine:test", Command: []string{"/registration-engine"},
					Env: []corev1.EnvVar{
						fieldEnv("POD_NAME", "metadata.name"),
						fieldEnv("POD_NAMESPACE", "metadata.namespace"),
						fieldEnv("JOB_NAME", "metadata.labels['"+batchv1.JobNameLabel+"']"),
						{Name: "TARGET", Value: "$(POD_NAMESPACE)/scc-registration"},
					},
				}},
			}},
		},
	}
}
