package status

import (
	"cmp"
	"context"
	"crypto/sha1"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
	"github.com/rancher/registration-engine/providers"
)

// Source is what status reads; *kube.Reader serves it. Every method returns
// the API server's error as it came, so a refused read can be told from an
// absent object.
type Source interface {
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	Service(ctx context.Context, ns, name string) (*corev1.Service, error)
	ServiceEndpoints(ctx context.Context, ns, service string) (*discoveryv1.EndpointSliceList, error)
	Lease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error)
	CronJob(ctx context.Context, ns, name string) (*batchv1.CronJob, error)
	Jobs(ctx context.Context, ns, selector string) (*batchv1.JobList, error)
	Pods(ctx context.Context, ns, selector string) (*corev1.PodList, error)
	Events(ctx context.Context, ns string) (*eventsv1.EventList, error)
	Registration(ctx context.Context, name string) (*kube.SCCRegistration, error)
	RegistrationsServed(ctx context.Context) (bool, error)
}

// The objects status relates, as the manifests and rancher/scc-operator
// name them.
const (
	// AppLabel selects the engine's Jobs and pods (the CronJob's job
	// template sets it).
	AppLabel = "app.kubernetes.io/name=registration-engine,registration-engine.cattle.io/run!=retry"
	// JobNameLabel ties a pod to its Job.
	JobNameLabel = "batch.kubernetes.io/job-name"
	// ManualAnnotation marks a Job made by kubectl create job --from.
	ManualAnnotation = "cronjob.kubernetes.io/instantiate"

	// The operator's annotation on the Secret and its leader Lease
	// (rancher/scc-operator internal/consts); its labels are in job/kube.
	AnnotationLastProcessed = "scc.cattle.io/last-processed"
	LeaderNamespace         = "kube-system"
	LeaderLeaseName         = "scc-controllers"

	// keptJobs is how many Jobs the report shows: the CronJob's history
	// limits keep three of each outcome.
	keptJobs = 5
)

// Options say where to look and how to check what is found.
type Options struct {
	// Namespace holds the CronJob, the Lease and the Secret.
	Namespace string
	// DNSNamespace holds CoreDNS; default kube-system.
	DNSNamespace string
	// Inspect verifies instanceData offline; nil skips it.
	Inspect func(ctx context.Context, doc []byte) (providers.DocumentCheck, error)
	// Now is the time of the report; zero means time.Now().
	Now time.Time
	// Exits are the exit codes of the status command and the engine.
	Exits ExitCodes
}

// gatherer fills one Report.
type gatherer struct {
	src  Source
	opts Options
	r    *Report
	now  time.Time
}

// Gather reads every object status relates and returns the report with its
// verdict. It does not fail: what it cannot read is in Unreadable, and the
// verdict takes it into account.
func Gather(ctx context.Context, src Source, opts Options) *Report {
	opts.Namespace = cmp.Or(opts.Namespace, operator.Namespace)
	opts.DNSNamespace = cmp.Or(opts.DNSNamespace, "kube-system")
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	g := &gatherer{src: src, opts: opts, now: now, r: &Report{Namespace: opts.Namespace, Time: now.UTC()}}
	pods, podsRead := g.cronJobAndJobs(ctx)
	g.lease(ctx, pods, podsRead)
	secret := g.secret(ctx)
	g.dns(ctx)
	g.shadow(ctx)
	g.operator(ctx, secret)
	g.r.Verdict = Decide(g.r, now, g.opts.Exits)
	return g.r
}

// access classifies a read's error and records a failed one.
func (g *gatherer) access(object string, err error) Access {
	switch {
	case err == nil:
		return Read
	case apierrors.IsNotFound(err) && !apierrors.IsUnexpectedServerError(err):
		// A 404 without a Kubernetes Status came from something else than
		// the API server (a proxy, a web server): no proof of absence.
		return Absent
	case apierrors.IsForbidden(err):
		g.r.Unreadable = append(g.r.Unreadable, "cannot read "+object+": forbidden")
		return Forbidden
	default:
		g.r.Unreadable = append(g.r.Unreadable, fmt.Sprintf("cannot read %s: %v", object, err))
		return Failed
	}
}

