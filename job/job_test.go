package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/incluster/handover"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/regionconfig"
	"github.com/rancher/registration-engine/job/remedy"
	"github.com/rancher/registration-engine/job/retry"
	"github.com/rancher/registration-engine/job/smt"
	"github.com/rancher/registration-engine/providers"
)

// recorder is every collaborator of a Job at once: it records the order of
// calls and fails the phase named in failAt.
type recorder struct {
	mu       sync.Mutex
	calls    []string
	failAt   string
	failWith error
	block    string // phase that blocks until ctx is done
	written  []operator.Values
	released bool
	// recorded are the run records the release wrote.
	recorded []retry.Record
	leaseErr error
	changed  bool
	// handedOver records what the handover wait was asked to check.
	handedOver []string
	// reached is the address phase 4 reports as the one that answered
	// (unset: the IPv6 address); noReached makes it report none.
	reached   netip.Addr
	noReached bool
	// checkErr is what the Store's Check says before anything is changed.
	checkErr error
	// doc is the attested document phase 2 proves; unset: an empty one.
	// docSecrets are the parts of it the prover reports secret.
	doc        string
	docSecrets []string
	// last is the record the Lease holds when a run takes it (nil: none).
	last *kube.Stored
}

func (r *recorder) step(ctx context.Context, name string) error {
	r.mu.Lock()
	r.calls = append(r.calls, name)
	r.mu.Unlock()
	if r.block == name {
		<-ctx.Done()
		return ctx.Err()
	}
	if r.failAt == name {
		return r.failWith
	}
	return nil
}

func (r *recorder) Detect(ctx context.Context) (providers.Detection, error) {
	return providers.Detection{Cloud: providers.Azure, Source: "imds"}, r.step(ctx, "detect")
}

func (r *recorder) Prove(ctx context.Context) (*providers.Evidence, error) {
	if err := r.step(ctx, "prove"); err != nil {
		return nil, err
	}
	doc := r.doc
	if doc == "" {
		doc = "<document>{}</document>"
	}
	return &providers.Evidence{Cloud: providers.Azure, InstanceData: doc, RegionHint: "westeurope", Secrets: r.docSecrets}, nil
}

func (r *recorder) Find(ctx context.Context, _ regionconfig.Settings, hint string) (smt.UpdateServer, error) {
	if hint != "westeurope" {
		return smt.UpdateServer{}, errors.New("region hint not passed on")
	}
	us := smt.UpdateServer{Name: "smt-azure.example", IPv4: netip.MustParseAddr("192.0.2.10"), IPv6: netip.MustParseAddr("2001:db8::10"), CertPEM: []byte("PEM"), Reached: r.reached}
	if !us.Reached.IsValid() && !r.noReached {
		us.Reached = us.IPv6
	}
	return us, r.step(ctx, "find")
}

func (r *recorder) Ensure(ctx context.Context, fqdn string, ip netip.Addr) (coredns.Edit, error) {
	return coredns.Edit{Object: "kube-system/coredns", Changed: true}, r.step(ctx, "dns")
}

func (r *recorder) Until(ctx context.Context, name string, addr netip.Addr, certPEM []byte, object string) (time.Duration, error) {
	if err := r.step(ctx, "handover"); err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.handedOver = append(r.handedOver, name+" "+addr.String()+" "+string(certPEM)+" "+object)
	r.mu.Unlock()
	return time.Second, nil
}

func (r *recorder) Check(context.Context, operator.Values) error { return r.checkErr }

func (r *recorder) Write(ctx context.Context, reg operator.Values) (bool, error) {
	if err := r.step(ctx, "write"); err != nil {
		return false, err
	}
	r.mu.Lock()
	r.written = append(r.written, reg)
	r.mu.Unlock()
	return r.changed, nil
}

