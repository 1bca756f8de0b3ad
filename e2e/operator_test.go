package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/e2e/sccoperator"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/incluster/handover"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
)

// dnsDelay is how long the process tier's cluster DNS keeps a new hosts
// entry from CoreDNS (the kubelet's ConfigMap sync and the reload plugin in
// a pod), for the engine and the operator alike. The kind tier measures
// 30-110 s; a few seconds show the wait without the cost.
const dnsDelay = 4 * time.Second

// operatorEnv is the shared plane with the overlay applied, the fake cloud
// in this process (so its SCC API's request log can be read), and the
// cluster's DNS, a real CoreDNS that serves a new entry only dnsDelay after
// it appeared: asked over DNS by the engine's handover wait
// (HANDOVER_DNS_SERVER) and by the operator's HTTPS_PROXY route.
type operatorEnv struct {
	*clusterEnv
	fc    *fakecloud.Cloud
	c     harness.Cloud
	proxy *sccoperator.Proxy
}

func setupOperator(t *testing.T) *operatorEnv {
	e := setupCluster(t)
	fc, err := fakecloud.Start(fakecloud.Options{Dir: t.TempDir(), UpdateServerName: harness.UpdateServer, RegCode: harness.OverlayRegCode})
	require.NoError(t, err)
	t.Cleanup(fc.Stop)
	port, err := strconv.Atoi(fc.Env()["UPDATE_SERVER_HTTPS_PORT"])
	require.NoError(t, err)
	clusterDNS := sccoperator.StartClusterDNS(t, e.Admin, dnsDelay)
	proxy, err := sccoperator.NewProxy(clusterDNS.Route(port))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	own := *e.Cluster // the shared one keeps its own DNS
	own.DNS = clusterDNS
	return &operatorEnv{clusterEnv: &clusterEnv{&own}, fc: fc, c: harness.Cloud{Dir: t.TempDir(), Env: fc.Environ()}, proxy: proxy}
}

// TestOperator is the whole product on a real control plane: the CronJob's
// Job (run by the process kubelet) goes through the six phases, edits
// kube-system/coredns, waits until the name resolves and answers, writes
// scc-registration, and the real rancher/scc-operator (add-rmt-support,
// dad26bb) registers with the fake update server under its real name. The
// process tier has no pod network: the operator reaches the update server
// through an HTTP CONNECT proxy (HTTPS_PROXY) that resolves names with a
// real CoreDNS serving the ConfigMaps the engine edits, the one the
// engine's handover wait asks over DNS; TLS runs end to end.
func TestOperator(t *testing.T) {
	o := setupOperator(t)
	t.Run("no operator installed", o.testAbsent)
	t.Run("the operator registers from the Job's Secret", o.testRegisters)
	t.Run("an unchanged run", o.testUnchanged)
	t.Run("an absolute name in registrationUrl", o.testAbsoluteURL)
	t.Run("a code the update server refuses", o.testRefusedCode)
	t.Run("the main revision refuses the update server's certificate", o.testMainRevision)
}

// testAbsent: without the operator's CRD the run reports operator=absent at
// once and succeeds.
func (o *operatorEnv) testAbsent(t *testing.T) {
	ctx := harness.Context(t)
	o.ResetCoreDNS(ctx, t)
	o.DNS.Forget()
	// A Registration an earlier test's operator left keeps its finalizer,
	// and with no operator running the CRD's deletion would wait for it.
	sccoperator.Forget(t, o.Plane)
	o.Plane.Kubectl(t, "delete", "crd", "registrations.scc.cattle.io", "--ignore-not-found", "--wait=true")
	o.forceDeleteSecret(ctx, t)
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)
	pr, done := o.runJob(ctx, t, runs, "operator-absent")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, job.ExitOK, pr.Res.Code)
	assert.Equal(t, operator.StateAbsent, sum["operator"], pr.Res.Stderr)
	ev := o.jobEvent(ctx, t, "operator-absent")
	assert.Equal(t, kube.ReasonRegistered, ev.Reason)
	assert.Contains(t, ev.Note, "operator=absent")
	t.Logf("proved: with no rancher/scc-operator installed the Job completes (exit %d), its summary says operator=%v and Event %s %q is on the Job",
		pr.Res.Code, sum["operator"], ev.Reason, ev.Note)
}

