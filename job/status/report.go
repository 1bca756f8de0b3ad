package status

import (
	"time"

	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
	"github.com/rancher/registration-engine/providers"
)

// Report is everything status found, verdict first. It is also the -o json
// document, so its field names are an interface for scripts: add fields,
// never rename them.
type Report struct {
	Verdict   Verdict   `json:"verdict"`
	Namespace string    `json:"namespace"`
	Time      time.Time `json:"time"`
	CronJob   CronJob   `json:"cronJob"`
	Jobs      Jobs      `json:"jobs"`
	Lease     Lease     `json:"lease"`
	Secret    Secret    `json:"secret"`
	DNS       DNS       `json:"dns"`
	Operator  Operator  `json:"operator"`
	// Unreadable lists every read the API server refused or failed, in the
	// words a person needs ("cannot read kube-system/configmaps/coredns:
	// forbidden"). A refused read is never taken for a missing object.
	Unreadable []string `json:"unreadable,omitempty"`
}

// States of a Verdict, with the exit code each maps to.
const (
	// StateRegistered: the operator's Registration is active for the
	// Secret's current values. Exit 0.
	StateRegistered = "registered"
	// StateNotYet: a run or the operator is still working. Exit 1.
	StateNotYet = "not-yet"
	// StateActionNeeded: nothing will fix itself; the verdict says what to
	// do. Exit 2.
	StateActionNeeded = "action-needed"
	// StateUnknown: a read the verdict depends on was refused; the
	// evidence says which. Exit 2: a person with more access must look.
	StateUnknown = "unknown"
)

// Verdict is the first line of the output and the exit code.
type Verdict struct {
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	// Line is the whole first line: "Registered: …", "Not registered: <the
	// first broken link> — <what to do>".
	Line string `json:"line"`
	// Next is what to do, also inside Line; empty when registered.
	Next string `json:"next,omitempty"`
}

// Access says how a read went.
type Access string

// Outcomes of a read.
const (
	Read      Access = "read"
	Absent    Access = "absent"
	Forbidden Access = "forbidden"
	Failed    Access = "failed"
)

// CronJob is the engine's CronJob.
type CronJob struct {
	Name           string     `json:"name"`
	Access         Access     `json:"access"`
	Schedule       string     `json:"schedule,omitempty"`
	TimeZone       string     `json:"timeZone,omitempty"`
	Suspended      bool       `json:"suspended"`
	LastSchedule   *time.Time `json:"lastScheduleTime,omitempty"`
	LastSuccessful *time.Time `json:"lastSuccessfulTime,omitempty"`
	// InClusterDNS is the CronJob's IN_CLUSTER_DNS (default true): whether
	// the engine keeps the CoreDNS entry, and so whether status checks it.
	InClusterDNS bool `json:"inClusterDns"`
	// OperatorRecovery is the CronJob's OPERATOR_RECOVERY (default true):
	// whether its runs recover a Registration failed for a passing cause.
	OperatorRecovery bool `json:"operatorRecovery"`
	// ReleaseManager, ReleaseName and ExtensionID are the CronJob's
	// RELEASE_MANAGER, RELEASE_NAME and EXTENSION_RESOURCE_ID: who owns the
	// release, so that a remedy gives the customer's own command.
	ReleaseManager string `json:"releaseManager,omitempty"`
	ReleaseName    string `json:"releaseName,omitempty"`
	ExtensionID    string `json:"extensionResourceId,omitempty"`
}

// Jobs are the engine's most recent Jobs, newest first.
type Jobs struct {
	Access Access `json:"access"`
	Items  []Job  `json:"items"`
}

// Outcomes of a Job.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// Job is one run of the engine.
type Job struct {
	Name     string     `json:"name"`
	Manual   bool       `json:"manual"`
	Created  time.Time  `json:"created"`
	Finished *time.Time `json:"finished,omitempty"`
	Outcome  string     `json:"outcome"`
	// Reason and Message are the Job's Failed condition's (for example
	// PodFailurePolicy, BackoffLimitExceeded).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Pod is the newest pod; ExitCode its container's, when it ended.
	Pod      string `json:"pod,omitempty"`
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Event is the newest Event about the Job: the engine's own from a pod
	// of the Job when there is one, then the engine's from elsewhere, then
	// the Job controller's.
	Event *Event `json:"event,omitempty"`
}