func (r *recorder) Acquire(ctx context.Context) (kube.Release, *kube.Stored, error) {
	if err := r.step(ctx, "lease"); err != nil {
		return nil, nil, err
	}
	if r.leaseErr != nil {
		return nil, nil, r.leaseErr
	}
	return func(ctx context.Context, follow kube.Follow) error {
		if ctx.Err() != nil {
			return ctx.Err() // a release must get a live context of its own
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.released = true
		if follow != nil {
			v, err := follow("")
			if err != nil {
				return err
			}
			rec, _, err := retry.Parse(v)
			if err != nil {
				return err
			}
			r.recorded = append(r.recorded, rec)
		}
		return nil
	}, r.last, nil
}

// SaveRun makes the recorder a RunRecorder: a run records through the
// release, as it holds the Lease, so this is never called.
func (r *recorder) SaveRun(context.Context, kube.Follow) error {
	panic("a run that holds the Lease records with its release")
}

func newJob(r *recorder, logs *bytes.Buffer) *Job {
	log := slog.New(slog.NewJSONHandler(logs, nil))
	return &Job{
		Log:      log,
		Detector: r,
		Provers:  map[providers.Cloud]ProverFactory{providers.Azure: func() (providers.Prover, error) { return r, nil }},
		Finder:   r,
		// The real phase-6 publisher, with the recorder as CoreDNS and
		// the handover wait.
		InCluster: &incluster.Name{Config: incluster.Config{Map: true, Timeout: time.Minute}, CoreDNS: r, Wait: r, Log: log},
		Store:     r,
		Lock:      r,
		RegCode:   "REGCODE-SECRET",
		Deadline:  time.Minute,
	}
}

func logLines(t *testing.T, logs *bytes.Buffer) []map[string]any {
	return testkit.LogLines(t, logs.String())
}

func TestRunExecutesEveryPhaseOnceInOrder(t *testing.T) {
	r := &recorder{changed: true}
	var logs bytes.Buffer
	res, err := newJob(r, &logs).Run(context.Background())
	require.NoError(t, err)

	assert.Equal(t, []string{"lease", "detect", "prove", "find", "dns", "handover", "write"}, r.calls)
	assert.Equal(t, []string{"smt-azure.example 2001:db8::10 PEM kube-system/coredns"}, r.handedOver,
		"the wait checks the name, the raced address and the certificate the Secret pins, in the CoreDNS object just edited")
	assert.True(t, r.released)
	assert.Equal(t, OutcomeRegistered, res.Outcome)
	require.Len(t, r.written, 1)
	assert.Equal(t, operator.Values{URL: "https://smt-azure.example", RegCode: "REGCODE-SECRET", InstanceData: "<document>{}</document>", CertPEM: []byte("PEM")}, r.written[0])

	var phases []string
	lines := logLines(t, &logs)
	for _, l := range lines {
		if l["msg"] == "phase done" {
			phases = append(phases, l["phase"].(string))
			assert.Contains(t, l, "durationMs")
			assert.Equal(t, "ok", l["outcome"])
		}
	}
	assert.Equal(t, []string{"detect", "prove", "load-config", "find-update-server", "race-addresses", "write-secret"}, phases)
	last := lines[len(lines)-1]
	assert.Equal(t, "run finished", last["msg"])
	assert.Equal(t, "registered", last["outcome"])
	assert.Equal(t, "2001:db8::10", last["address"])
	assert.NotContains(t, logs.String(), "REGCODE-SECRET")
}

// TestRunTakesTheAddressPhase4Reached: phase 4's health check raced the
// update server's two addresses; phase 5 takes the one that answered
// instead of racing again, and the CoreDNS entry, the wait and the summary
// all use it.
func TestRunTakesTheAddressPhase4Reached(t *testing.T) {
	ipv4 := netip.MustParseAddr("192.0.2.10")
	r := &recorder{changed: true, reached: ipv4}
	var logs bytes.Buffer
	res, err := newJob(r, &logs).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"lease", "detect", "prove", "find", "dns", "handover", "write"}, r.calls)
	assert.Equal(t, ipv4, res.Address)
	assert.Equal(t, []string{"smt-azure.example 192.0.2.10 PEM kube-system/coredns"}, r.handedOver)
	var raced map[string]any
	for _, l := range logLines(t, &logs) {
		if l["msg"] == "phase done" && l["phase"] == "race-addresses" {
			raced = l
		}
	}
	require.NotNil(t, raced, "phase 5 still reports its result")
	assert.Equal(t, "192.0.2.10", raced["address"])
	assert.Equal(t, "find-update-server", raced["racedIn"])
	assert.Equal(t, "192.0.2.10", logLines(t, &logs)[len(logLines(t, &logs))-1]["address"], "the summary names it")
}

