package status

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/providers"
)

// source serves Gather from memory: an object that is not there is the API
// server's NotFound, one listed in forbidden its Forbidden.
type source struct {
	secret       *corev1.Secret
	leader       *coordinationv1.Lease
	registration *kube.SCCRegistration
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service             // by namespace/name
	endpoints    map[string][]discoveryv1.EndpointSlice // by the Service's namespace/name
	served       bool
	forbidden    map[string]bool       // "registration", "leader", "pods", or a ConfigMap's name
	lease        *coordinationv1.Lease // the engine's
	jobs         []batchv1.Job
	pods         []corev1.Pod
	events       []eventsv1.Event
}

func notFound(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
}

func forbidden(resource, name string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, nil)
}

func (s *source) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if s.secret == nil {
		return nil, notFound("secrets", name)
	}
	return s.secret, nil
}

func (s *source) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if s.forbidden[name] {
		return nil, forbidden("configmaps", name)
	}
	if cm, ok := s.configMaps[name]; ok {
		return cm, nil
	}
	return nil, notFound("configmaps", name)
}

func (s *source) Service(_ context.Context, ns, name string) (*corev1.Service, error) {
	if s.forbidden["service"] {
		return nil, forbidden("services", name)
	}
	if svc, ok := s.services[ns+"/"+name]; ok {
		return svc, nil
	}
	return nil, notFound("services", name)
}

func (s *source) ServiceEndpoints(_ context.Context, ns, service string) (*discoveryv1.EndpointSliceList, error) {
	if s.forbidden["endpoints"] {
		return nil, forbidden("endpointslices", "")
	}
	return &discoveryv1.EndpointSliceList{Items: s.endpoints[ns+"/"+service]}, nil
}

func (s *source) Lease(_ context.Context, ns, name string) (*coordinationv1.Lease, error) {
	if ns == LeaderNamespace && name == LeaderLeaseName {
		if s.forbidden["leader"] {
			return nil, forbidden("leases", name)
		}
		if s.leader != nil {
			return s.leader, nil
		}
	}
	if name == kube.LeaseName && s.lease != nil {
		return s.lease, nil
	}
	return nil, notFound("leases", name)
}

func (s *source) CronJob(_ context.Context, _, name string) (*batchv1.CronJob, error) {
	return nil, notFound("cronjobs", name)
}

func (s *source) Jobs(context.Context, string, string) (*batchv1.JobList, error) {
	return &batchv1.JobList{Items: s.jobs}, nil
}

func (s *source) Pods(context.Context, string, string) (*corev1.PodList, error) {
	if s.forbidden["pods"] {
		return nil, forbidden("pods", "")
	}
	return &corev1.PodList{Items: s.pods}, nil
}

func (s *source) Events(context.Context, string) (*eventsv1.EventList, error) {
	return &eventsv1.EventList{Items: s.events}, nil
}

func (s *source) Registration(_ context.Context, name string) (*kube.SCCRegistration, error) {
	switch {
	case s.forbidden["registration"]:
		return nil, forbidden("registrations", name)
	case s.registration == nil:
		return nil, notFound("registrations", name)
	}
	return s.registration, nil
}

func (s *source) RegistrationsServed(context.Context) (bool, error) { return s.served, nil }

