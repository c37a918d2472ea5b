package vaultseed

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// requestReconcile sets the object's annotation
// ohmlab.fr/reconcile-requested-at to value, as `kubectl annotate
// --overwrite` does.
func (f *fixture) requestReconcile(name, value string) {
	f.t.Helper()
	f.update(name, func(o *ohmlabv1alpha1.VaultSeed) {
		metav1.SetMetaDataAnnotation(&o.ObjectMeta, ohmlabv1alpha1.ReconcileRequestAnnotation, value)
	})
}

// waitHandled waits until the object's status says the reconcile request
// value was handled, and returns the object.
func (f *fixture) waitHandled(name, value string) *ohmlabv1alpha1.VaultSeed {
	f.t.Helper()
	var obj *ohmlabv1alpha1.VaultSeed
	NewWithT(f.t).Eventually(func() string {
		obj = f.get(name)
		return obj.Status.LastHandledReconcileAt
	}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(Equal(value), "status.lastHandledReconcileAt of %s", name)
	return obj
}

// A path of another object of the process, changed by hand (a key filled,
// another edited), is served to its dependents from what the process
// remembers of it until its own object reads it again, at its resync (an
// hour here): a RefPending dependent's retries and a Ready dependent see
// nothing. Asking for a reconcile of a dependent, or of the source's object,
// brings the change to every dependent at once: the dependent's request
// reads the source from Vault and, finding it changed, wakes the source's
// other dependents; the source object's own read finds the change and wakes
// them all. The keys written by hand stay on the source.
func TestReconcileRequestBringsAHandFilledSourceKey(t *testing.T) {
	tests := []struct {
		name     string
		annotate string
	}{
		{name: "the waiting dependent annotated", annotate: "grafana"},
		{name: "the source's object annotated", annotate: "keycloak"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{}) // resync 1 h
			src := f.path("keycloak")
			f.create(f.seed("keycloak", src, `{"admin": {"user": "admin"}}`))
			f.waitReady("keycloak")
			handWrite(t, src, map[string]any{"admin": map[string]any{"user": "admin", "email": "one@example.org"}})
			// loki copies a key a person keeps up to date, and is Ready:
			// only its resync, an hour away, would read the source again.
			f.create(f.seed("loki", f.path("loki"), `{"adminEmail": "<ref:`+src+`#admin.email>"}`))
			f.waitReady("loki")
			// grafana waits for a key that a person is to fill; its retries
			// are served what the process remembers of the source.
			f.create(f.seed("grafana", f.path("grafana"), `{"keycloakPassword": "<ref:`+src+`#admin.password>"}`))
			f.waitReason("grafana", ohmlabv1alpha1.ReasonRefPending, 20*time.Second)

			handWrite(t, src, map[string]any{"admin": map[string]any{"user": "admin", "email": "two@example.org", "password": "filled-by-hand"}})
			f.requestReconcile(tt.annotate, "1")
			f.waitReady("grafana")
			g.Expect(readPath(t, f.path("grafana")).Data["keycloakPassword"]).To(Equal("filled-by-hand"))
			g.Eventually(func() any { return readPath(t, f.path("loki")).Data["adminEmail"] }).
				WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(Equal("two@example.org"), "the other dependent follows at once")
			f.waitHandled(tt.annotate, "1")
			g.Expect(readPath(t, src).Data["admin"]).To(Equal(map[string]any{"user": "admin", "email": "two@example.org", "password": "filled-by-hand"}), "the keys written by hand are kept")
			g.Expect(f.emitted()).NotTo(ContainSubstring("filled-by-hand"), "no secret value in logs, events, status or metrics")
		})
	}
}

// kubectlRequestReconcile runs the commands of the chart README's "Asking
// for a reconcile": kubectl annotate, then kubectl wait for the status to
// name the value.
func (f *fixture) kubectlRequestReconcile(name, value string) {
	f.t.Helper()
	kubectl, err := harness.Bin("k8s/kubectl")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, args := range [][]string{
		{"annotate", "--overwrite", "vaultseed", name, ohmlabv1alpha1.ReconcileRequestAnnotation + "=" + value},
		{"wait", "vaultseed", name, "--for=jsonpath={.status.lastHandledReconcileAt}=" + value, "--timeout=20s"},
	} {
		args = append([]string{"--kubeconfig", cp.Kubeconfig, "-n", f.ns}, args...)
		if out, err := exec.Command(kubectl, args...).CombinedOutput(); err != nil {
			f.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// A version deleted by hand is found at the reconcile asked for, and the
// version undeleted too, each without waiting for the resync (an hour
// here); status.lastHandledReconcileAt names the request each status
// answers, which kubectl wait waits for.
func TestReconcileRequestAfterAFixInVault(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{}) // resync 1 h
	path := f.path("app")
	f.create(f.seed("app", path, `{"password": "<random:16>"}`))
	f.waitReady("app")
	before := readPath(t, path)
	g.Expect(f.get("app").Status.LastHandledReconcileAt).To(BeEmpty(), "no request, none handled")

	mount, rest, _ := strings.Cut(path, "/")
	g.Expect(vault.Client.KVv2(mount).Delete(context.Background(), rest)).To(Succeed())
	generation := f.get("app").Generation
	f.kubectlRequestReconcile("app", "1")
	obj := f.get("app")
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Reason).To(Equal(ohmlabv1alpha1.ReasonPathDeleted), "the status of the reconcile asked for")
	g.Expect(obj.Generation).To(Equal(generation), "an annotation is no spec change")

	g.Expect(vault.Client.KVv2(mount).Undelete(context.Background(), rest, []int{before.Version})).To(Succeed())
	f.kubectlRequestReconcile("app", "2")
	g.Expect(condition(f.get("app"), ohmlabv1alpha1.ConditionReady).Reason).To(Equal(ohmlabv1alpha1.ReasonReconciled), "the status of the reconcile asked for")
	g.Expect(readPath(t, path)).To(Equal(before), "the undeleted values are kept")
}

// Once its request is handled, an object's resyncs read its path and write
// nothing, to Vault or to the API server: the request is not handled again.
func TestAHandledReconcileRequestLeavesResyncsQuiet(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	path := f.path("app")
	f.create(f.seed("app", path, `{"password": "<random:16>"}`))
	f.waitReady("app")
	f.requestReconcile("app", "1")
	f.waitHandled("app", "1")

	var c pathCounter
	f.kv.setBefore(c.hook)
	defer f.kv.setBefore(nil)
	r0, c0 := f.quiescent(&c)
	rv, version := f.get("app").ResourceVersion, readPath(t, path).Version
	g.Eventually(func() int { return reconciles(t) - r0 }).WithTimeout(20*time.Second).Should(BeNumerically(">=", 3), "three resyncs")
	_, c1 := f.quiescent(&c)
	for _, op := range []string{"write", "mark", "delete"} {
		g.Expect(c1[op]-c0[op]).To(Equal(0), op)
	}
	obj := f.get("app")
	g.Expect(obj.ResourceVersion).To(Equal(rv), "no write to the API server")
	g.Expect(obj.Status.LastHandledReconcileAt).To(Equal("1"))
	g.Expect(readPath(t, path).Version).To(Equal(version))
}
