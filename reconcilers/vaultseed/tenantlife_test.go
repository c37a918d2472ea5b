package vaultseed

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// relisted is env with the tenant namespaces namespaces, as the controller
// sees them after a change of targets.vault.tenants.namespaces redeploys
// it: a new configuration and new tenant clients (no login carried over),
// on the same Vault and audit log.
func relisted(env *tenantEnv, namespaces []string) *tenantEnv {
	next := *env
	next.cfg.Namespaces = namespaces
	next.kv = NewTenantKV(next.cfg, vaultkv.Config{Address: vault.Addr, Timeout: 5 * time.Second}, harness.KubernetesAuthMount, cp.Client)
	return &next
}

// TestTenantRemovedFromTheListAndAddedAgain: a tenant namespace taken out
// of targets.vault.tenants.namespaces (the controller restarted with the
// new list) is no namespace of the controller's: a spec change, a
// reconcile request, a new object (in scope or not) and the deletion of an
// object with deletionPolicy Delete get no reconcile, no login and no
// Vault request (the audit log), so nothing is written or deleted, and the
// deleted object waits with its finalizer and its path. The other tenant
// and the platform namespace go on. Listed again, the namespace's objects
// are reconciled as any object after a restart: the change is written, the
// deletion removes the path, the new object goes Ready, and the object out
// of scope is Stalled OutOfScope with no request for its path.
func TestTenantRemovedFromTheListAndAddedAgain(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, func(c *tenancy.Config) { c.AllowDelete = true })
	prefixA := env.cfg.PrefixOf(nsA)
	first := startTenants(t, env, platform, controllerOptions{})
	a, b, p := first.in(nsA), first.in(nsB), first.in(platform)
	a.create(a.seed("app", prefixA+"app", `{"password":"<random:24>"}`))
	gone := a.seed("gone", prefixA+"gone", `{"password":"<random:24>"}`)
	gone.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	a.create(gone)
	b.create(b.seed("app", env.cfg.PrefixOf(nsB)+"app", `{"password":"<random:24>"}`))
	p.create(p.seed("core", "ohmlab/platforms/"+platform+"/core/app", `{"password":"<random:24>"}`))
	app := a.waitReady("app")
	g := NewWithT(t)
	g.Expect(controllerutil.ContainsFinalizer(a.waitReady("gone"), ohmlabv1alpha1.Finalizer)).To(BeTrue())
	b.waitReady("app")
	p.waitReady("core")
	appPath := readPath(t, prefixA+"app")

	// Redeployed without A.
	first.cancel()
	without := relisted(env, []string{nsB})
	seen := len(env.audit.requests())
	second := startTenants(t, without, platform, controllerOptions{})
	a, b, p = second.in(nsA), second.in(nsB), second.in(platform)
	a.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"password":"<random:24>","user":"<random:8>"}`)
	})
	a.requestReconcile("app", "unlisted")
	g.Expect(cp.Client.Delete(context.Background(), a.get("gone"))).To(Succeed())
	a.create(a.seed("new", prefixA+"new", `{"password":"<random:24>"}`))
	a.create(a.seed("escape", env.cfg.PrefixOf(nsB)+"escape", `{"password":"<random:24>"}`))
	// B and the platform object are reconciled after all of that.
	for _, q := range []*fixture{b, p} {
		name := map[*fixture]string{b: "app", p: "core"}[q]
		q.requestReconcile(name, "after-a")
		q.waitHandled(name, "after-a")
	}
	for _, e := range env.audit.requests()[seen:] {
		g.Expect(underPrefix(e.Path, prefixA)).To(BeFalse(), "%s %s while %s is not listed", e.Operation, e.Path, nsA)
		g.Expect(e.Namespace).NotTo(Equal(nsA), "a request by %s's login while it is not listed", nsA)
	}
	g.Expect(without.kv.Logins()).NotTo(HaveKey(nsA))
	unlisted := a.get("app")
	g.Expect(unlisted.Status).To(Equal(app.Status), "the status of %s/app while %s is not listed", nsA, nsA)
	terminating := a.get("gone")
	g.Expect(terminating.DeletionTimestamp).NotTo(BeNil())
	g.Expect(terminating.Finalizers).To(ContainElement(ohmlabv1alpha1.Finalizer))
	g.Expect(pathMissing(t, prefixA+"gone")).To(BeFalse(), "the path of the deleted object")
	g.Expect(readPath(t, prefixA+"app")).To(Equal(appPath))
	for _, name := range []string{"new", "escape"} {
		g.Expect(a.get(name).Status.Conditions).To(BeEmpty(), name)
	}

	// Redeployed with A again.
	second.cancel()
	again := relisted(env, []string{nsA, nsB})
	seen = len(env.audit.requests())
	third := startTenants(t, again, platform, controllerOptions{})
	a = third.in(nsA)
	g.Expect(a.waitReady("app").Status.LastHandledReconcileAt).To(Equal("unlisted"))
	g.Expect(readPath(t, prefixA+"app").Data).To(And(HaveKey("user"), HaveKeyWithValue("password", appPath.Data["password"])))
	g.Eventually(func() bool { return pathMissing(t, prefixA+"gone") }).WithTimeout(20 * time.Second).Should(BeTrue())
	a.waitReady("new")
	a.waitReason("escape", ohmlabv1alpha1.ReasonOutOfScope, 20*time.Second)
	g.Expect(again.kv.Logins()).To(Equal(map[string]int{nsA: 1}))
	for _, e := range env.audit.requests()[seen:] {
		g.Expect(underPrefix(e.Path, env.cfg.PrefixOf(nsB))).To(BeFalse(), "%s %s: a request for the object out of scope", e.Operation, e.Path)
	}
}

// deleteNamespace deletes a namespace as the API server and its namespace
// controller do (envtest runs no controller-manager): its VaultSeeds are
// deleted (each waiting for its finalizer, if any), then its
// ServiceAccounts, then the namespace, finalized and gone.
func deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(cp.Client.DeleteAllOf(ctx, &ohmlabv1alpha1.VaultSeed{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func() []ohmlabv1alpha1.VaultSeed {
		var list ohmlabv1alpha1.VaultSeedList
		g.Expect(cp.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}).WithTimeout(20 * time.Second).Should(BeEmpty())
	g.Expect(cp.Client.DeleteAllOf(ctx, &corev1.ServiceAccount{}, client.InNamespace(ns))).To(Succeed())
	obj := &corev1.Namespace{}
	g.Expect(cp.Client.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	g.Expect(cp.Client.Delete(ctx, obj)).To(Succeed())
	cs, err := kubernetes.NewForConfig(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cp.Client.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	obj.Spec.Finalizers = slices.DeleteFunc(obj.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	_, err = cs.CoreV1().Namespaces().Finalize(ctx, obj, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}).WithTimeout(20*time.Second).Should(BeTrue(), "namespace %s is gone", ns)
}

// TestTenantNamespaceDeletedAndCreatedAgain: a tenant namespace deleted
// (its objects Retain their paths) and created again under the same name
// is the same tenant: its name is what the list, the prefix and Vault's
// templated policy know. Its new objects inherit nothing of the old ones
// but the paths: an object of the same name is the owner the path's marker
// names and takes the path as an object created again does (no managed
// keys, so it prunes nothing: the old object's keys and a key typed by
// hand stay; existing keys are kept, only missing ones generated); an
// object of another name on a path the old namespace's object marked is
// OwnedByAnother, and the path is left as it was.
func TestTenantNamespaceDeletedAndCreatedAgain(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, nil)
	prefixA := env.cfg.PrefixOf(nsA)
	f := startTenants(t, env, platform, controllerOptions{})
	a := f.in(nsA)
	old := a.seed("app", prefixA+"app", `{"password":"<random:24>","user":"<random:8>"}`)
	old.Spec.Prune = true
	a.create(old)
	a.create(a.seed("old", prefixA+"old", `{"token":"<random:24>"}`))
	g := NewWithT(t)
	g.Expect(a.waitReady("app").Status.ManagedKeys).To(HaveLen(2))
	a.waitReady("old")
	handWrite(t, prefixA+"app", map[string]any{"typed": "by-hand", "password": readPath(t, prefixA+"app").Data["password"],
		"user": readPath(t, prefixA+"app").Data["user"]})
	before := map[string]kvPath{"app": readPath(t, prefixA+"app"), "old": readPath(t, prefixA+"old")}

	deleteNamespace(t, nsA)
	g.Expect(cp.EnsureNamespace(context.Background(), nsA)).To(Succeed())
	g.Expect(cp.EnsureServiceAccount(context.Background(), nsA, env.cfg.ServiceAccount)).To(Succeed())

	// The new app declares neither user nor typed, with prune on.
	again := a.seed("app", prefixA+"app", `{"password":"<random:24>","extra":"<random:8>"}`)
	again.Spec.Prune = true
	a.create(again)
	a.create(a.seed("other", prefixA+"old", `{"token":"<random:24>"}`))
	got := a.waitReady("app")
	var keys []string
	for _, k := range got.Status.ManagedKeys {
		keys = append(keys, k.Key)
	}
	g.Expect(keys).To(ConsistOf("extra"), "the new object's managed keys")
	after := readPath(t, prefixA+"app")
	for _, k := range []string{"password", "user", "typed"} {
		g.Expect(after.Data).To(HaveKeyWithValue(k, before["app"].Data[k]), "key %s of the path", k)
	}
	g.Expect(after.Data).To(HaveKey("extra"))
	g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, nsA+"/app"))

	other := a.waitReason("other", ohmlabv1alpha1.ReasonOwnedByAnother, 20*time.Second)
	g.Expect(condition(other, ohmlabv1alpha1.ConditionReady).Message).To(ContainSubstring(nsA + "/old"))
	g.Expect(readPath(t, prefixA+"old")).To(Equal(before["old"]))
}