// Event is an Event about a Job.
type Event struct {
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Note     string `json:"note,omitempty"`
	Reporter string `json:"reporter,omitempty"`
	// Instance is the reporting instance; FromJobPod whether it is a pod
	// of this Job (the engine names its pod), which a forged Event,
	// created by anyone with create on events, is not.
	Instance   string    `json:"instance,omitempty"`
	FromJobPod bool      `json:"fromJobPod,omitempty"`
	Time       time.Time `json:"time"`
	// Address and Server are the update server the run reached, from the
	// engine's annotations on its Event.
	Address string `json:"address,omitempty"`
	Server  string `json:"server,omitempty"`
}

// States of the Lease.
const (
	LeaseFree  = "free"
	LeaseHeld  = "held"
	LeaseStale = "stale"
)

// Lease is the Lease that keeps two runs apart.
type Lease struct {
	Name   string `json:"name"`
	Access Access `json:"access"`
	// State is free, held (until Until) or stale (expired: the next run
	// takes it over).
	State  string     `json:"state,omitempty"`
	Holder string     `json:"holder,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Until  *time.Time `json:"until,omitempty"`
	// HolderGone is true when the holder's pod no longer runs (or was
	// never seen): a run that died holding the Lease.
	HolderGone bool `json:"holderGone,omitempty"`
	// Recovery is the engine's record of its recoveries of Failed
	// Registrations (the Lease's annotation); nil when there is none.
	Recovery *operator.Record `json:"recovery,omitempty"`
	// RecoveryError says why the record could not be read.
	RecoveryError string `json:"recoveryError,omitempty"`
	// LastRun is the engine's record of its last run (the Lease's
	// annotation kube.AnnotationLastRun), which outlives the run's Event;
	// nil when there is none.
	LastRun *retry.Record `json:"lastRun,omitempty"`
	// LastRunDoubt says what in the stored record cannot be true (it does
	// not parse, or lies about time: retry.Read); LastRun is then
	// what the engine counts it as.
	LastRunDoubt string `json:"lastRunDoubt,omitempty"`
}

// Secret is the operator's Secret, as far as it may be shown: never the
// registration code or the document.
type Secret struct {
	Name    string     `json:"name"`
	Access  Access     `json:"access"`
	Created *time.Time `json:"created,omitempty"`
	// Written is when the engine last wrote it (its managedFields entry).
	Written *time.Time `json:"written,omitempty"`
	// Keys maps each of the engine's keys to its size in bytes (0: empty
	// or missing).
	Keys             map[string]int `json:"keys,omitempty"`
	RegistrationType string         `json:"registrationType,omitempty"`
	RegistrationURL  string         `json:"registrationUrl,omitempty"`
	// Host is the registrationUrl's host name.
	Host string `json:"host,omitempty"`
	// Target is operator.TargetHash of the code and URL, which the recovery
	// record is kept for (never the code itself).
	Target       string    `json:"target,omitempty"`
	Certificate  *Cert     `json:"certificate,omitempty"`
	InstanceData *Document `json:"instanceData,omitempty"`
	// OtherWriter is the verdict naming another tool that writes the
	// Secret (operator.FindOtherWriter: Rancher's chart, a GitOps controller),
	// which the engine never writes over; "" when there is none.
	OtherWriter string `json:"otherWriter,omitempty"`
}

// Cert is the update server's certificate from registrationUrlCert.
type Cert struct {
	Subject   string    `json:"subject,omitempty"`
	Issuer    string    `json:"issuer,omitempty"`
	DNSNames  []string  `json:"dnsNames,omitempty"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	// SHA1 is the fingerprint as SUSE's region servers publish it.
	SHA1 string `json:"sha1,omitempty"`
	// Error is why the PEM could not be read.
	Error string `json:"error,omitempty"`
}

