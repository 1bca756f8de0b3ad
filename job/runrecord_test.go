package job

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// TestRunRecordEscapesForeignText: the run record's error quotes a peer,
// and docs/troubleshoot.md has people print the annotation with kubectl
// -o jsonpath, or decode it with jq -r. Neither may hand a terminal an
// ESC sequence, a C1 control or a bidi override: the error is redacted,
// escaped and cut (escape.Record), as the Event's note is.
func TestRunRecordEscapesForeignText(t *testing.T) {
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kube.LeaseName, Namespace: operator.Namespace}})
	lease := &kube.Lease{Leases: kubetest.Typed(c), Namespace: operator.Namespace, Name: kube.LeaseName, Holder: "pod-1", Duration: time.Minute}
	j := newJob(&recorder{failAt: "find", failWith: errors.New("region server said \x1b[1A\x1b[2K\rRegistered\x1b]52;c;Y3VybA==\a \u009b2J \u202etxt.exe REGCODE-SECRET " + strings.Repeat("x", 2*retry.MaxError))}, &bytes.Buffer{})
	j.Lock, j.Runs, j.JobName = lease, lease, "registration-engine-29000000"
	_, _ = j.Run(context.Background())

	le, err := c.CoordinationV1().Leases(operator.Namespace).Get(context.Background(), kube.LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	raw := le.Annotations[kube.AnnotationLastRun]
	rec, ok, err := retry.Parse(le.Annotations[kube.AnnotationLastRun])
	require.NoError(t, err)
	require.True(t, ok)
	for _, s := range []string{raw, rec.Error} {
		for _, r := range s {
			assert.False(t, r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u202e', "control %U in %q", r, s)
		}
	}
	assert.Contains(t, rec.Error, `region server said \x1b[1A\x1b[2K\rRegistered\x1b]52;c;Y3VybA==\a \u009b2J \u202etxt.exe REDACTED`, "escaped, after the redaction")
	assert.NotContains(t, rec.Error, "REGCODE-SECRET")
	assert.LessOrEqual(t, len(rec.Error), retry.MaxError)
	assert.True(t, strings.HasSuffix(rec.Error, "..."), "a cut says so")
}
