package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
)

// Bounds of the Kubernetes measurement.
const (
	planeStartBudget = 3 * time.Minute
	settleBudget     = 30 * time.Second
	engineNamespace  = "cattle-scc-system"
	// directRuns are the unchanged runs straight to the API server over
	// TLS and HTTP/2, as in a cluster, for wall time and peak RSS.
	directRuns = 5
)

// kubeRun is one engine run against the control plane, through the
// plane's RequestLog, and the requests it made.
type kubeRun struct {
	Name   string
	Sample sample
	controlplane.Requests
}

// kubeResult is the Kubernetes measurement, or why there is none.
type kubeResult struct {
	Startup time.Duration
	// Runs went through the RequestLog.
	Runs []kubeRun
	// Direct are unchanged runs straight to the API server (TLS, HTTP/2,
	// client certificate).
	Direct                             series
	SecretUnchanged, CorefileUnchanged bool
	Err                                error
}

// measure starts a control plane, prepares what a cluster has (the engine's
// namespace, a CoreDNS ConfigMap), and runs the engine twice against a
// healthy fake cloud through the plane's RequestLog: the first run creates
// the Secret and the hosts entry, the second finds both unchanged. Then it
// runs it straight to the API server.
func (res *kubeResult) measure(ctx context.Context, testbin string, e engine, log io.Writer) error {
	startCtx, cancel := context.WithTimeout(ctx, planeStartBudget)
	defer cancel()
	p, err := controlplane.New(startCtx, testbin)
	if err != nil {
		return err
	}
	defer func() {
		if err := p.Stop(); err != nil {
			fmt.Fprintf(log, "benchrun: stop control plane: %v\n", err)
		}
	}()
	res.Startup = p.StartupTime
	fmt.Fprintf(log, "benchrun: control plane up in %.1fs\n", p.StartupTime.Seconds())
	cs, err := kubernetes.NewForConfig(p.Admin)
	if err != nil {
		return err
	}
	if err := prepareCluster(ctx, cs); err != nil {
		return err
	}
	env, stopCloud, err := startCloud()
	if err != nil {
		return err
	}
	defer stopCloud()
	requests, err := p.RequestLog(p.Dir)
	if err != nil {
		return err
	}
	defer requests.Close()

	env = append(env, "POD_NAME=benchrun")
	var secretRV, corefileRV string
	for _, name := range []string{"first run (creates)", "second run (unchanged)"} {
		requests.Take()
		one, err := e.measure(ctx, env, []string{"--kubeconfig", requests.Kubeconfig}, 0, 1, registers)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.Runs = append(res.Runs, kubeRun{Name: name, Sample: one.Samples[0], Requests: requests.Take()})
		sec, errS := cs.CoreV1().Secrets(engineNamespace).Get(ctx, "scc-registration", metav1.GetOptions{})
		cm, errC := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err := errors.Join(errS, errC); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.SecretUnchanged, res.CorefileUnchanged = sec.ResourceVersion == secretRV, cm.ResourceVersion == corefileRV
		secretRV, corefileRV = sec.ResourceVersion, cm.ResourceVersion
	}
	res.Direct, err = e.measure(ctx, env, []string{"--kubeconfig", p.AdminKubeconfig}, 0, directRuns, registers)
	if err != nil {
		return fmt.Errorf("direct runs: %w", err)
	}
	return nil
}

// registers checks a run that registers: exit 0 and a run summary.
var registers = scenario{}.check

// prepareCluster creates what the engine expects of a cluster and waits
// until the controllers have finished reacting to the new namespace, so
// that their work does not slow the measured runs (the RequestLog counts
// only the engine's requests, but the first run's wall time would carry
// theirs).
func prepareCluster(ctx context.Context, cs kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: engineNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", engineNamespace, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Data: map[string]string{"Corefile": fakecloud.KubeadmCorefile}}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("coredns ConfigMap: %w", err)
	}
	var last error // why the namespace is not settled yet
	settled := func(ctx context.Context) (bool, error) {
		_, errSA := cs.CoreV1().ServiceAccounts(engineNamespace).Get(ctx, "default", metav1.GetOptions{})
		_, errCA := cs.CoreV1().ConfigMaps(engineNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		last = errors.Join(errSA, errCA)
		return last == nil, nil
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settleBudget, true, settled)
	if wait.Interrupted(err) {
		return fmt.Errorf("namespace %s not settled after %s: %w", engineNamespace, settleBudget, last)
	}
	return err
}
