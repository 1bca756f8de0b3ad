package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Option changes how New starts a plane. Every option is off by default, so
// a plane nobody asks more of starts and serves as fast as it can.
type Option func(*options)

type options struct {
	audit bool
}

// WithAuditLog has kube-apiserver write an audit log of every request to
// Plane.AuditLog: level Metadata for everything (who, which verb, which
// object, the answer's code, when; never a body, so no Secret's data),
// stage RequestReceived left out, JSON, one event a line, written before
// the request is answered (mode blocking), never rotated. ReadAudit reads
// it. It is for measuring what a workload costs the API server; the log
// grows by about a kilobyte a request, and writing it slows every request
// a little, which is why it is an option.
func WithAuditLog() Option { return func(o *options) { o.audit = true } }

// auditPolicy logs every request at level Metadata once it is answered.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`

// auditArgs writes the audit policy into dir and returns kube-apiserver's
// flags for a log at logPath.
func auditArgs(dir, logPath string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy, "--audit-log-path=" + logPath, "--audit-log-format=json",
		"--audit-log-mode=blocking",
		// 0: one file that is never rotated (the default rotates at
		// 100 MB, and the reader would miss the rotated part).
		"--audit-log-maxsize=0",
	}, nil
}

// AuditRecord is one request as the API server's audit log records it.
type AuditRecord struct {
	// ID is the request's audit ID.
	ID string
	// User is the authenticated user name (a ServiceAccount's is
	// system:serviceaccount:<namespace>:<name>); UserAgent what the client
	// sent.
	User, UserAgent string
	// Verb is the API server's: get, list, watch, create, update, patch,
	// delete, deletecollection (or the HTTP method's lower case for a
	// request that is not for a resource).
	Verb string
	// Resource, Subresource, Group, Namespace and Name name the object.
	// Name is empty for a collection, and for a create whose object is
	// named by generateName (the name is chosen after the audit records
	// the request; the Job controller's pods are created so).
	Resource, Subresource, Group, Namespace, Name string
	// URI is the request's path and query, for what names no resource.
	URI string
	// Code is the answer's HTTP status; 0 for a watch still open when the
	// log was read.
	Code int
	// Time is when the API server received the request.
	Time time.Time
}

// Write reports whether the request asks to change something (create,
// update, patch, delete, deletecollection), whether or not it did.
func (r AuditRecord) Write() bool {
	return slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, r.Verb)
}

// EventCreate reports whether the request created an Event (core/v1 or
// events.k8s.io/v1); an Event's repeat is a patch or update of the first.
func (r AuditRecord) EventCreate() bool {
	return r.Verb == "create" && r.Resource == "events" && r.Subresource == ""
}

// String is the record in one line: time, user, verb, object, code.
func (r AuditRecord) String() string {
	obj := r.Resource
	if r.Subresource != "" {
		obj += "/" + r.Subresource
	}
	if r.Name != "" {
		obj += " " + r.Name
	}
	if r.Namespace != "" {
		obj = r.Namespace + "/" + obj
	}
	if r.Resource == "" {
		obj = r.URI
	}
	return fmt.Sprintf("%s %s %s %s → %d", r.Time.UTC().Format("15:04:05.000"), r.User, r.Verb, obj, r.Code)
}

// auditEvent is the part of an audit.k8s.io/v1 Event that AuditRecord
// keeps (k8s.io/apiserver/pkg/apis/audit/v1, types.go).
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// ReadAudit reads an audit log written as WithAuditLog asks: one record a
// request, in the order the API server received them. A request logged at
// two stages (a watch: ResponseStarted, then ResponseComplete when it
// ends) is one record, with the code of its last stage. A line cut short
// at the end (the API server writing it as the log is read) is left out;
// any other line that does not parse is an error.
func ReadAudit(path string) ([]AuditRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	var (
		out   []AuditRecord
		index = map[string]int{}
		bad   error
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if bad != nil {
			return nil, bad // a bad line before another: not a cut-short end
		}
		var ev auditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			bad = fmt.Errorf("audit log %s line %d: %w", path, n, err)
			continue
		}
		rec := AuditRecord{
			ID: ev.AuditID, User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb,
			URI: ev.RequestURI, Time: ev.RequestReceivedTimestamp,
		}
		if o := ev.ObjectRef; o != nil {
			rec.Resource, rec.Subresource, rec.Group, rec.Namespace, rec.Name = o.Resource, o.Subresource, o.APIGroup, o.Namespace, o.Name
		}
		if ev.ResponseStatus != nil {
			rec.Code = ev.ResponseStatus.Code
		}
		if i, ok := index[rec.ID]; ok {
			if rec.Code != 0 {
				out[i].Code = rec.Code
			}
			continue
		}
		index[rec.ID] = len(out)
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	slices.SortStableFunc(out, func(a, b AuditRecord) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Audit reads the plane's audit log (ReadAudit); the plane must have been
// started WithAuditLog.
func (p *Plane) Audit() ([]AuditRecord, error) {
	if p.AuditLog == "" {
		return nil, fmt.Errorf("control plane: no audit log: start it with WithAuditLog")
	}
	return ReadAudit(p.AuditLog)
}