// TestRunWithoutAReachedAddressWritesNothing: a Finder that reports no
// address that answered stops the run at phase 4, whose health check is
// the race, before CoreDNS or the
// Secret is touched.
func TestRunWithoutAReachedAddressWritesNothing(t *testing.T) {
	r := &recorder{changed: true, noReached: true}
	res, err := newJob(r, &bytes.Buffer{}).Run(context.Background())
	require.Error(t, err)
	assert.Equal(t, "find-update-server", res.Failed, "phase 4's health check is the race: no address answered it")
	assert.Equal(t, []string{"lease", "detect", "prove", "find"}, r.calls, "no CoreDNS edit, no wait, no write")
	assert.Empty(t, r.written)
}

// TestRunWithoutACodeWaits: when the Store's Check says no code is
// configured and the Secret holds none, phase 6 stops before CoreDNS is
// edited or the handover waited for, and the run ends waiting for a code:
// exit 0 (not a failed Job every run), outcome waiting-for-code in the
// summary and the run record, and a Warning Event RegistrationCodeMissing
// whose note says how to set the code (golden).
func TestRunWithoutACodeWaits(t *testing.T) {
	const extID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/aks-1/providers/Microsoft.KubernetesConfiguration/extensions/suse-registration"
	tests := map[string]string{
		"on the Marketplace, the extension named": regCodeRemedy(remedy.Remedies{Manager: remedy.AzureExtension, Release: "suse-registration", Namespace: "cattle-scc-system", ExtensionID: extID}),
		"on the Marketplace, no extension ID":     regCodeRemedy(remedy.Remedies{Manager: remedy.AzureExtension, Release: "suse-registration", Namespace: "cattle-scc-system"}),
		"a Helm release":                          regCodeRemedy(remedy.Remedies{Manager: remedy.Helm, Release: "registration-engine", Namespace: "cattle-scc-system", ExtensionID: extID}),
		"no release known (kustomize)":            regCodeRemedy(remedy.Remedies{Namespace: "cattle-scc-system"}),
		"an extension ID a shell would read":      regCodeRemedy(remedy.Remedies{Manager: remedy.AzureExtension, Namespace: "cattle-scc-system", ExtensionID: "/subscriptions/0/resourceGroups/rg;id/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/e"}),
	}
	msgs := testkit.NewMessages(t)
	for name, remedy := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{changed: true, checkErr: failure.Permanent(fmt.Errorf("%w: none is configured and the Secret holds none", operator.ErrNoRegCode))}
			op := &operatorFake{}
			var logs bytes.Buffer
			j := newJob(r, &logs)
			j.RegCode, j.CodeRemedy = "", remedy
			j.Operator, j.Events, j.Runs = op.step(), op, r
			res, err := j.Run(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 0, ExitCode(err))
			assert.Equal(t, OutcomeWaitingForCode, res.Outcome)
			assert.Equal(t, []string{"lease", "detect", "prove", "find"}, r.calls, "no CoreDNS edit, no handover wait, no write")
			assert.Empty(t, r.written)
			require.Len(t, r.recorded, 1)
			assert.Equal(t, OutcomeWaitingForCode, r.recorded[0].Outcome)
			assert.Equal(t, 0, r.recorded[0].ExitCode)
			assert.Empty(t, op.waits, "no operator to wait for: nothing was written")
			require.Len(t, op.events, 1)
			ev := op.events[0]
			assert.Equal(t, kube.ReasonCodeMissing, ev.Reason)
			assert.True(t, ev.Warning)
			assert.NotContains(t, ev.Note, ";id", "a name a shell would read is not pasted")
			msgs.Add(name, errors.New(ev.Note))
			assert.Contains(t, logs.String(), `"outcome":"waiting-for-code"`)
		})
	}
}

func TestRunUnchangedSecretIsSuccess(t *testing.T) {
	r := &recorder{changed: false}
	res, err := newJob(r, &bytes.Buffer{}).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeUnchanged, res.Outcome)
}