// testRegisters: the engine's Job waits for the name, writes the Secret,
// and the real operator registers; the engine reports it. The one case of
// the process tier at the handover's production timing (HANDOVER_SETTLE
// left at its default, not harness.ProcessSettle): the Secret is written
// only after the name has resolved and answered for the whole settling.
func (o *operatorEnv) testRegisters(t *testing.T) {
	ctx := harness.Context(t)
	o.Settle = handover.DefaultSettle
	t.Cleanup(func() { o.Settle = harness.ProcessSettle })
	o.ResetCoreDNS(ctx, t)
	o.DNS.Forget()
	// The Secret testAbsent's run wrote goes before the operator starts:
	// an operator that found it would register from it while the reset
	// CoreDNS has no entry, fail, and leave a failed Registration whose
	// later cleanup removes the credentials of the next one with the same
	// content (seen when the machine was busy enough to delay the delete).
	o.forceDeleteSecret(ctx, t)
	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	o.resetUpdateServers()
	rec, err := sccoperator.Record(ctx, o.Plane.Admin)
	require.NoError(t, err)
	t.Cleanup(rec.Stop)
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)

	pr, done := o.runJob(ctx, t, runs, "operator-1")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, job.ExitOK, pr.Res.Code)
	assert.Equal(t, job.OutcomeRegistered, sum["outcome"])
	assert.Equal(t, operator.StateActive, sum["operator"], pr.Res.Stderr)

	// The wait was seen to wait: the first check found no name.
	waiting := logLine(t, pr.Res.Stderr, "waiting until the update server's name resolves in the cluster and answers TLS before writing the Secret")
	require.NotNil(t, waiting, "the handover wait waited:\n%s", pr.Res.Stderr)
	handed := logLine(t, pr.Res.Stderr, handedOverMsg)
	require.NotNil(t, handed, pr.Res.Stderr)
	waited := time.Duration(handed["waitedMs"].(float64)) * time.Millisecond
	assert.GreaterOrEqual(t, waited, dnsDelay-time.Second, "the Secret waited for the name")
	assert.GreaterOrEqual(t, waited, handover.DefaultSettle, "and then for the production settling (%s)", handed["settled"])

	regName, ok := sum["registration"].(string)
	require.True(t, ok && regName != "", pr.Res.Stderr)
	s := o.Secret(ctx, t)
	byLabel, err := sccoperator.NameForSecret(s)
	require.NoError(t, err)
	assert.Equal(t, byLabel, regName, "the engine found the operator's Registration")
	states := rec.States(regName)
	require.NotEmpty(t, states)
	last := states[len(states)-1]
	assert.True(t, last.Done(), "Done and activated: %s", last)
	for _, st := range states {
		assert.False(t, st.Failed(), "never Failure: %s", st)
	}
	var announce *fakecloud.SCCRequest
	for _, r := range o.fc.SCCRequests() {
		if r.Method == "POST" && r.Path == "/connect/subscriptions/systems" {
			announce = &r
		}
	}
	require.NotNil(t, announce, "the operator announced to the fake update server")
	assert.Equal(t, harness.OverlayRegCode, announce.RegCode, "our regCode")
	assert.Equal(t, harness.UpdateServer, announce.ServerName, "dialled by the update server's name (SNI)")

	ev := o.jobEvent(ctx, t, "operator-1")
	assert.Equal(t, kube.ReasonRegistered, ev.Reason)
	assert.Equal(t, "Normal", ev.Type)
	t.Logf("run summary: %s", lastLine(pr.Res.Stderr))
	t.Logf("kubectl get events:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "get", "events", "--field-selector", "involvedObject.name=operator-1"))
	t.Logf("proved: the Job waited %s for %s to resolve through the cluster's DNS and answer with the pinned certificate, wrote the Secret, and rancher/scc-operator %.7s took Registration %s to Done/activated without ever passing Failure (%d states); the fake SCC saw our regCode over SNI %s; the summary says operator=%v and the Job carries Event %s",
		waited.Round(time.Millisecond), harness.UpdateServer, sccoperator.CommitRMT, regName, len(states), announce.ServerName, sum["operator"], ev.Reason)
}