// TestGatherOperatorState: what status calls the operator's answer, from
// the Secret's labels, the Registration and the leader Lease. A refused read
// leaves the state open rather than calling the operator absent or pending.
func TestGatherOperatorState(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	secret := func(adopted bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
			Data: map[string][]byte{operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte("CODE"), operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net")}}
		if adopted {
			s.Labels = map[string]string{operator.LabelSalt: "salt"}
			name, _ := operator.RegistrationName(s)
			s.Labels[operator.LabelNameSuffix] = name[len(operator.RegistrationPrefix):]
		}
		return s
	}
	renewed := metav1.NewMicroTime(now.Add(-time.Minute))
	alive := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("scc-operator-0"), LeaseDurationSeconds: ptr.To(int32(600)), RenewTime: &renewed}}
	cond := func(typ, status string) kube.RegistrationCondition {
		return kube.RegistrationCondition{Type: typ, Status: status}
	}

	tests := map[string]struct {
		src       source
		state     string
		condition []string // the conditions shown, as Type=Status
	}{
		"Done and activated: active": {
			src:   source{secret: secret(true), leader: alive, served: true, registration: &kube.SCCRegistration{Current: "Done", Activated: true, Conditions: []kube.RegistrationCondition{cond("Done", "True"), cond("Failure", "False")}}},
			state: operator.StateActive, condition: []string{"Done=True", "Failure=False"},
		},
		"Done without the activation: pending": {
			src:   source{secret: secret(true), leader: alive, served: true, registration: &kube.SCCRegistration{Current: "Done", Conditions: []kube.RegistrationCondition{cond("Done", "True")}}},
			state: operator.StatePending, condition: []string{"Done=True"},
		},
		"Failure=True: failed, even if activated once": {
			src:   source{secret: secret(true), leader: alive, served: true, registration: &kube.SCCRegistration{Current: "Failure", Activated: true, Conditions: []kube.RegistrationCondition{cond("Done", "True"), cond("Failure", "True")}}},
			state: operator.StateFailed, condition: []string{"Done=True", "Failure=True"},
		},
		"Registration not made yet: pending": {
			src:   source{secret: secret(true), leader: alive, served: true},
			state: operator.StatePending,
		},
		"Registration read refused: unknown, not pending": {
			src:   source{secret: secret(true), leader: alive, served: true, forbidden: map[string]bool{"registration": true}},
			state: "",
		},
		"API not served: absent": {
			src:   source{secret: secret(false), served: false},
			state: operator.StateAbsent,
		},
		"not adopted, no leader Lease at all: absent": {
			src:   source{secret: secret(false), served: true},
			state: operator.StateAbsent,
		},
		"not adopted, leader Lease expired: absent": {
			src: source{secret: secret(false), served: true, leader: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("scc-operator-0"), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &renewed}}},
			state: operator.StateAbsent,
		},
		"not adopted, leader Lease refused: unknown": {
			src:   source{secret: secret(false), served: true, forbidden: map[string]bool{"leader": true}},
			state: "",
		},
		"not adopted, a live leader: pending": {
			src:   source{secret: secret(false), leader: alive, served: true},
			state: operator.StatePending,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Gather(context.Background(), &tc.src, Options{Exits: testExits, Now: now})
			assert.Equal(t, tc.state, r.Operator.State)
			var shown []string
			for _, c := range r.Operator.Conditions {
				shown = append(shown, c.Type+"="+c.Status)
			}
			assert.Equal(t, tc.condition, shown)
		})
	}
}

// An operator whose leader Lease does not exist has never run: status says
// to install or start it, not to look again with more access.
func TestDecideOperatorWithoutLeaderLease(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	corefile := ".:53 {\n    hosts {\n        20.38.0.87 smt-azure.susecloud.net\n        fallthrough\n    }\n    reload\n}\n"
	src := &source{served: true, configMaps: map[string]*corev1.ConfigMap{"coredns": {Data: map[string]string{"Corefile": corefile}}}, secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
		Data: map[string][]byte{operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte("CODE"), operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net")}}}

	r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})

	assert.Equal(t, StateActionNeeded, r.Verdict.State, r.Verdict.Line)
	assert.Equal(t, "Not registered: rancher/scc-operator has not adopted scc-registration: its leader Lease kube-system/scc-controllers does not exist"+
		" — install or start rancher/scc-operator (Rancher Prime 2.12 or later installs it in cattle-scc-system)", r.Verdict.Line)
}

