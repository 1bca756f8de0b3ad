package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/operator"
)

// TestStatusWaitAfterInstall: on a real kube-apiserver, `status` before the
// chart is installed says "the engine is not installed" (an API server that
// answers, no engine objects: not a wrong address), and `status --wait`
// started right after `helm install` waits through "Not registered yet" (the
// release's run in progress) to the first other verdict. No
// rancher/scc-operator runs here, so that verdict is that it has not
// adopted the Secret: the run has registered and written it. It runs on a
// plane of its own, as TestChartInstall's cases do: the chart owns objects
// the shared plane's overlay applies.
func TestStatusWaitAfterInstall(t *testing.T) {
	helm := testkit.Helm(t)
	t.Parallel() // a plane of its own
	p, e, ctx := aksPlane(t, 4*time.Minute)
	c := harness.StartCloud(t)
	status := func(ctx context.Context, args ...string) harness.Result {
		args = append([]string{"status",
			"--attestation-roots", filepath.Join(c.Dir, "attestation-roots.pem"),
			"--intermediates", filepath.Join(c.Dir, "attestation-intermediate.pem")}, args...)
		return harness.RunEngine(t, ctx, []string{"KUBECONFIG=" + p.AdminKubeconfig, "HOME=" + t.TempDir()}, args...)
	}
	verdict := func(res harness.Result) string { v, _, _ := strings.Cut(res.Stdout, "\n"); return v }

	before := status(ctx)
	assert.Equal(t, job.ExitPermanent, before.Code, "%s", before)
	assert.Regexp(t, `^Not registered: the engine is not installed: no CronJob cattle-scc-system/registration-engine — install it`, verdict(before), "%s", before)
	t.Logf("proved: on a real API server without the engine, status exits %d with %q", before.Code, verdict(before))

	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	e.StartKubelet(ctx, t, operator.Namespace, c)
	start := time.Now()
	runHelm(t, p, helm, append([]string{"install", "registration-engine", chart, "--namespace", operator.Namespace}, marketplaceValues(t, chart, c.Vars(), chartRegCode)...)...)
	installed := time.Since(start)
	res := status(ctx, "--wait", "--timeout", "3m", "--interval", "1s")
	waited := time.Since(start) - installed
	assert.Equal(t, job.ExitPermanent, res.Code, "%s", res)
	assert.Regexp(t, `^Not registered: rancher/scc-operator has not adopted scc-registration`, verdict(res), "%s", res)
	waits := regexp.MustCompile(`(?m)^waiting \(\S+ so far\): Not registered yet: `).FindAllString(res.Stderr, -1)
	assert.NotEmpty(t, waits, "status --wait waited through a not-yet verdict:\n%s", res.Stderr)
	t.Logf("proved: right after helm install (which took %s), status --wait waited %s through %d not-yet verdict(s) (first: %q) and exited %d with %q",
		installed.Round(time.Millisecond), waited.Round(time.Millisecond), len(waits), firstLine(res.Stderr), res.Code, verdict(res))
}

// firstLine is s's first line.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