func TestRunStopsAtTheFailingPhase(t *testing.T) {
	tests := map[string]struct {
		failAt    string
		err       error
		wantCalls []string
		wantPhase string
		wantExit  int
	}{
		"no cloud is permanent": {
			failAt: "detect", err: failure.Permanent(errors.New("no supported cloud")),
			wantCalls: []string{"lease", "detect"}, wantPhase: "detect", wantExit: ExitPermanent,
		},
		"plan mismatch is permanent": {
			failAt: "prove", err: failure.Permanent(errors.New("plan mismatch")),
			wantCalls: []string{"lease", "detect", "prove"}, wantPhase: "prove", wantExit: ExitPermanent,
		},
		"region servers down is transient": {
			failAt: "find", err: errors.New("no region server answered"),
			wantCalls: []string{"lease", "detect", "prove", "find"}, wantPhase: "find-update-server", wantExit: ExitTransient,
		},
		"CoreDNS failure means no Secret": {
			failAt: "dns", err: errors.New("coredns: conflict"),
			wantCalls: []string{"lease", "detect", "prove", "find", "dns"}, wantPhase: "write-secret", wantExit: ExitTransient,
		},
		"name not served by CoreDNS yet means no Secret": {
			failAt: "handover", err: &handover.NotReadyError{Name: "smt-azure.example", Step: handover.StepResolve},
			wantCalls: []string{"lease", "detect", "prove", "find", "dns", "handover"}, wantPhase: "write-secret", wantExit: ExitTransient,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{failAt: tc.failAt, failWith: tc.err}
			var logs bytes.Buffer
			res, err := newJob(r, &logs).Run(context.Background())
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.wantCalls, r.calls)
			assert.Empty(t, r.written, "nothing may be written after a failed phase")
			assert.True(t, r.released, "the Lease is released after a failure")
			assert.Equal(t, tc.wantPhase, res.Failed)
			assert.Equal(t, tc.wantExit, ExitCode(err))
			lines := logLines(t, &logs)
			assert.Equal(t, "failed", lines[len(lines)-1]["outcome"])
		})
	}
}

func TestRunSkipsWhenTheLeaseIsHeld(t *testing.T) {
	r := &recorder{leaseErr: errors.Join(kube.ErrLeaseHeld, errors.New(`held by "registration-engine-29000000-abcde"`))}
	var logs bytes.Buffer
	res, err := newJob(r, &logs).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeSkipped, res.Outcome)
	assert.Equal(t, []string{"lease"}, r.calls)
	assert.Contains(t, logs.String(), "registration-engine-29000000-abcde")
	assert.Equal(t, ExitOK, ExitCode(err))
}

// TestRunRecordsASkip: a skipped run exits 0 and its Job is Complete; the
// Job's Event must say that nothing was done, and why.
func TestRunRecordsASkip(t *testing.T) {
	r := &recorder{leaseErr: &kube.LeaseHeldError{Namespace: "cattle-scc-system", Name: "registration-engine", Holder: "registration-engine-manual-abcde", Until: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}}
	op := &operatorFake{}
	var logs bytes.Buffer
	j := newJob(r, &logs)
	j.Operator, j.Events = op.step(), op
	res, err := j.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeSkipped, res.Outcome)
	require.Len(t, op.events, 1, "a skip records an Event")
	ev := op.events[0]
	assert.Equal(t, kube.ReasonSkipped, ev.Reason)
	assert.False(t, ev.Warning)
	assert.Contains(t, ev.Note, "skipped, nothing done")
	assert.Contains(t, ev.Note, "registration-engine-manual-abcde")
	assert.Empty(t, op.waits, "a skipped run does not ask the operator")
}

