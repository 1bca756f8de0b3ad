package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Audit lines as kube-apiserver v1.37.2 writes them at level Metadata
// (shortened: fields ReadAudit does not read are left out).
const (
	auditCreate = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/batch/v1/namespaces/ns/jobs","verb":"create","user":{"username":"system:serviceaccount:kube-system:cronjob-controller"},"userAgent":"kube-controller-manager/v1.37.2","objectRef":{"resource":"jobs","namespace":"ns","name":"r-29412345","apiGroup":"batch","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-12-07T15:00:00.100000Z","stageTimestamp":"2026-12-07T15:00:00.110000Z"}`
	// A pod named by generateName: no name at level Metadata.
	auditPodCreate     = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/pods","verb":"create","user":{"username":"system:serviceaccount:kube-system:job-controller"},"userAgent":"kube-controller-manager/v1.37.2","objectRef":{"resource":"pods","namespace":"ns","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-12-07T15:00:00.200000Z","stageTimestamp":"2026-12-07T15:00:00.210000Z"}`
	auditWatchStarted  = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","requestURI":"/api/v1/namespaces/ns/pods?watch=true","verb":"watch","user":{"username":"admin"},"userAgent":"controlplane-kubelet","objectRef":{"resource":"pods","namespace":"ns","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-12-07T15:00:00.000000Z","stageTimestamp":"2026-12-07T15:00:00.001000Z"}`
	auditWatchComplete = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/pods?watch=true","verb":"watch","user":{"username":"admin"},"userAgent":"controlplane-kubelet","objectRef":{"resource":"pods","namespace":"ns","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-12-07T15:00:00.000000Z","stageTimestamp":"2026-12-07T15:05:00.000000Z"}`
	auditEventCreate   = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"e1","stage":"ResponseComplete","requestURI":"/apis/events.k8s.io/v1/namespaces/ns/events","verb":"create","user":{"username":"system:serviceaccount:kube-system:cronjob-controller"},"objectRef":{"resource":"events","namespace":"ns","name":"r.187f","apiGroup":"events.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-12-07T15:00:00.150000Z","stageTimestamp":"2026-12-07T15:00:00.160000Z"}`
	auditHealthz       = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"h1","stage":"ResponseComplete","requestURI":"/readyz","verb":"get","user":{"username":"admin"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-12-07T14:59:59.000000Z","stageTimestamp":"2026-12-07T14:59:59.001000Z"}`
)

// TestReadAudit: the audit log read as one record a request, in the order
// the API server received them, with who, what, the answer's code and
// when; a line the API server is still writing at the end is left out, a
// bad line before others is an error.
func TestReadAudit(t *testing.T) {
	tests := map[string]struct {
		lines   []string
		want    []string // AuditRecord.String of each
		wantErr bool
	}{
		"one record a request, in the order received; a watch logged at two stages is one": {
			lines: []string{auditWatchStarted, auditCreate, auditPodCreate, auditEventCreate, auditWatchComplete, auditHealthz},
			want: []string{
				"14:59:59.000 admin get /readyz → 200",
				"15:00:00.000 admin watch ns/pods → 200",
				"15:00:00.100 system:serviceaccount:kube-system:cronjob-controller create ns/jobs r-29412345 → 201",
				"15:00:00.150 system:serviceaccount:kube-system:cronjob-controller create ns/events r.187f → 201",
				"15:00:00.200 system:serviceaccount:kube-system:job-controller create ns/pods → 201",
			},
		},
		"a last line cut short is left out": {
			lines: []string{auditCreate, auditPodCreate[:80]},
			want:  []string{"15:00:00.100 system:serviceaccount:kube-system:cronjob-controller create ns/jobs r-29412345 → 201"},
		},
		"a bad line before others is an error": {
			lines:   []string{auditPodCreate[:80], auditCreate},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o600))
			recs, err := ReadAudit(path)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, r := range recs {
				got = append(got, r.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestAuditRecordKinds: the classes the cost figures count by.
func TestAuditRecordKinds(t *testing.T) {
	at := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		rec                   AuditRecord
		wantWrite, wantCreate bool
	}{
		"an Event created":             {AuditRecord{Verb: "create", Resource: "events", Time: at}, true, true},
		"an Event's repeat, a patch":   {AuditRecord{Verb: "patch", Resource: "events", Name: "r.187f", Time: at}, true, false},
		"a pod's status":               {AuditRecord{Verb: "update", Resource: "pods", Subresource: "status", Name: "p", Time: at}, true, false},
		"a delete":                     {AuditRecord{Verb: "delete", Resource: "jobs", Name: "j", Time: at}, true, false},
		"a read":                       {AuditRecord{Verb: "get", Resource: "leases", Name: "l", Time: at}, false, false},
		"a watch":                      {AuditRecord{Verb: "watch", Resource: "events", Time: at}, false, false},
		"a token for a ServiceAccount": {AuditRecord{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: "sa", Time: at}, true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.wantWrite, tc.rec.Write())
			assert.Equal(t, tc.wantCreate, tc.rec.EventCreate())
		})
	}
}
