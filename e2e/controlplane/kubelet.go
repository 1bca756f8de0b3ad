package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// Kubelet plays the node for the pods that Jobs create in one namespace, so
// CronJobs and Jobs run to completion on a plane without a container
// runtime. For each new Pending pod owned by a Job it mints a TokenRequest
// token for the pod's ServiceAccount (bound to the pod, as a real kubelet's
// projected token is), computes the first container's environment (service
// variables, envFrom, env with downward-API fieldRefs, ConfigMap and Secret
// keys, $(VAR) expansion), reports the pod Running, calls Run, and reports
// the pod Succeeded (exit code 0) or Failed with the container terminated
// with that exit code. That is what the Job controller counts, and what a
// podFailurePolicy onExitCodes rule matches.
//
// Pods run concurrently, each once. A pod the Kubelet cannot run (more than
// one container, an init container, an env source it does not compute or
// that is missing) stays Pending, like CreateContainerConfigError, and the
// error is returned by Stop.
type Kubelet struct {
	// Plane is the control plane; the Kubelet acts as its admin.
	Plane *Plane
	// Namespace is the only namespace watched.
	Namespace string
	// Run runs the pod: typically the binary under test with the pod's
	// container args, env and token. env is the container's environment
	// only (no PATH or HOME from the test process, as in a real container);
	// token is the ServiceAccount token a pod would find in its projected
	// volume. Run must return when ctx is done (Stop cancels it).
	Run func(ctx context.Context, pod *corev1.Pod, env []string, token string) (exitCode int)
	// Logf, when set, gets one line per pod started and finished and each
	// error (t.Logf fits; it must not be called after the test ends, so
	// Stop the Kubelet in the test or its Cleanup).
	Logf func(format string, args ...any)

	mu      sync.Mutex
	stopped bool
	seen    map[types.UID]bool
	errs    []error
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	factory informers.SharedInformerFactory
}

// KubeletUserAgent is the user agent of every request the Kubelet makes. It
// acts as the admin, as the test does; an audit log (WithAuditLog) tells
// the Kubelet's requests, which stand in for a node's, from the test's by
// it.
const KubeletUserAgent = "controlplane-kubelet"

// Start begins watching; it returns at once. Stop ends it.
func (k *Kubelet) Start(ctx context.Context) {
	ctx, k.cancel = context.WithCancel(ctx)
	k.seen = map[types.UID]bool{}
	cfg := rest.CopyConfig(k.Plane.Admin)
	cfg.UserAgent = KubeletUserAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		k.fail(fmt.Errorf("kubelet: client: %w", err))
		return
	}
	k.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(k.Namespace))
	inf := k.factory.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !k.claim(pod) {
			return
		}
		go func() {
			defer k.wg.Done()
			if err := k.runPod(ctx, cs, pod); err != nil && ctx.Err() == nil {
				k.fail(fmt.Errorf("kubelet: pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		}()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
	}); err != nil {
		k.fail(fmt.Errorf("kubelet: watch: %w", err))
		return
	}
	k.factory.Start(ctx.Done())
}

// Stop cancels running pods, waits for them and the watch to end, and
// returns every error met while running pods.
func (k *Kubelet) Stop() error {
	k.mu.Lock()
	k.stopped = true // no pod starts after this, so wg.Wait below is final
	k.mu.Unlock()
	if k.cancel != nil {
		k.cancel()
	}
	k.wg.Wait()
	if k.factory != nil {
		k.factory.Shutdown()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return errors.Join(k.errs...)
}

// claim reports whether pod is a new Pending Job pod, marking it taken and
// counting its run in wg.
func (k *Kubelet) claim(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return false
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped || k.seen[pod.UID] {
		return false
	}
	k.seen[pod.UID] = true
	k.wg.Add(1)
	return true
}

func (k *Kubelet) fail(err error) {
	k.logf("process kubelet: %v", err)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, err)
}

func (k *Kubelet) logf(format string, args ...any) {
	if k.Logf != nil {
		k.Logf(format, args...)
	}
}

func (k *Kubelet) runPod(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) error {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 {
		return fmt.Errorf("%d containers, %d init containers: %w",
			len(pod.Spec.Containers), len(pod.Spec.InitContainers), ErrUnsupportedPod)
	}
	c := &pod.Spec.Containers[0]
	src, err := fetchEnvSources(ctx, cs, pod.Namespace, c)
	if err != nil {
		return err
	}
	env, err := containerEnv(pod, c, k.Plane.Host, k.Plane.Port, src)
	if err != nil {
		return err
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	token, err := mintToken(ctx, cs, pod.Namespace, sa, nil, &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
	})
	if err != nil {
		return err
	}

	started := metav1.Now()
	if err := setStatus(ctx, cs, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.StartTime = &started
		s.HostIP, s.PodIP = "127.0.0.1", "127.0.0.1"
		s.Conditions = podConditions(corev1.ConditionTrue)
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}}
	}); err != nil {
		return fmt.Errorf("report running: %w", err)
	}
	k.logf("process kubelet: pod %s/%s running", pod.Namespace, pod.Name)

	code := k.Run(ctx, pod, env, token)
	if ctx.Err() != nil {
		return nil // stopped: the test is over, nobody reads the outcome
	}
	k.logf("process kubelet: pod %s/%s exited %d", pod.Namespace, pod.Name, code)

	finished := metav1.Now()
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	if err := setStatus(ctx, cs, pod, func(s *corev1.PodStatus) {
		s.Phase = phase
		s.Conditions = podConditions(corev1.ConditionFalse)
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: false, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: int32(code), Reason: reason, StartedAt: started, FinishedAt: finished,
			}},
		}}
	}); err != nil {
		return fmt.Errorf("report exit %d: %w", code, err)
	}
	return nil
}

// setStatus applies mutate to the pod's latest status and writes it through
// pods/status, retrying on conflicts with the Job controller's writes (it
// adds and removes its tracking finalizer on the pod). A pod deleted
// meanwhile is not an error.
func setStatus(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	pods := cs.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&cur.Status)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile (its Job ended): nothing to report to
	}
	return err
}

// podConditions are the conditions a kubelet reports: scheduled and
// initialized, and ready while the container runs.
func podConditions(ready corev1.ConditionStatus) []corev1.PodCondition {
	now := metav1.NewTime(time.Now())
	conds := []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: ready},
		{Type: corev1.PodReady, Status: ready},
	}
	for i := range conds {
		conds[i].LastTransitionTime = now
	}
	return conds
}

// fetchEnvSources reads the ConfigMaps and Secrets container c's env and
// envFrom name; one that does not exist is left out.
func fetchEnvSources(ctx context.Context, cs kubernetes.Interface, ns string, c *corev1.Container) (envSources, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	src := envSources{configMaps: map[string]map[string]string{}, secrets: map[string]map[string][]byte{}}
	var cms, secrets []string
	for _, f := range c.EnvFrom {
		if f.ConfigMapRef != nil {
			cms = append(cms, f.ConfigMapRef.Name)
		}
		if f.SecretRef != nil {
			secrets = append(secrets, f.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			cms = append(cms, e.ValueFrom.ConfigMapKeyRef.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets = append(secrets, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	for _, name := range cms {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return src, fmt.Errorf("configmap %s: %w", name, err)
		default:
			src.configMaps[name] = cm.Data
		}
	}
	for _, name := range secrets {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return src, fmt.Errorf("secret %s: %w", name, err)
		default:
			src.secrets[name] = s.Data
		}
	}
	return src, nil
}