// TestSIGTERMInEveryPhase cancels the run the way main does on SIGTERM
// while each phase is in flight: exit 143, the Lease released, nothing
// written.
func TestSIGTERMInEveryPhase(t *testing.T) {
	for _, phase := range []string{"lease", "detect", "prove", "find", "dns", "handover", "write"} {
		t.Run(phase, func(t *testing.T) {
			r := &recorder{block: phase}
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() {
				for {
					r.mu.Lock()
					inPhase := len(r.calls) > 0 && r.calls[len(r.calls)-1] == phase
					r.mu.Unlock()
					if inPhase {
						cancel(ErrTerminated)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			_, err := newJob(r, &bytes.Buffer{}).Run(ctx)
			require.Error(t, err)
			assert.Equal(t, ExitTerminated, ExitCode(err), "%v", err)
			assert.Empty(t, r.written, "nothing half-written")
			if phase != "lease" {
				assert.True(t, r.released, "the Lease is released")
			}
		})
	}
}

func TestRunDeadline(t *testing.T) {
	r := &recorder{block: "handover"}
	j := newJob(r, &bytes.Buffer{})
	j.Deadline = 20 * time.Millisecond
	_, err := j.Run(context.Background())
	require.Error(t, err)
	assert.Equal(t, ExitDeadline, ExitCode(err))
	assert.True(t, r.released)
}

func TestStartupSleepOnlyForScheduledRuns(t *testing.T) {
	for _, scheduled := range []bool{true, false} {
		r := &recorder{}
		j := newJob(r, &bytes.Buffer{})
		j.Scheduled = scheduled
		j.SleepMax = time.Hour
		j.RandDuration = func(n time.Duration) time.Duration { return n / 4 }
		var slept []time.Duration
		j.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
		_, err := j.Run(context.Background())
		require.NoError(t, err)
		if scheduled {
			assert.Equal(t, []time.Duration{15 * time.Minute}, slept)
		} else {
			assert.Empty(t, slept)
		}
	}
}

func TestStartupSleepInterruptedBySIGTERM(t *testing.T) {
	r := &recorder{}
	j := newJob(r, &bytes.Buffer{})
	j.Scheduled, j.SleepMax = true, time.Hour
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrTerminated)
	_, err := j.Run(ctx) // the real, ctx-aware sleep
	require.Error(t, err)
	assert.Equal(t, ExitTerminated, ExitCode(err))
	assert.Empty(t, r.calls, "no Lease taken, no phase run")
}

// TestRunSaysWhyThereIsNoHandoverWait: a run without the wait says why in
// its log, as a warning when the wait was turned off rather than
// inapplicable, and still writes the Secret.
func TestRunSaysWhyThereIsNoHandoverWait(t *testing.T) {
	tests := map[string]struct {
		cfg       incluster.Config
		msg       string
		level     string
		wantCalls []string
	}{
		"no in-cluster DNS mapping": {cfg: incluster.Config{Map: false, Timeout: time.Minute}, msg: "in-cluster DNS left alone", level: "INFO", wantCalls: []string{"lease", "detect", "prove", "find", "write"}},
		"not in a pod":              {cfg: incluster.Config{Map: true, OutsidePod: true, Timeout: time.Minute}, msg: "handover wait skipped", level: "INFO", wantCalls: []string{"lease", "detect", "prove", "find", "dns", "write"}},
		"turned off for a test":     {cfg: incluster.Config{Map: true}, msg: "handover wait disabled", level: "WARN", wantCalls: []string{"lease", "detect", "prove", "find", "dns", "write"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{changed: true}
			var logs bytes.Buffer
			j := newJob(r, &logs)
			j.InCluster.(*incluster.Name).Config = tc.cfg
			_, err := j.Run(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.wantCalls, r.calls)
			var found bool
			for _, l := range logLines(t, &logs) {
				if l["msg"] == tc.msg {
					found = true
					assert.Equal(t, tc.level, l["level"])
					assert.NotEmpty(t, l["reason"], "the line says why")
				}
			}
			assert.True(t, found, "the log says the wait did not happen:\n%s", logs.String())
		})
	}
}

// operatorFake answers the operator report and records the Events.
type operatorFake struct {
	report   operator.Report
	waits    []time.Duration
	events   []kube.JobEvent
	eventErr error
}

// Report answers as operator.Watch does: a Failed Registration comes
// classified.
func (o *operatorFake) Report(_ context.Context, wait time.Duration) operator.Report {
	o.waits = append(o.waits, wait)
	r := o.report
	if r.State == operator.StateFailed {
		r.Verdict = operator.Classify(r.Message)
	}
	return r
}

// step is the operator step reading op, with recovery off.
func (o *operatorFake) step() *operator.Step {
	return &operator.Step{Watch: o, Wait: 2 * time.Minute, SecretRef: "cattle-scc-system/scc-registration"}
}

func (o *operatorFake) Record(_ context.Context, e kube.JobEvent) error {
	o.events = append(o.events, e)
	return o.eventErr
}

// TestRunReportsTheOperator: what rancher/scc-operator made of the Secret
// reaches the run summary, the Job's Event and the exit code; a Failed
// Registration is never a successful run.
func TestRunReportsTheOperator(t *testing.T) {
	tests := map[string]struct {
		changed  bool
		report   operator.Report
		failAt   string
		wantWait time.Duration
		reason   string
		warning  bool
		exit     int
		phase    string
		note     string
	}{
		"written, operator active": {
			changed: true, report: operator.Report{State: operator.StateActive, Registration: "scc-registration-abc"},
			wantWait: 2 * time.Minute, reason: kube.ReasonRegistered, exit: ExitOK,
			note: "wrote cattle-scc-system/scc-registration for https://smt-azure.example (address 2001:db8::10); operator=active registration scc-registration-abc",
		},
		"written, operator failed: exit 2, failedPhase operator, the remedy": {
			changed: true, report: operator.Report{State: operator.StateFailed, Registration: "scc-registration-abc", Message: "401 Unknown Registration Code."},
			wantWait: 2 * time.Minute, reason: kube.ReasonOperatorFailed, warning: true, exit: ExitPermanent, phase: PhaseOperator,
			note: "kubectl -n cattle-scc-system delete secret scc-registration",
		},
		"written, operator pending: exit 0 with a warning": {
			changed: true, report: operator.Report{State: operator.StatePending, Message: "registration scc-registration-abc not created yet"},
			wantWait: 2 * time.Minute, reason: kube.ReasonRegistered, warning: true, exit: ExitOK, note: "operator=pending",
		},
		"written, no operator": {
			changed: true, report: operator.Report{State: operator.StateAbsent, Message: "not installed"},
			wantWait: 2 * time.Minute, reason: kube.ReasonRegistered, exit: ExitOK, note: "operator=absent",
		},
		"unchanged looks once": {
			report:   operator.Report{State: operator.StateActive, Registration: "scc-registration-abc"},
			wantWait: 0, reason: kube.ReasonUnchanged, exit: ExitOK,
			note: "cattle-scc-system/scc-registration already current for https://smt-azure.example (address 2001:db8::10); operator=active registration scc-registration-abc",
		},
		"unchanged but Failed is still reported and fails": {
			report:   operator.Report{State: operator.StateFailed, Registration: "scc-registration-abc", Message: "no such host"},
			wantWait: 0, reason: kube.ReasonOperatorFailed, warning: true, exit: ExitPermanent, phase: PhaseOperator,
		},
		"the engine's own failure names its phase": {
			failAt: "find", reason: kube.ReasonFailed, warning: true, exit: ExitTransient, phase: "find-update-server",
			note: "phase find-update-server failed (exit code 1)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{changed: tc.changed, failAt: tc.failAt, failWith: errors.New("no region server answered")}
			op := &operatorFake{report: tc.report}
			var logs bytes.Buffer
			j := newJob(r, &logs)
			j.Operator, j.Events, j.SecretRef = op.step(), op, "cattle-scc-system/scc-registration"
			res, err := j.Run(context.Background())
			assert.Equal(t, tc.exit, ExitCode(err), "%v", err)
			assert.Equal(t, tc.phase, res.Failed)
			if tc.failAt == "" {
				assert.Equal(t, []time.Duration{tc.wantWait}, op.waits, "wait after a write, one look otherwise")
			} else {
				assert.Empty(t, op.waits, "no Secret, no operator to ask")
			}
			require.Len(t, op.events, 1, "one Event per run")
			ev := op.events[0]
			assert.Equal(t, tc.reason, ev.Reason)
			assert.Equal(t, tc.warning, ev.Warning)
			assert.Contains(t, ev.Note, tc.note)
			assert.NotContains(t, ev.Note, "REGCODE-SECRET")

			lines := logLines(t, &logs)
			last := lines[len(lines)-1]
			assert.Equal(t, "run finished", last["msg"])
			if tc.report.State != "" {
				assert.Equal(t, tc.report.State, last["operator"])
			}
			if tc.report.State == operator.StateFailed {
				assert.Equal(t, tc.report.Message, last["operatorMessage"], "the operator's own words in the summary")
				assert.ErrorIs(t, err, operator.ErrOperatorFailed)
				assert.Equal(t, "ERROR", last["level"])
			}
		})
	}
}

// TestRunSurvivesAFailedEvent: an Event the API refuses is a warning; the
// run's result stands.
func TestRunSurvivesAFailedEvent(t *testing.T) {
	r := &recorder{changed: true}
	op := &operatorFake{report: operator.Report{State: operator.StateActive}, eventErr: errors.New("forbidden")}
	var logs bytes.Buffer
	j := newJob(r, &logs)
	j.Operator, j.Events = op.step(), op
	res, err := j.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeRegistered, res.Outcome)
	assert.Contains(t, logs.String(), "could not record the run's Event on its Job")
}