// Every key the engine writes is reported, by size only (never the code or
// the document), and one the Secret lacks is reported as 0, which the text
// output shows as MISSING.
func TestGatherSecretKeys(t *testing.T) {
	src := &source{secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
		Data: map[string][]byte{operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte("CODE-1234"), operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net")}}}

	r := Gather(context.Background(), src, Options{Exits: testExits, Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})

	assert.Equal(t, map[string]int{operator.KeyRegistrationType: 6, operator.KeyRegCode: 9, operator.KeyRegistrationURL: 31, operator.KeyInstanceData: 0, operator.KeyRegistrationURLCert: 0}, r.Secret.Keys)
	var text strings.Builder
	require.NoError(t, r.WriteText(&text))
	assert.Contains(t, text.String(), "keys: registrationType=online, registrationUrl=https://smt-azure.susecloud.net, regCode set (9 bytes), instanceData MISSING, registrationUrlCert MISSING")
	assert.NotContains(t, text.String(), "CODE-1234")
}

// TestGatherInstanceData: the instanceData line shows each check of the
// cloud's offline verification, claims included, and a document whose
// claims fail is not shown as verified: its state is FAILED and the cause
// is printed. (providers/azure's TestInspectReportCheck makes the checks
// from Azure's verdicts.)
func TestGatherInstanceData(t *testing.T) {
	const created = "11/30/26 11:59:00 -0000"
	tests := map[string]struct {
		check    providers.DocumentCheck
		wantLine string
	}{
		"all checks hold": {
			check:    providers.DocumentCheck{Signature: "OK", Signer: "OK", Chain: "OK", Claims: "OK", Detail: "metadata.azure.com", CreatedOn: created},
			wantLine: "instanceData: verified offline: signature OK, signer OK (metadata.azure.com), chain OK, claims OK, created " + created + "\n",
		},
		"claims fail": {
			check: providers.DocumentCheck{Signature: "OK", Signer: "OK", Chain: "OK", Claims: "FAILED",
				Detail: "signed content has no subscriptionId (api-version 2021-02-01 always signs it)", CreatedOn: created},
			wantLine: "instanceData: verified offline: signature OK, signer OK, chain OK, claims FAILED, created " + created + "\n" +
				"             signed content has no subscriptionId (api-version 2021-02-01 always signs it)\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &source{secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
				Data: map[string][]byte{operator.KeyInstanceData: []byte("<document>…</document>")}}}
			inspect := func(_ context.Context, doc []byte) (providers.DocumentCheck, error) {
				assert.Equal(t, "<document>…</document>", string(doc))
				return tc.check, nil
			}

			r := Gather(context.Background(), src, Options{Exits: testExits, Inspect: inspect, Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})

			require.NotNil(t, r.Secret.InstanceData)
			assert.Equal(t, Document{DocumentCheck: tc.check}, *r.Secret.InstanceData)
			var text, js strings.Builder
			require.NoError(t, r.WriteText(&text))
			assert.Contains(t, text.String(), tc.wantLine)
			require.NoError(t, r.WriteJSON(&js))
			assert.Contains(t, js.String(), `"claims": "`+tc.check.Claims+`"`)
		})
	}
}

// TestGatherDNS: where status finds the update server's hosts entry, as
// CoreDNS would serve it: coredns-custom first (the engine's key before any
// other), then the Corefile. A ConfigMap it may not read leaves the entry
// unknown, never reported missing.
func TestGatherDNS(t *testing.T) {
	const host = "smt-azure.susecloud.net"
	hosts := func(addr string) string { return "hosts {\n    " + addr + " " + host + "\n    fallthrough\n}\n" }
	corefile := func(addr string) string {
		entry := ""
		if addr != "" {
			entry = "    hosts {\n        " + addr + " " + host + "\n        fallthrough\n    }\n"
		}
		return ".:53 {\n    errors\n" + entry + "    reload\n}\n"
	}
	custom := func(data map[string]string) *corev1.ConfigMap { return &corev1.ConfigMap{Data: data} }
	core := func(addr string) *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: map[string]string{coredns.CorefileKey: corefile(addr)}}
	}

	tests := map[string]struct {
		configMaps map[string]*corev1.ConfigMap
		forbidden  map[string]bool
		want       DNS
		unreadable []string
	}{
		"AKS: the engine's key wins over another key naming the host": {
			configMaps: map[string]*corev1.ConfigMap{
				coredns.CustomConfigMap: custom(map[string]string{"a-team.override": hosts("192.0.2.7"), coredns.DefaultHostsKey: hosts("10.0.0.4")}),
				coredns.ConfigMap:       core("192.0.2.8"),
			},
			want: DNS{Access: Read, Object: "kube-system/coredns-custom", Key: coredns.DefaultHostsKey, Addresses: []string{"10.0.0.4"}},
		},
		"AKS: another key naming the host is found": {
			configMaps: map[string]*corev1.ConfigMap{
				coredns.CustomConfigMap: custom(map[string]string{"a-team.override": hosts("192.0.2.7")}),
				coredns.ConfigMap:       core(""),
			},
			want: DNS{Access: Read, Object: "kube-system/coredns-custom", Key: "a-team.override", Addresses: []string{"192.0.2.7"}},
		},
		"kind: the Corefile's root block": {
			configMaps: map[string]*corev1.ConfigMap{coredns.ConfigMap: core("10.0.0.4")},
			want:       DNS{Access: Read, Object: "kube-system/coredns", Key: coredns.CorefileKey, Addresses: []string{"10.0.0.4"}},
		},
		"no entry anywhere, everything read: absent from coredns-custom": {
			configMaps: map[string]*corev1.ConfigMap{coredns.CustomConfigMap: custom(nil), coredns.ConfigMap: core("")},
			want:       DNS{Access: Absent, Object: "kube-system/coredns-custom"},
		},
		"no coredns-custom and no entry in the Corefile: absent from coredns": {
			configMaps: map[string]*corev1.ConfigMap{coredns.ConfigMap: core("")},
			want:       DNS{Access: Absent, Object: "kube-system/coredns"},
		},
		"coredns-custom refused, the Corefile has none: forbidden, not absent": {
			configMaps: map[string]*corev1.ConfigMap{coredns.ConfigMap: core("")},
			forbidden:  map[string]bool{coredns.CustomConfigMap: true},
			want:       DNS{Access: Forbidden},
			unreadable: []string{"cannot read kube-system/configmaps/coredns-custom: forbidden"},
		},
		"coredns-custom refused, the Corefile has it: read": {
			configMaps: map[string]*corev1.ConfigMap{coredns.ConfigMap: core("10.0.0.4")},
			forbidden:  map[string]bool{coredns.CustomConfigMap: true},
			want:       DNS{Access: Read, Object: "kube-system/coredns", Key: coredns.CorefileKey, Addresses: []string{"10.0.0.4"}},
			unreadable: []string{"cannot read kube-system/configmaps/coredns-custom: forbidden"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &source{configMaps: tc.configMaps, forbidden: tc.forbidden, secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
				Data: map[string][]byte{operator.KeyRegistrationURL: []byte("https://" + host)}}}

			r := Gather(context.Background(), src, Options{Exits: testExits, Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})

			want := tc.want
			want.Checked, want.Host = true, host
			assert.Equal(t, want, r.DNS)
			assert.Equal(t, tc.unreadable, r.Unreadable)
		})
	}
}