// testUnchanged: a second Job writes nothing and still reports the
// operator's state.
func (o *operatorEnv) testUnchanged(t *testing.T) {
	ctx := harness.Context(t)
	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	before := o.Secret(ctx, t)
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)
	pr, done := o.runJob(ctx, t, runs, "operator-2")
	require.Equal(t, batchv1.JobComplete, controlplane.FinishedCondition(done).Type, pr.Res.String())
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, job.OutcomeUnchanged, sum["outcome"])
	assert.Equal(t, operator.StateActive, sum["operator"], pr.Res.Stderr)
	// Nothing written by the engine: the data and its managedFields entry
	// are as they were. The Secret's resourceVersion may still move: the
	// operator, started for this case, stamps its own labels and
	// annotations when it reconciles.
	after := o.Secret(ctx, t)
	assert.Equal(t, before.Data, after.Data, "nothing written")
	assert.Equal(t, engineWrite(before), engineWrite(after), "the engine's managedFields entry untouched")
	ev := o.jobEvent(ctx, t, "operator-2")
	assert.Equal(t, kube.ReasonUnchanged, ev.Reason)
	t.Logf("proved: a second Job wrote nothing, its summary says outcome=%v operator=%v, and the Job carries Event %s %q",
		sum["outcome"], sum["operator"], ev.Reason, ev.Note)
}