// Document is the offline verification of instanceData's signed document,
// by the DocumentInspector of the cloud that wrote it.
type Document struct {
	providers.DocumentCheck
	// Error is why it is not a document at all.
	Error string `json:"error,omitempty"`
}

// DNS is the in-cluster name of the update server.
type DNS struct {
	// Checked is false when the CronJob says IN_CLUSTER_DNS=false (the
	// name is someone else's to make resolve) or nothing names a host.
	Checked bool   `json:"checked"`
	Access  Access `json:"access,omitempty"`
	Host    string `json:"host,omitempty"`
	// Object is where the entry is: kube-system/coredns-custom (key Key) or
	// kube-system/coredns.
	Object    string   `json:"object,omitempty"`
	Key       string   `json:"key,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	// LastRunAddress is the address of Host the newest successful run
	// (LastRun) reached, from its Event; the entry should map Host to it.
	LastRunAddress string `json:"lastRunAddress,omitempty"`
	LastRun        string `json:"lastRun,omitempty"`
	// Shadow is the Service that would answer a search-domain form of Host
	// before Host itself; nil when none can (see Shadow).
	Shadow *Shadow `json:"shadow,omitempty"`
}

// Shadow is a Service that answers <Host>.svc.<cluster domain>, which a
// pod's resolver (ndots:5) asks before Host: Service <second label> in
// namespace <last label> of Host (susecloud in net for
// smt-azure.susecloud.net), headless when Host has a third label (its
// pods' hostnames answer).
type Shadow struct {
	// Access is how the read of the Service went; Read means it exists
	// and shadows Host.
	Access Access `json:"access"`
	// Service is namespace/name; Name the search-domain name it answers.
	Service string `json:"service"`
	Name    string `json:"name"`
}

// Operator is what rancher/scc-operator made of the Secret.
type Operator struct {
	// State is operator.StateActive, OperatorFailed, OperatorPending or
	// OperatorAbsent, as the engine's run summary names them; "" when it
	// could not be read.
	State string `json:"state,omitempty"`
	// Adopted: the Secret carries the operator's labels.
	Adopted bool `json:"adopted"`
	// ProcessedCurrent: the Registration's name in the Secret's label is
	// the one the Secret's current values give, so the operator has acted
	// on them. Nil when not adopted.
	ProcessedCurrent *bool      `json:"processedCurrent,omitempty"`
	LastProcessed    *time.Time `json:"lastProcessed,omitempty"`
	// Registration is the name of its Registration; Access how its read
	// went.
	Registration string      `json:"registration,omitempty"`
	Access       Access      `json:"access,omitempty"`
	Current      string      `json:"currentCondition,omitempty"`
	Conditions   []Condition `json:"conditions,omitempty"`
	Activated    bool        `json:"activated"`
	ActiveSince  *time.Time  `json:"activeSince,omitempty"`
	// Message is the Failure condition's message, the operator's words.
	Message string `json:"message,omitempty"`
	// Cause and Recoverable are what the engine makes of Message
	// (operator.Classify): whether a run can recover it.
	Cause       string `json:"cause,omitempty"`
	Recoverable bool   `json:"recoverable,omitempty"`
	// CodeRefused: the update server refused the registration code.
	CodeRefused bool `json:"codeRefused,omitempty"`
	// APIInstalled: registrations.scc.cattle.io is served. Nil: unknown.
	APIInstalled *bool `json:"apiInstalled,omitempty"`
	// Leader is the operator's leader Lease (kube-system/scc-controllers).
	Leader LeaderLease `json:"leader"`
}

// Condition is one of the Registration's conditions.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Updated string `json:"lastUpdateTime,omitempty"`
}

// LeaderLease is the operator's leader Lease: a live holder means an
// operator runs.
type LeaderLease struct {
	Name    string     `json:"name"`
	Access  Access     `json:"access"`
	Holder  string     `json:"holder,omitempty"`
	Renewed *time.Time `json:"renewed,omitempty"`
	Alive   bool       `json:"alive"`
}