// cronJobAndJobs fills CronJob and Jobs, and returns the engine's pods and
// whether they could be listed.
func (g *gatherer) cronJobAndJobs(ctx context.Context) (pods []corev1.Pod, podsRead bool) {
	ns := g.opts.Namespace
	cj := &g.r.CronJob
	cj.Name, cj.InClusterDNS, cj.OperatorRecovery = kube.CronJobName, true, true
	c, err := g.src.CronJob(ctx, ns, kube.CronJobName)
	if cj.Access = g.access(ns+"/cronjobs/"+kube.CronJobName, err); cj.Access == Read {
		cj.Schedule = c.Spec.Schedule
		cj.TimeZone = ptrValue(c.Spec.TimeZone)
		cj.Suspended = ptrValue(c.Spec.Suspend)
		cj.LastSchedule = metaTime(c.Status.LastScheduleTime)
		cj.LastSuccessful = metaTime(c.Status.LastSuccessfulTime)
		for _, ctr := range c.Spec.JobTemplate.Spec.Template.Spec.Containers {
			for _, e := range ctr.Env {
				if e.Name == "IN_CLUSTER_DNS" && e.ValueFrom == nil && strings.EqualFold(strings.TrimSpace(e.Value), "false") {
					cj.InClusterDNS = false
				}
				if e.Name == "OPERATOR_RECOVERY" && e.ValueFrom == nil && strings.EqualFold(strings.TrimSpace(e.Value), "false") {
					cj.OperatorRecovery = false
				}
				if e.ValueFrom == nil {
					switch e.Name {
					case "RELEASE_MANAGER":
						cj.ReleaseManager = strings.TrimSpace(e.Value)
					case "RELEASE_NAME":
						cj.ReleaseName = strings.TrimSpace(e.Value)
					case "EXTENSION_RESOURCE_ID":
						cj.ExtensionID = strings.TrimSpace(e.Value)
					}
				}
			}
		}
	}

	jobs, err := g.src.Jobs(ctx, ns, AppLabel)
	if g.r.Jobs.Access = g.access(ns+"/jobs", err); g.r.Jobs.Access != Read {
		return nil, false
	}
	items := jobs.Items
	slices.SortFunc(items, func(a, b batchv1.Job) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	items = items[:min(len(items), keptJobs)]

	if list, err := g.src.Pods(ctx, ns, AppLabel); g.access(ns+"/pods", err) == Read {
		pods, podsRead = list.Items, true
	}
	var events []eventsv1.Event
	if list, err := g.src.Events(ctx, ns); g.access(ns+"/events", err) == Read {
		events = list.Items
	}
	for _, j := range items {
		g.r.Jobs.Items = append(g.r.Jobs.Items, describeJob(j, pods, events))
	}
	return pods, podsRead
}

func describeJob(j batchv1.Job, pods []corev1.Pod, events []eventsv1.Event) Job {
	out := Job{Name: j.Name, Manual: j.Annotations[ManualAnnotation] == "manual", Created: j.CreationTimestamp.UTC(), Outcome: JobRunning}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			out.Outcome = JobSucceeded
			out.Finished = metaTime(&c.LastTransitionTime)
		case batchv1.JobFailed:
			out.Outcome = JobFailed
			out.Finished = metaTime(&c.LastTransitionTime)
			out.Reason, out.Message = c.Reason, c.Message
		}
	}
	var newest *corev1.Pod
	jobPods := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Labels[JobNameLabel] != j.Name {
			continue
		}
		jobPods[p.Name] = true
		if newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	if newest != nil {
		out.Pod = newest.Name
		for _, cs := range newest.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				out.ExitCode = &t.ExitCode
			}
		}
	}
	for _, e := range events {
		if e.Regarding.Kind != "Job" || e.Regarding.Name != j.Name {
			continue
		}
		ev := Event{Type: e.Type, Reason: e.Reason, Note: e.Note, Reporter: e.ReportingController, Time: eventTime(e),
			Instance: e.ReportingInstance, FromJobPod: jobPods[e.ReportingInstance],
			Address: e.Annotations[kube.AnnotationAddress], Server: e.Annotations[kube.AnnotationServer]}
		// The engine's own Event from a pod of this Job wins, then the
		// engine's from elsewhere (anyone may create an Event naming the
		// engine as its controller), then the Job controller's; the newest
		// of a rank.
		if out.Event == nil || eventRank(ev) > eventRank(*out.Event) ||
			(eventRank(ev) == eventRank(*out.Event) && ev.Time.After(out.Event.Time)) {
			out.Event = &ev
		}
	}
	return out
}

// eventRank orders the Events about a Job for the one status shows.
func eventRank(e Event) int {
	switch {
	case e.Reporter == kube.ReportingController && e.FromJobPod:
		return 2
	case e.Reporter == kube.ReportingController:
		return 1
	default:
		return 0
	}
}

