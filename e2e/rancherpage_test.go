package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/kube/kubetest"
	"github.com/rancher/registration-engine/job/operator"
)

// rancherUA is the User-Agent Steve's calls to the API server carry:
// Steve's client factory (rancher/steve pkg/client/factory.go at 7972270)
// builds client-go clients from Rancher's rest.Config, which sets none, so
// client-go's default applies, "<program>/<version> (<os>/<arch>)
// kubernetes/<commit>", and Rancher's program is rancher. With no
// fieldManager the API server records the part before the first "/".
const rancherUA = "rancher/v2.12.3 (linux/amd64) kubernetes/$Format"

// rancherAdmin is the Rancher user Steve impersonates for the person on the
// page: Rancher's admin, bound to cluster-admin as Rancher binds it.
const rancherAdmin = "user-x7k2p"

// personsCode is the code the person types into Rancher's registration page.
const personsCode = "PERSONS-OWN-CODE-0001"

// rancherPage makes the calls Rancher's registration page makes, through
// Steve, as the person (rancher/dashboard pkg/rancher-prime/pages/
// registration.composable.ts at 17ad8a6, registerOnline): ensureNamespace,
// then deleteSecret (find scc-registration, remove it, poll every 250 ms
// until it is gone, at most 30 s), then createSecret.
type rancherPage struct {
	cs kubernetes.Interface
}