// TestGatherJobs: each run shows its newest pod's exit code and its
// newest Event, the engine's own before the Job controller's even when
// the controller's is newer, since the engine's says what happened.
// Runs are newest first.
func TestGatherJobs(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(m int) metav1.Time { return metav1.NewTime(now.Add(time.Duration(m) * time.Minute)) }
	job := func(name string, created int, conds ...batchv1.JobCondition) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)}, Status: batchv1.JobStatus{Conditions: conds}}
	}
	pod := func(name, jobName string, created int, exit int32) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created), Labels: map[string]string{JobNameLabel: jobName}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}}}
	}
	event := func(jobName, reporter, reason string, m int) eventsv1.Event {
		return eventsv1.Event{Regarding: corev1.ObjectReference{Kind: "Job", Name: jobName}, ReportingController: reporter, Reason: reason, EventTime: metav1.NewMicroTime(at(m).Time)}
	}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: at(-50)}
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at(-5)}
	src := &source{
		jobs: []batchv1.Job{job("old", -60, failed), job("new", -10, complete)},
		pods: []corev1.Pod{pod("old-a", "old", -60, 1), pod("old-b", "old", -55, 2), pod("new-a", "new", -10, 0)},
		events: []eventsv1.Event{
			event("old", kube.ReportingController, kube.ReasonFailed, -54),
			event("old", "job-controller", "BackoffLimitExceeded", -50),
			event("new", "job-controller", "Completed", -5),
		},
	}

	r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})

	require.Equal(t, Read, r.Jobs.Access)
	require.Len(t, r.Jobs.Items, 2)
	newest, old := r.Jobs.Items[0], r.Jobs.Items[1]
	assert.Equal(t, "new", newest.Name, "newest first")
	assert.Equal(t, JobSucceeded, newest.Outcome)
	assert.Equal(t, "new-a", newest.Pod)
	require.NotNil(t, newest.Event)
	assert.Equal(t, "Completed", newest.Event.Reason, "the Job controller's Event when the engine wrote none")

	assert.Equal(t, JobFailed, old.Outcome)
	assert.Equal(t, "BackoffLimitExceeded", old.Reason)
	assert.Equal(t, "old-b", old.Pod, "the newest pod")
	require.NotNil(t, old.ExitCode)
	assert.Equal(t, int32(2), *old.ExitCode, "the newest pod's exit code")
	require.NotNil(t, old.Event)
	assert.Equal(t, kube.ReasonFailed, old.Event.Reason, "the engine's Event wins over the Job controller's newer one")
}