// lease fills Lease; pods are the engine's pods, podsRead whether they
// could be listed: a holder is only called gone when the list was read.
func (g *gatherer) lease(ctx context.Context, pods []corev1.Pod, podsRead bool) {
	ns := g.opts.Namespace
	l := &g.r.Lease
	l.Name = kube.LeaseName
	le, err := g.src.Lease(ctx, ns, kube.LeaseName)
	if l.Access = g.access(ns+"/leases/"+kube.LeaseName, err); l.Access != Read {
		return
	}
	l.Holder = ptrValue(le.Spec.HolderIdentity)
	l.Since = microTime(le.Spec.AcquireTime)
	if rec, ok, err := operator.ParseRecord(le.Annotations); err != nil {
		l.RecoveryError = err.Error()
	} else if ok {
		l.Recovery = &rec
	}
	if run, ok := retry.Read(le.Annotations[kube.AnnotationLastRun], g.now); ok {
		l.LastRun, l.LastRunDoubt = &run, run.Doubt
	}
	until := leaseUntil(le)
	if !until.IsZero() {
		l.Until = &until
	}
	switch {
	case l.Holder == "":
		l.State = LeaseFree
	case until.After(g.now):
		l.State = LeaseHeld
	default:
		l.State = LeaseStale
	}
	if l.Holder != "" && podsRead {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == l.Holder })
		l.HolderGone = i < 0 || pods[i].DeletionTimestamp != nil ||
			pods[i].Status.Phase == corev1.PodSucceeded || pods[i].Status.Phase == corev1.PodFailed
	}
}

// leaseUntil is renewTime (or acquireTime) plus leaseDurationSeconds.
func leaseUntil(le *coordinationv1.Lease) time.Time {
	since := le.Spec.RenewTime
	if since == nil {
		since = le.Spec.AcquireTime
	}
	if since == nil {
		return time.Time{}
	}
	return since.Add(time.Duration(ptrValue(le.Spec.LeaseDurationSeconds)) * time.Second).UTC()
}

func (g *gatherer) secret(ctx context.Context) *corev1.Secret {
	ns := g.opts.Namespace
	s := &g.r.Secret
	s.Name = operator.SecretName
	sec, err := g.src.Secret(ctx, ns, operator.SecretName)
	if s.Access = g.access(ns+"/secrets/"+operator.SecretName, err); s.Access != Read {
		return nil
	}
	s.Created = metaTime(&sec.CreationTimestamp)
	for _, m := range sec.ManagedFields {
		if m.Manager == kube.FieldManager && m.Time != nil && (s.Written == nil || m.Time.After(*s.Written)) {
			s.Written = metaTime(m.Time)
		}
	}
	if w := operator.FindOtherWriter(sec); w != nil {
		s.OtherWriter = w.Verdict(ns, operator.SecretName)
	}
	s.Keys = map[string]int{}
	for _, k := range operator.ValueKeys() {
		s.Keys[k] = len(sec.Data[k])
	}
	s.RegistrationType = string(sec.Data[operator.KeyRegistrationType])
	s.RegistrationURL = string(sec.Data[operator.KeyRegistrationURL])
	s.Target = operator.TargetHash(string(sec.Data[operator.KeyRegCode]), s.RegistrationURL)
	if u, err := url.Parse(s.RegistrationURL); err == nil {
		s.Host = u.Hostname()
	}
	if pemBytes := sec.Data[operator.KeyRegistrationURLCert]; len(pemBytes) > 0 {
		s.Certificate = describeCert(pemBytes)
	}
	if doc := sec.Data[operator.KeyInstanceData]; len(doc) > 0 && g.opts.Inspect != nil {
		s.InstanceData = describeDocument(g.opts.Inspect(ctx, doc))
	}
	return sec
}

func describeCert(pemBytes []byte) *Cert {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return &Cert{Error: "registrationUrlCert holds no PEM block"}
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return &Cert{Error: fmt.Sprintf("registrationUrlCert: %v", err)}
	}
	sum := sha1.Sum(c.Raw)
	pairs := make([]string, len(sum))
	for i, b := range sum {
		pairs[i] = fmt.Sprintf("%02X", b)
	}
	return &Cert{
		Subject: c.Subject.String(), Issuer: c.Issuer.String(), DNSNames: c.DNSNames,
		NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), SHA1: strings.Join(pairs, ":"),
	}
}

func describeDocument(c providers.DocumentCheck, err error) *Document {
	if err != nil {
		return &Document{Error: err.Error()}
	}
	return &Document{DocumentCheck: c}
}