// testAbsoluteURL is the evidence behind registrationUrl's relative name
// (README, "registrationUrl stays https://smt-azure.susecloud.net"): the
// real operator given the absolute name (a trailing dot, which would make
// its lookup skip the search domains) still registers, but it treats the
// changed URL as a new registration, under a new Registration, and the
// dot reaches the update server in the Host header (while SNI drops it),
// where SUSE's virtual-host matching decides. Every existing cluster would
// be registered afresh by an engine that switched.
func (o *operatorEnv) testAbsoluteURL(t *testing.T) {
	ctx := harness.Context(t)
	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	rec, err := sccoperator.Record(ctx, o.Plane.Admin)
	require.NoError(t, err)
	t.Cleanup(rec.Stop)
	before := o.Secret(ctx, t)
	oldName, err := sccoperator.NameForSecret(before)
	require.NoError(t, err, "needs the registered Secret of the previous subtests")
	requestsBefore := len(o.fc.SCCRequests())

	absolute := "https://" + harness.UpdateServer + "."
	_, err = o.Admin.CoreV1().Secrets(operator.Namespace).Patch(ctx, operator.SecretName, types.MergePatchType,
		// As a person would (kubectl patch): a field manager the engine's
		// next run does not take for another tool writing the Secret.
		[]byte(`{"stringData":{"`+operator.KeyRegistrationURL+`":"`+absolute+`"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"})
	require.NoError(t, err)
	var newName string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := o.Admin.CoreV1().Secrets(operator.Namespace).Get(ctx, operator.SecretName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		newName, _ = sccoperator.NameForSecret(s)
		return newName != "" && newName != oldName, nil
	})
	require.NoError(t, err, "the operator did not take the changed registrationUrl as a new registration (still %s)", oldName)
	active, err := rec.Wait(ctx, newName, func(r sccoperator.Registration) bool { return r.Done() || r.Failed() })
	require.NoError(t, err)
	require.True(t, active.Done(), "the absolute name registers: %s", active)

	var announce *fakecloud.SCCRequest
	for _, r := range o.fc.SCCRequests()[requestsBefore:] {
		if r.Method == "POST" && r.Path == "/connect/subscriptions/systems" {
			announce = &r
		}
	}
	require.NotNil(t, announce, "the new Registration announced again")
	assert.Equal(t, harness.UpdateServer+".", announce.Host, "the dot reaches the update server in the Host header")
	assert.Equal(t, harness.UpdateServer, announce.ServerName, "SNI carries the name without the dot")
	dyn, err := dynamic.NewForConfig(o.Plane.Admin)
	require.NoError(t, err)
	_, err = sccoperator.Get(ctx, dyn, oldName)
	oldGone := apierrors.IsNotFound(err)
	t.Logf("proved: rancher/scc-operator %.7s given registrationUrl %s made a new Registration %s (was %s; the old one gone: %t) and registered it (Done, activated=%t): a second announce with Host %q and SNI %q; so a switch to the absolute name would register every existing cluster afresh, and the Host header's dot meets SUSE's virtual hosts: registrationUrl keeps the relative name",
		sccoperator.CommitRMT, absolute, newName, oldName, oldGone, active.Activated, announce.Host, announce.ServerName)
}

// testRefusedCode: a code the update server refuses (401) makes the
// operator fail the Registration; the engine's run fails with exit 2 and
// the Job carries OperatorRegistrationFailed with the remedy.
func (o *operatorEnv) testRefusedCode(t *testing.T) {
	ctx := harness.Context(t)
	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitRMT), ProxyURL: o.proxy.URL})
	const wrong = "E2E-WRONG-CODE"
	o.setCronJobEnv(ctx, t, map[string]string{"REGISTRATION_CODE": wrong})
	t.Cleanup(func() {
		o.setCronJobEnv(context.Background(), t, map[string]string{"REGISTRATION_CODE": harness.OverlayRegCode})
	})
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)
	pr, done := o.runJob(ctx, t, runs, "operator-wrong-code")
	cond := controlplane.FinishedCondition(done)
	assert.Equal(t, batchv1.JobFailed, cond.Type, pr.Res.String())
	assert.Equal(t, batchv1.JobReasonPodFailurePolicy, cond.Reason, "exit 2 fails the Job at once")
	assert.Equal(t, job.ExitPermanent, pr.Res.Code, pr.Res.Stderr)
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, operator.StateFailed, sum["operator"])
	assert.Equal(t, job.PhaseOperator, sum["failedPhase"])
	msg, _ := sum["operatorMessage"].(string)
	assert.NotEmpty(t, msg, "the operator's own words")
	var refused bool
	for _, r := range o.fc.SCCRequests() {
		refused = refused || (r.RegCode == wrong && r.Status == 401)
	}
	assert.True(t, refused, "the fake refused the wrong code with 401")
	ev := o.jobEvent(ctx, t, "operator-wrong-code")
	assert.Equal(t, kube.ReasonOperatorFailed, ev.Reason)
	assert.Equal(t, "Warning", ev.Type)
	assert.Contains(t, ev.Note, "put a valid code in the Secret registration-code", "a refused code needs a new code, not a delete")
	t.Logf("run summary: %s", lastLine(pr.Res.Stderr))
	t.Logf("kubectl describe job:\n%s", o.Plane.Kubectl(t, "-n", operator.Namespace, "describe", "job", "operator-wrong-code"))
	t.Logf("proved: with a code the update server refuses, rancher/scc-operator failed the Registration (%q), the run exited %d with failedPhase=%v, the Job failed through its podFailurePolicy and carries Event %s with the remedy",
		msg, pr.Res.Code, sum["failedPhase"], ev.Reason)
	// Leave no Failed Registration behind: the operator deregisters on delete.
	o.forceDeleteSecret(ctx, t)
}

// testMainRevision: rancher/scc-operator main (cee65c0) ignores
// registrationUrlCert and trusts only the system roots, so with the update
// server's CA only in the Secret it fails TLS for good. This is the version
// requirement the README states: add-rmt-support (dad26bb) or later.
func (o *operatorEnv) testMainRevision(t *testing.T) {
	ctx := harness.Context(t)
	o.forceDeleteSecret(ctx, t)
	o.resetUpdateServers()
	sccoperator.Run(t, o.Plane, sccoperator.Options{Binary: sccoperator.Binary(t, sccoperator.CommitMain), ProxyURL: o.proxy.URL})
	runs := o.StartKubelet(ctx, t, operator.Namespace, o.c)
	pr, done := o.runJob(ctx, t, runs, "operator-main")
	assert.Equal(t, batchv1.JobFailed, controlplane.FinishedCondition(done).Type, pr.Res.String())
	assert.Equal(t, job.ExitPermanent, pr.Res.Code, pr.Res.Stderr)
	sum := summary(t, pr.Res.Stderr)
	assert.Equal(t, operator.StateFailed, sum["operator"], pr.Res.Stderr)
	msg, _ := sum["operatorMessage"].(string)
	assert.Contains(t, msg, "x509: certificate signed by unknown authority", "main trusts only the system roots, not registrationUrlCert")
	assert.Empty(t, o.fc.SCCRequests(), "no request got through the TLS handshake")
	t.Logf("proved: rancher/scc-operator %.7s (main) ignores registrationUrlCert: with the update server's certificate only there, the Registration failed (%q) and the engine's run exited %d with operator=%v; the engine needs add-rmt-support (%.7s) or later",
		sccoperator.CommitMain, msg, pr.Res.Code, sum["operator"], sccoperator.CommitRMT)
	o.forceDeleteSecret(ctx, t)
}

// runJob creates a Job from the CronJob, waits for it and returns its one pod run.
func (o *operatorEnv) runJob(ctx context.Context, t *testing.T, runs *harness.PodRuns, name string) (harness.PodRun, *batchv1.Job) {
	t.Helper()
	o.Plane.Kubectl(t, "-n", operator.Namespace, "create", "job", "--from=cronjob/"+harness.CronJobName, name)
	t.Cleanup(func() { o.DeleteJob(t, operator.Namespace, name) })
	done := controlplane.WaitJobFinished(ctx, t, o.Admin, operator.Namespace, name)
	pr := runs.ForJob(t, name)
	require.Len(t, pr, 1, "one pod")
	return pr[0], done
}

// jobEvent returns the one events.k8s.io Event regarding Job name.
func (o *operatorEnv) jobEvent(ctx context.Context, t *testing.T, name string) eventsv1.Event {
	t.Helper()
	j, err := o.Admin.BatchV1().Jobs(operator.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	ev := controlplane.JobEvent(ctx, t, o.Admin, operator.Namespace, name, kube.ReportingController)
	assert.Equal(t, j.UID, ev.Regarding.UID, "the Event points at the Job itself (JOB_UID from the downward API)")
	return ev
}

// forceDeleteSecret forgets the last run (ForgetLastRun), deletes
// scc-registration and waits until it is gone; with no operator running
// to release it, it drops the operator's finalizer first.
func (o *operatorEnv) forceDeleteSecret(ctx context.Context, t *testing.T) {
	t.Helper()
	o.ForgetLastRun(ctx, t)
	secrets := o.Admin.CoreV1().Secrets(operator.Namespace)
	err := secrets.Delete(ctx, operator.SecretName, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := secrets.Get(ctx, operator.SecretName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err == nil {
		return
	}
	_, err = secrets.Patch(ctx, operator.SecretName, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.True(t, err == nil || apierrors.IsNotFound(err), "drop finalizers: %v", err)
}

// resetUpdateServers forgets every SCC request and announced system of the
// fake update servers, which again accept only the overlay's code.
func (o *operatorEnv) resetUpdateServers() {
	for _, u := range o.fc.Updates {
		u.Reset()
		u.SetRegCode(harness.OverlayRegCode)
	}
}

// lastLine is the run summary, the last line of the log.
func lastLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	return lines[len(lines)-1]
}

// engineWrite is when the engine's field manager last wrote s, as its
// managedFields entry says.
func engineWrite(s *corev1.Secret) string {
	for _, m := range s.ManagedFields {
		if m.Manager == kube.FieldManager && m.Time != nil {
			return m.Time.UTC().Format(time.RFC3339)
		}
	}
	return ""
}