// TestGatherLeaseHolder: a run holding the Lease is called gone only when
// the engine's pods were listed and its pod is not running among them; a
// refused pod list leaves it alive, since the verdict would otherwise tell
// a person to wait out a Lease that a live run holds.
func TestGatherLeaseHolder(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	renewed := metav1.NewMicroTime(now.Add(-time.Minute))
	held := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("manual-1-abcde"), LeaseDurationSeconds: ptr.To(int32(900)), RenewTime: &renewed}}
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "manual-1-abcde"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	ended := running
	ended.Status.Phase = corev1.PodFailed

	tests := map[string]struct {
		pods      []corev1.Pod
		forbidden map[string]bool
		gone      bool
	}{
		"its pod runs":              {pods: []corev1.Pod{running}},
		"its pod ended":             {pods: []corev1.Pod{ended}, gone: true},
		"its pod is not there":      {gone: true},
		"the pods cannot be listed": {forbidden: map[string]bool{"pods": true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &source{lease: held, pods: tc.pods, forbidden: tc.forbidden}

			r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})

			assert.Equal(t, LeaseHeld, r.Lease.State)
			assert.Equal(t, "manual-1-abcde", r.Lease.Holder)
			assert.Equal(t, tc.gone, r.Lease.HolderGone)
		})
	}
}

// TestGatherShadowingService: a tenant's Service susecloud in a namespace
// named net answers smt-azure.susecloud.net.svc.cluster.local, which a
// pod's resolver (ndots:5) asks before the name; status names it as the
// broken link. Only a headless Service answers a hostname under it; a
// refused read is listed, never taken for a shadow.
func TestGatherShadowingService(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
		Data: map[string][]byte{operator.KeyRegistrationType: []byte("online"), operator.KeyRegCode: []byte("CODE"), operator.KeyRegistrationURL: []byte("https://smt-azure.susecloud.net")}}
	service := func(clusterIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "susecloud", Namespace: "net"}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
	}
	endpoint := func(hostname string) []discoveryv1.EndpointSlice {
		return []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.9"}, Hostname: &hostname}}}}
	}
	tests := map[string]struct {
		services   map[string]*corev1.Service
		endpoints  map[string][]discoveryv1.EndpointSlice
		forbidden  map[string]bool
		shadow     Access // "": none
		wantStart  string
		wantInText string
	}{
		"a headless Service susecloud in namespace net": {
			services:  map[string]*corev1.Service{"net/susecloud": service(corev1.ClusterIPNone)},
			endpoints: map[string][]discoveryv1.EndpointSlice{"net/susecloud": endpoint("smt-azure")}, shadow: Read,
			wantStart:  "Not registered: Service net/susecloud shadows smt-azure.susecloud.net: a pod's resolver (ndots:5) asks smt-azure.susecloud.net.svc.<cluster domain> first, which that Service answers, so rancher/scc-operator reaches it instead of the update server — remove or rename it (kubectl -n net delete service susecloud) or the namespace net, then run the engine: ",
			wantInText: "shadowed: Service net/susecloud answers smt-azure.susecloud.net.svc.<cluster domain>",
		},
		// smt-azure.susecloud.net.svc… resolves only to an endpoint whose
		// hostname is smt-azure (a pod with hostname and subdomain).
		"a headless Service without an endpoint of that hostname: not a shadow": {
			services:  map[string]*corev1.Service{"net/susecloud": service(corev1.ClusterIPNone)},
			endpoints: map[string][]discoveryv1.EndpointSlice{"net/susecloud": endpoint("web-0")},
		},
		"a headless Service whose endpoints cannot be read: listed, not named a shadow": {
			services:  map[string]*corev1.Service{"net/susecloud": service(corev1.ClusterIPNone)},
			forbidden: map[string]bool{"endpoints": true}, shadow: Forbidden,
			wantInText: "cannot read net/endpointslices of Service susecloud: forbidden",
		},
		"a Service with a cluster IP answers only its own name": {
			services: map[string]*corev1.Service{"net/susecloud": service("10.96.0.7")},
		},
		"no such Service": {},
		"the Service cannot be read: listed, not a shadow": {
			forbidden: map[string]bool{"service": true}, shadow: Forbidden,
			wantInText: "cannot read net/services/susecloud: forbidden",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &source{secret: secret, services: tc.services, endpoints: tc.endpoints, forbidden: tc.forbidden}
			r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})
			if tc.shadow == "" {
				assert.Nil(t, r.DNS.Shadow)
			} else {
				require.NotNil(t, r.DNS.Shadow)
				assert.Equal(t, tc.shadow, r.DNS.Shadow.Access)
				assert.Equal(t, "net/susecloud", r.DNS.Shadow.Service)
			}
			if tc.wantStart != "" {
				assert.Equal(t, StateActionNeeded, r.Verdict.State)
				assert.True(t, strings.HasPrefix(r.Verdict.Line, tc.wantStart), r.Verdict.Line)
			} else {
				assert.NotContains(t, r.Verdict.Line, "shadows")
			}
			var out strings.Builder
			require.NoError(t, r.WriteText(&out))
			assert.Contains(t, out.String(), tc.wantInText)
		})
	}
}