func (g *gatherer) dns(ctx context.Context) {
	d := &g.r.DNS
	d.Host = g.r.Secret.Host
	if !g.r.CronJob.InClusterDNS || d.Host == "" {
		return
	}
	d.Checked = true
	d.LastRun, d.LastRunAddress = lastRunAddress(g.r.Jobs.Items, d.Host)
	ns := g.opts.DNSNamespace
	custom, err := g.src.ConfigMap(ctx, ns, coredns.CustomConfigMap)
	customAccess := g.access(ns+"/configmaps/"+coredns.CustomConfigMap, err)
	if customAccess == Read {
		keys := slices.Sorted(maps.Keys(custom.Data))
		// Our key first: it is the one the engine keeps.
		if i := slices.Index(keys, coredns.DefaultHostsKey); i > 0 {
			keys = append([]string{coredns.DefaultHostsKey}, slices.Delete(keys, i, i+1)...)
		}
		for _, k := range keys {
			if addrs := coredns.HostsAddresses(custom.Data[k], d.Host); len(addrs) > 0 {
				d.Access, d.Object, d.Key = Read, ns+"/"+coredns.CustomConfigMap, k
				d.Addresses = addrStrings(addrs)
				return
			}
		}
	}
	core, err := g.src.ConfigMap(ctx, ns, coredns.ConfigMap)
	coreAccess := g.access(ns+"/configmaps/"+coredns.ConfigMap, err)
	if coreAccess == Read {
		if addrs := coredns.HostsAddresses(core.Data[coredns.CorefileKey], d.Host); len(addrs) > 0 {
			d.Access, d.Object, d.Key = Read, ns+"/"+coredns.ConfigMap, coredns.CorefileKey
			d.Addresses = addrStrings(addrs)
			return
		}
	}
	// Not found: absent only if every place it could be was read.
	switch {
	case customAccess == Forbidden || coreAccess == Forbidden:
		d.Access = Forbidden
	case customAccess == Failed || coreAccess == Failed:
		d.Access = Failed
	default:
		d.Access = Absent
		if customAccess == Read {
			d.Object = ns + "/" + coredns.CustomConfigMap
		} else {
			d.Object = ns + "/" + coredns.ConfigMap
		}
	}
}

// shadow fills DNS.Shadow: whether a Service answers Host's search-domain
// form <Host>.svc.<cluster domain>, which rancher/scc-operator's resolver
// asks before Host itself. Only the Service the name designates is read.
func (g *gatherer) shadow(ctx context.Context) {
	d := &g.r.DNS
	host, service, ns, ok := shadowCandidate(d.Host)
	if !ok {
		return
	}
	svc, err := g.src.Service(ctx, ns, service)
	access := g.access(ns+"/services/"+service, err)
	name := d.Host + ".svc.<cluster domain>"
	switch {
	case access == Absent:
		return
	case access == Read && host != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		// A Service with a cluster IP answers only its own name, not
		// <hostname>.<service>.
		return
	case access == Read && host != "":
		// A headless Service answers <hostname>.<service> only for an
		// endpoint with that hostname (a pod with hostname and subdomain).
		if access = g.endpointHost(ctx, ns, service, host); access == Absent {
			return
		}
	}
	d.Shadow = &Shadow{Access: access, Service: ns + "/" + service, Name: name}
}

// endpointHost is whether Service ns/service has an endpoint with hostname
// host, which its headless name <host>.<service>.<ns>.svc answers: Read
// when it has, Absent when not, and how the read went when its
// EndpointSlices could not be read (the Service is then listed as a
// possible shadow, not named as one).
func (g *gatherer) endpointHost(ctx context.Context, ns, service, host string) Access {
	list, err := g.src.ServiceEndpoints(ctx, ns, service)
	if err != nil {
		return g.access(ns+"/endpointslices of Service "+service, err)
	}
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			if ep.Hostname != nil && strings.EqualFold(*ep.Hostname, host) {
				return Read
			}
		}
	}
	return Absent
}

// shadowCandidate is the Service that could answer <host>.svc.<domain>:
// [<hostname>.]<service>.<namespace>, with at most one hostname label.
func shadowCandidate(name string) (host, service, ns string, ok bool) {
	labels := strings.Split(strings.ToLower(strings.TrimSuffix(name, ".")), ".")
	n := len(labels)
	if n < 2 || n > 3 || !dnsLabel(labels[n-1]) || !dnsLabel(labels[n-2]) {
		return "", "", "", false
	}
	if n == 3 {
		host = labels[0]
	}
	return host, labels[n-2], labels[n-1], true
}