// TestRunRedactsTheOperatorsMessage: the operator's failure message (its
// and SCC's words) may quote what it was given; the summary, every log
// line, the Event and the returned error carry no secret of the run in
// any form: the code, the attested document quoted as a JSON string, its
// signature alone.
func TestRunRedactsTheOperatorsMessage(t *testing.T) {
	const sig = "MIIKZwYJKoZIhvcNAQcCoIIKWDCCClQ+/SIGNATURE-BYTES=="
	doc := `<document>{"subscriptionId": "sub", "attestedData": {"signature": "` + sig + `"}, "offer": "urn"}</document>`
	quotedDoc, _ := json.Marshal(doc)
	msg := "SCC answered 422 for " + string(quotedDoc) + " with regCode REGCODE-SECRET; signature " + sig
	r := &recorder{changed: true, doc: doc, docSecrets: []string{doc, sig}}
	op := &operatorFake{report: operator.Report{State: operator.StateFailed, Registration: "scc-registration-abc", Message: msg}}
	var logs bytes.Buffer
	j := newJob(r, &logs)
	j.Operator, j.Events = op.step(), op
	_, err := j.Run(context.Background())
	require.ErrorIs(t, err, operator.ErrOperatorFailed)
	require.Len(t, op.events, 1)
	emitted := map[string]string{"logs": logs.String(), "Event note": op.events[0].Note, "error": err.Error()}
	for where, text := range emitted {
		assert.Contains(t, text, "SCC answered 422", "%s: the operator's words are kept", where)
		for what, secret := range map[string]string{"code": "REGCODE-SECRET", "signature": sig, "document as a JSON string": string(quotedDoc[1 : len(quotedDoc)-1])} {
			assert.NotContains(t, text, secret, "%s: %s leaked", where, what)
		}
	}
	assert.Contains(t, logs.String(), `"operatorMessage":"SCC answered 422 for \"REDACTED\" with regCode REDACTED; signature REDACTED"`)
}