func TestShadowCandidate(t *testing.T) {
	tests := map[string]struct {
		name              string
		host, service, ns string
		ok                bool
	}{
		"host under a Service":        {"smt-azure.susecloud.net", "smt-azure", "susecloud", "net", true},
		"the Service's own name":      {"susecloud.net", "", "susecloud", "net", true},
		"two hostname labels: none":   {"a.smt-azure.susecloud.net", "", "", "", false},
		"a label no Service can have": {"smt.susecloud_x.net", "", "", "", false},
		"one label":                   {"localhost", "", "", "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host, service, ns, ok := shadowCandidate(tc.name)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, [3]string{tc.host, tc.service, tc.ns}, [3]string{host, service, ns})
		})
	}
}

// TestGatherRecoveryRecord: status reads the engine's recovery record from
// its Lease and shows it, with the command that clears it, next to what
// the engine makes of the operator's failure.
func TestGatherRecoveryRecord(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const msg = "Cannot register system to SCC: Error: Registration server returned 'Service Unavailable' (503)"
	rec := `{"attempts":1,"time":"2026-11-30T06:00:00Z","cause":"HTTP 503 Service Unavailable","message":"` + msg + `","outcome":"failed","registration":"scc-registration-abc","target":"0123456789ab"}`
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{operator.AnnotationRecovery: rec}}}
	src := &source{lease: lease, registration: &kube.SCCRegistration{Name: "scc-registration-abc", Conditions: []kube.RegistrationCondition{{Type: "Failure", Status: "True", Message: msg}}},
		secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Labels: map[string]string{operator.LabelSalt: "s", operator.LabelNameSuffix: "abc"}}}}

	r := Gather(context.Background(), src, Options{Exits: testExits, Now: now})
	require.NotNil(t, r.Lease.Recovery)
	assert.Equal(t, 1, r.Lease.Recovery.Attempts)
	assert.True(t, r.Operator.Recoverable)
	var text strings.Builder
	require.NoError(t, r.WriteText(&text))
	out := text.String()
	assert.Contains(t, out, "last recovery 2026-11-30T06:00:00Z: failed (Registration scc-registration-abc)")
	assert.Contains(t, out, "1 of 3 in a row for this code and URL, the last for cause HTTP 503 Service Unavailable")
	assert.Contains(t, out, "annotate lease registration-engine registration-engine.cattle.io/operator-recovery-")
	assert.Contains(t, out, "(cause HTTP 503 Service Unavailable: a retry can fix it)")

	lease.Annotations[operator.AnnotationRecovery] = "{not json"
	r = Gather(context.Background(), src, Options{Exits: testExits, Now: now})
	assert.Nil(t, r.Lease.Recovery)
	assert.NotEmpty(t, r.Lease.RecoveryError)
}

// TestStatusDoesNotReadAForgedStreakAsRegistered: a week of failures whose
// record says failingSince is a year ahead, or a record that does not
// parse, is never plain "Registered": status names what cannot be true.
func TestStatusDoesNotReadAForgedStreakAsRegistered(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		record    string
		wantDoubt string
	}{
		"failingSince a year ahead": {
			record:    `{"time":"2026-11-30T11:50:00Z","outcome":"failed","exitCode":3,"phase":"prove","consecutiveFailures":1000,"failingSince":"2027-11-30T00:00:00Z","cause":"settling","nextAttempt":"2026-11-30T12:00:00Z"}`,
			wantDoubt: "failingSince 2027-11-30T00:00:00Z is not before its time",
		},
		"garbage": {record: `{not json`, wantDoubt: "the record does not parse"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := registered(now)
			src := &source{lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{kube.AnnotationLastRun: tc.record}}}}
			g := Gather(context.Background(), src, Options{Exits: testExits, Now: now})
			require.NotNil(t, g.Lease.LastRun, "a record is there")
			assert.True(t, g.Lease.LastRun.Failing())
			r.Lease = g.Lease
			v := Decide(r, now, testExits)
			assert.Equal(t, StateActionNeeded, v.State)
			assert.Contains(t, v.Line, "Registered, action needed: the engine's run record on the Lease registration-engine cannot be true: "+tc.wantDoubt)
		})
	}
}