// dnsLabel: a valid Kubernetes namespace or Service name (RFC 1123 label).
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// lastRunAddress is the newest successful run among jobs (newest first)
// whose Event names the address it reached for host.
func lastRunAddress(jobs []Job, host string) (run, addr string) {
	for _, j := range jobs {
		e := j.Event
		if e == nil || e.Reporter != kube.ReportingController || e.Address == "" ||
			(e.Reason != kube.ReasonRegistered && e.Reason != kube.ReasonUnchanged) ||
			(e.Server != "" && !strings.EqualFold(e.Server, host)) {
			continue
		}
		return j.Name, e.Address
	}
	return "", ""
}

func (g *gatherer) operator(ctx context.Context, sec *corev1.Secret) {
	o := &g.r.Operator
	o.Leader.Name = LeaderNamespace + "/" + LeaderLeaseName
	le, err := g.src.Lease(ctx, LeaderNamespace, LeaderLeaseName)
	if o.Leader.Access = g.access(LeaderNamespace+"/leases/"+LeaderLeaseName, err); o.Leader.Access == Read {
		o.Leader.Holder = ptrValue(le.Spec.HolderIdentity)
		o.Leader.Renewed = microTime(le.Spec.RenewTime)
		o.Leader.Alive = o.Leader.Holder != "" && leaseUntil(le).After(g.now)
	}
	if sec != nil {
		_, o.Adopted = sec.Labels[operator.LabelSalt]
		if t, err := time.Parse(time.RFC3339, sec.Annotations[AnnotationLastProcessed]); err == nil {
			t = t.UTC()
			o.LastProcessed = &t
		}
		if suffix := sec.Labels[operator.LabelNameSuffix]; suffix != "" {
			o.Registration = operator.RegistrationPrefix + suffix
			want, _ := operator.RegistrationName(sec)
			current := want == o.Registration
			o.ProcessedCurrent = &current
		}
	}

	var reg *kube.SCCRegistration
	if o.Registration != "" {
		got, err := g.src.Registration(ctx, o.Registration)
		if o.Access = g.access("registrations.scc.cattle.io/"+o.Registration, err); o.Access == Read {
			reg = got
			o.describe(reg)
		}
	}
	if o.Access != Read {
		// Is the operator's API there at all? Discovery is open to every
		// authenticated user.
		if served, err := g.src.RegistrationsServed(ctx); err == nil {
			o.APIInstalled = &served
		}
	}
	o.State = operatorState(o, reg)
}

// operatorState names what the operator made of the Secret: active, failed,
// pending, absent, or "" when a refused read leaves it open. reg is the
// Registration read, nil when there was none to read; it is judged as the
// engine's own run judges it (operator.Judge).
func operatorState(o *Operator, reg *kube.SCCRegistration) string {
	if reg != nil {
		if state, _, _ := operator.Judge(reg); state != operator.StatePending {
			return state
		}
	}
	switch {
	case o.APIInstalled != nil && !*o.APIInstalled:
		return operator.StateAbsent
	case !o.Adopted && (o.Leader.Access == Absent || o.Leader.Access == Read && !o.Leader.Alive):
		// No operator has ever held its leader Lease, or none holds it now.
		return operator.StateAbsent
	case o.Access == Forbidden || o.Access == Failed:
		return ""
	case !o.Adopted && o.Leader.Access != Read:
		return ""
	default:
		return operator.StatePending
	}
}

// describe copies what status shows of a Registration.
func (o *Operator) describe(reg *kube.SCCRegistration) {
	o.Current, o.Activated = reg.Current, reg.Activated
	for _, c := range reg.Conditions {
		o.Conditions = append(o.Conditions, Condition{Type: c.Type, Status: c.Status, Message: c.Message, Updated: c.LastUpdateTime})
		if c.Type == "RegistrationActivated" && c.Status == "True" {
			if t, err := time.Parse(time.RFC3339, c.LastUpdateTime); err == nil {
				t = t.UTC()
				o.ActiveSince = &t
			}
		}
	}
	if state, msg, v := operator.Judge(reg); state == operator.StateFailed {
		o.Message = msg
		o.Cause, o.Recoverable, o.CodeRefused = v.Cause, v.Recoverable, v.CodeRefused()
	}
}

func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.UTC()
	case !e.EventTime.IsZero():
		return e.EventTime.UTC()
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.UTC()
	default:
		return e.CreationTimestamp.UTC()
	}
}

func addrStrings[T fmt.Stringer](addrs []T) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

func ptrValue[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func metaTime(t *metav1.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func microTime(t *metav1.MicroTime) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