// TestRunRecordsItsVerdictOnTheLease: each run that did something leaves
// its verdict on the engine's Lease, where it outlives the Job's Event (the
// API server drops Events after an hour): failures are counted from the
// first, a success resets the count, and the error keeps no secret.
func TestRunRecordsItsVerdictOnTheLease(t *testing.T) {
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kube.LeaseName, Namespace: operator.Namespace}})
	lease := &kube.Lease{Leases: kubetest.Typed(c), Namespace: operator.Namespace, Name: kube.LeaseName, Holder: "pod-1", Duration: time.Minute}
	read := func() retry.Record {
		le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), kube.LeaseName, metav1.GetOptions{})
		require.NoError(t, err)
		rec, ok, err := retry.Parse(le.Annotations[kube.AnnotationLastRun])
		require.NoError(t, err)
		require.True(t, ok, "a record on the Lease")
		return rec
	}
	// As New assembles it: the Lease keeps runs apart and records them.
	run := func(r *recorder) {
		j := newJob(r, &bytes.Buffer{})
		j.Lock, j.Runs, j.JobName = lease, lease, "registration-engine-29000000"
		if r.leaseErr != nil {
			j.Lock = r
		}
		c.ClearActions()
		_, _ = j.Run(context.Background())
	}
	for range 2 {
		run(&recorder{failAt: "find", failWith: errors.New("no region server answered for REGCODE-SECRET")})
	}
	rec := read()
	assert.Equal(t, OutcomeFailed, rec.Outcome)
	assert.Equal(t, "find-update-server", rec.Phase)
	assert.Equal(t, ExitTransient, rec.ExitCode)
	assert.Equal(t, 2, rec.ConsecutiveFailures)
	assert.NotNil(t, rec.FailingSince)
	assert.Nil(t, rec.LastSuccess)
	assert.Contains(t, rec.Error, "no region server answered")
	assert.NotContains(t, rec.Error, "REGCODE-SECRET")
	assert.Equal(t, "registration-engine-29000000", rec.Job)

	run(&recorder{changed: true})
	assert.Equal(t, []string{"get", "update", "get", "update"}, kubetest.Verbs(c, "leases"), "the Lease taken, then released with the record in one write")
	rec = read()
	assert.Equal(t, OutcomeRegistered, rec.Outcome)
	assert.Zero(t, rec.ConsecutiveFailures)
	assert.Nil(t, rec.FailingSince)
	require.NotNil(t, rec.LastSuccess)
	assert.Empty(t, rec.Error)

	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, le.Spec.HolderIdentity, "released")

	run(&recorder{leaseErr: &kube.LeaseHeldError{Holder: "another"}})
	assert.Equal(t, OutcomeRegistered, read().Outcome, "a skipped run records nothing")
}