// newRancherPage is the page's client: impersonating the person with the
// User-Agent Steve sends.
func (e *clusterEnv) newRancherPage(ctx context.Context, t *testing.T) rancherPage {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "globaladmin-" + rancherAdmin},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: rancherAdmin}},
	}
	_, err := e.Admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	require.True(t, err == nil || apierrors.IsAlreadyExists(err), "%v", err)
	t.Cleanup(func() {
		_ = e.Admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	cfg := rest.CopyConfig(e.Plane.Admin)
	cfg.UserAgent = rancherUA
	cfg.Impersonate = rest.ImpersonationConfig{UserName: rancherAdmin, Groups: []string{"system:authenticated", "system:cattle:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return rancherPage{cs: cs}
}

// deleteSecret is the page's ensureNamespace and deleteSecret.
func (p rancherPage) deleteSecret(ctx context.Context, t *testing.T) {
	t.Helper()
	_, err := p.cs.CoreV1().Namespaces().Get(ctx, operator.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	secrets := p.cs.CoreV1().Secrets(operator.Namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range list.Items {
		if s.Name == operator.SecretName {
			require.NoError(t, secrets.Delete(ctx, operator.SecretName, metav1.DeleteOptions{}))
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := secrets.Get(ctx, operator.SecretName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err)
}

// createSecret is the page's createSecret: a POST with no labels and no
// type, data regCode and registrationType.
func (p rancherPage) createSecret(ctx context.Context, t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := p.cs.CoreV1().Secrets(operator.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.SecretName, Namespace: operator.Namespace},
		Data:       map[string][]byte{"regCode": []byte(personsCode), "registrationType": []byte("online")},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "the page's create must not meet a Secret the engine recreated")
	return s
}

// testRancherPage: a person registers through Rancher's registration page
// on a cluster the engine registered. A run before the page's calls
// registers; a run between its delete and its create writes nothing and
// fails transient; the page's create succeeds; a run after it (the Job's
// retry) writes nothing and stops for a person, saying what happened and
// how to hand registration back; the hand-back works.
func (e *clusterEnv) testRancherPage(t *testing.T, c harness.Cloud) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	t.Cleanup(func() { e.DeleteSecret(context.Background(), t) })
	page := e.newRancherPage(ctx, t)
	status := func(t *testing.T) (int, string) {
		st := harness.RunEngine(t, ctx, []string{"KUBECONFIG=" + e.Plane.AdminKubeconfig, "HOME=" + t.TempDir()}, "status")
		line, _, _ := strings.Cut(st.Stdout, "\n")
		return st.Code, line
	}

	before := e.RunAs(ctx, t, c, e.Token(t), "run-before-page")
	require.Equal(t, job.ExitOK, before.Code, before.String())
	require.Equal(t, job.OutcomeRegistered, summary(t, before.Stderr)["outcome"])
	t.Logf("proved: before: the engine's run registered (exit %d, outcome %v)", before.Code, summary(t, before.Stderr)["outcome"])

	// The run that lands in the page's gap is one on a timer: the
	// CronJob's, named as the CronJob controller names its Jobs (a Job a
	// person starts writes at once, below).
	page.deleteSecret(ctx, t)
	scheduled := fmt.Sprintf("%s-%d", kube.CronJobName, time.Now().Unix()/60)
	between := e.RunAs(ctx, t, c, e.Token(t), "run-between-page", "JOB_NAME="+scheduled, "STARTUP_SLEEP_MAX=0")
	assert.Equal(t, job.ExitTransient, between.Code, between.String())
	s := summary(t, between.Stderr)
	assert.Equal(t, "write-secret", s["failedPhase"])
	betweenErr, _ := s["error"].(string)
	assert.Contains(t, betweenErr, "the registration secret was deleted since the last run: cattle-scc-system/scc-registration was deleted after the engine's last successful run")
	assert.Equal(t, "", e.SecretVersion(ctx, t), "the engine does not recreate what the page just deleted")
	betweenCode, betweenStatus := status(t)
	assert.Equal(t, job.ExitTransient, betweenCode, "status: not yet, the next attempt decides")
	assert.Contains(t, betweenStatus, "cattle-scc-system/scc-registration was deleted after the engine's last successful run")

	mine := page.createSecret(ctx, t)
	require.Len(t, mine.ManagedFields, 1)
	assert.Equal(t, operator.RancherManager, mine.ManagedFields[0].Manager, "the API server records Steve's User-Agent product")
	assert.Equal(t, metav1.ManagedFieldsOperationUpdate, mine.ManagedFields[0].Operation)
	assert.Equal(t, corev1.SecretTypeOpaque, mine.Type)

	after := e.RunAs(ctx, t, c, e.Token(t), "run-after-page")
	assert.Equal(t, job.ExitPermanent, after.Code, after.String())
	s = summary(t, after.Stderr)
	afterErr, _ := s["error"].(string)
	assert.Contains(t, afterErr, `another tool writes the registration secret: cattle-scc-system/scc-registration was registered by a person through Rancher's registration page with their own code (managedFields: "rancher" (Update) owns data keys regCode, registrationType), so the PAYG registration is not applied`)
	assert.Contains(t, afterErr, "to hand registration back to the engine")
	got := e.Secret(ctx, t)
	assert.Equal(t, mine.ResourceVersion, got.ResourceVersion, "the engine never writes the person's Secret")
	assert.Equal(t, personsCode, string(got.Data["regCode"]))
	afterCode, afterStatus := status(t)
	assert.Equal(t, job.ExitPermanent, afterCode)
	afterWhat, _, _ := strings.Cut(afterStatus, " — ")
	assert.Equal(t, `Not registered: cattle-scc-system/scc-registration was registered by a person through Rancher's registration page with their own code (managedFields: "rancher" (Update) owns data keys regCode, registrationType), so the PAYG registration is not applied`, afterWhat)

	// The hand-back the verdict names: delete the Secret, run the engine.
	require.NoError(t, e.Admin.CoreV1().Secrets(operator.Namespace).Delete(ctx, operator.SecretName, metav1.DeleteOptions{}))
	back := e.RunAs(ctx, t, c, e.Token(t), "run-hand-back")
	require.Equal(t, job.ExitOK, back.Code, back.String())
	harness.AssertRegistration(t, e.Secret(ctx, t), harness.DirectRegCode)

	// What the remedies tell a person to re-register (delete the Secret,
	// start a Job): a Job a person started writes at once, although the
	// run before it registered.
	require.NoError(t, e.Admin.CoreV1().Secrets(operator.Namespace).Delete(ctx, operator.SecretName, metav1.DeleteOptions{}))
	manual := e.RunAs(ctx, t, c, e.Token(t), "run-manual", "JOB_NAME="+kube.CronJobName+"-manual-"+strconv.FormatInt(time.Now().Unix(), 10))
	require.Equal(t, job.ExitOK, manual.Code, manual.String())
	harness.AssertRegistration(t, e.Secret(ctx, t), harness.DirectRegCode)
	if t.Failed() {
		return
	}
	t.Logf("proved: between the page's delete and its create: the scheduled run %s: exit %d, nothing written, error %q", scheduled, between.Code, betweenErr)
	t.Logf("proved: a Job a person started after deleting the Secret (as the remedies say) wrote it at once (exit %d, outcome %v)", manual.Code, summary(t, manual.Stderr)["outcome"])
	t.Logf("proved: status between: %s", betweenStatus)
	t.Logf("proved: the page's create then succeeded, field manager %q (%s), keys regCode and registrationType, type %s, no labels", mine.ManagedFields[0].Manager, mine.ManagedFields[0].Operation, mine.Type)
	t.Logf("proved: after: exit %d, the person's Secret untouched (resourceVersion %s, their code), error %q", after.Code, got.ResourceVersion, afterErr)
	t.Logf("proved: status after: %s", afterStatus)
	t.Logf("proved: hand-back: the Secret deleted, the next run registered (exit %d, outcome %v)", back.Code, summary(t, back.Stderr)["outcome"])
}

// racingSecrets is the engine's view of the Secrets with the page's create
// landing right after the engine's first read found none.
type racingSecrets struct {
	kube.SecretsGetter
	create func()
	once   *sync.Once
}

func (r racingSecrets) Secrets(ns string) kube.SecretInterface {
	return racingSecret{r.SecretsGetter.Secrets(ns), r}
}

type racingSecret struct {
	kube.SecretInterface
	r racingSecrets
}

func (s racingSecret) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	got, err := s.SecretInterface.Get(ctx, name, opts)
	if apierrors.IsNotFound(err) {
		s.r.once.Do(s.r.create)
	}
	return got, err
}

// testRancherPageRace: during first contact (no Secret, no successful run
// before) the page's create lands between the engine's read, which found
// none, and its write. The write that creates does not force: the
// person's Secret is a conflict, read again and refused, never overwritten.
func (e *clusterEnv) testRancherPageRace(t *testing.T) {
	ctx := harness.Context(t)
	e.DeleteSecret(ctx, t)
	t.Cleanup(func() { e.DeleteSecret(context.Background(), t) })
	page := e.newRancherPage(ctx, t)
	var mine *corev1.Secret
	store := &operator.SecretStore{
		Secrets: racingSecrets{SecretsGetter: kubetest.Typed(e.Admin), once: &sync.Once{}, create: func() { mine = page.createSecret(ctx, t) }},
		Sleep:   func(context.Context, time.Duration) error { return nil },
	}
	_, err := store.Write(ctx, operator.Values{URL: "https://" + harness.UpdateServer, RegCode: harness.DirectRegCode, InstanceData: "<document>x</document>", CertPEM: []byte("pem")})
	require.ErrorIs(t, err, operator.ErrSecretOtherWriter)
	require.NotNil(t, mine, "the page's create ran between the read and the write")
	got := e.Secret(ctx, t)
	assert.Equal(t, mine.ResourceVersion, got.ResourceVersion, "the person's Secret is never written")
	assert.Equal(t, personsCode, string(got.Data["regCode"]))
	for _, m := range got.ManagedFields {
		assert.NotEqual(t, "registration-engine", m.Manager)
	}
	if t.Failed() {
		return
	}
	what, _, _ := strings.Cut(err.Error(), "; ")
	t.Logf("proved: the page's create between the engine's read and its write: the creating apply (no force) conflicted, was read again and refused (%s); the person's Secret kept at resourceVersion %s", what, got.ResourceVersion)
}
