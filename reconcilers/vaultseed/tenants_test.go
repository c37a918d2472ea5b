package vaultseed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
)

// tenantNamespaces are two tenant namespaces and a platform namespace
// unique to the test.
func tenantNamespaces(t *testing.T) (a, b, platform string) {
	base := uniqueNamespace(t)
	return base + "-a", base + "-b", base + "-p"
}

// TestTenantObjectsUnderTheirOwnIdentity: the objects of two tenant
// namespaces go Ready, each written with its own namespace's Vault
// identity (a TokenRequest token of its ServiceAccount, logged in to the
// tenant role): Vault's audit log shows every request on a tenant's prefix
// or the shared source made by that tenant's login, none by the
// controller's own token, which writes the platform namespace's object as
// before; a tenant's <vault-password:> too is asked with its own login.
// One login per tenant, however many objects and reconciles.
func TestTenantObjectsUnderTheirOwnIdentity(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, nil)
	shared := sharedSource + nsA + "/ca"
	handWrite(t, shared, map[string]any{"pem": "shared-ca"})
	policy := nsA + "-db"
	if _, err := vault.Client.Logical().Write("sys/policies/password/"+policy, map[string]any{"policy": rulePolicy}); err != nil {
		t.Fatal(err)
	}
	generate := "sys/policies/password/" + policy + "/generate"
	f := startTenants(t, env, platform, controllerOptions{})

	for _, ns := range []string{nsA, nsB} {
		tf, prefix := f.in(ns), env.cfg.PrefixOf(ns)
		tf.create(tf.seed("db", prefix+"db", `{"user":"app","password":"<random:16>","admin":"<vault-password:`+policy+`>"}`))
		tf.create(tf.seed("app", prefix+"app", `{"password":"<random:24>","ca":"<ref:`+shared+`#pem>","db":"<ref:`+prefix+`db#password>"}`))
		tf.create(tf.seed("more", prefix+"more", `{"token":"<random:32>"}`))
	}
	p := f.in(platform)
	p.create(p.seed("core", "ohmlab/platforms/"+platform+"/core/keycloak", `{"password":"<random:24>"}`))
	for _, ns := range []string{nsA, nsB} {
		for _, name := range []string{"db", "app", "more"} {
			f.in(ns).waitReady(name)
			f.in(ns).requestReconcile(name, "again")
			f.in(ns).waitHandled(name, "again")
		}
	}
	p.waitReady("core")
	g := NewWithT(t)
	g.Expect(readPath(t, env.cfg.PrefixOf(nsA)+"app").Data).To(HaveKeyWithValue("ca", "shared-ca"))
	g.Expect(followsRulePolicy(readPath(t, env.cfg.PrefixOf(nsA)+"db").Data["admin"])).To(BeTrue(), "admin follows the Vault password policy")

	want := map[string]int{nsA: 1, nsB: 1}
	if diff := cmp.Diff(want, env.kv.Logins()); diff != "" {
		t.Errorf("TenantKV logins (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, env.audit.logins()); diff != "" {
		t.Errorf("logins in Vault's audit log (-want +got):\n%s", diff)
	}
	seen := map[string]int{}
	for _, e := range env.audit.requests() {
		switch {
		case e.Namespace != "":
			seen[e.Namespace]++
			if e.Path == generate {
				seen[e.Namespace+" generate"]++
				continue
			}
			if !underPrefix(e.Path, env.cfg.PrefixOf(e.Namespace)) && !underPrefix(e.Path, sharedSource) {
				t.Errorf("%s's login made %s %s", e.Namespace, e.Operation, e.Path)
			}
			if slices.Contains(e.Policies, controllerPolicy) {
				t.Errorf("%s's login carries the controller's policy: %v", e.Namespace, e.Policies)
			}
		case slices.Contains(e.Policies, controllerPolicy):
			seen["controller"]++
			if !underPrefix(e.Path, "ohmlab/platforms/"+platform+"/") {
				t.Errorf("the controller's token made %s %s", e.Operation, e.Path)
			}
		default:
			t.Errorf("%s %s by policies %v", e.Operation, e.Path, e.Policies)
		}
	}
	for _, who := range []string{nsA, nsB, "controller", nsA + " generate", nsB + " generate"} {
		g.Expect(seen).To(HaveKey(who), "no request by %s in the audit log", who)
	}
}

// TestVaultRefusesATenantOutsideItsPrefix: with the reconcile-time scope
// check off and the controller's own policy widened to the whole mount, a
// tenant's object that reaches outside its prefix (another tenant's path, a
// platform path, the shared source, a <ref:> to a platform object's path)
// is still refused by Vault (403, Forbidden): the requests are made with
// the tenant's login, never the controller's token, nothing is written,
// and what the process read of the platform path with its own token is
// not served to the tenant.
func TestVaultRefusesATenantOutsideItsPrefix(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, nil)
	f := startTenants(t, env, platform, controllerOptions{skipScopeCheck: true})
	source := "ohmlab/platforms/" + platform + "/core/source"
	p := f.in(platform)
	p.create(p.seed("source", source, `{"k":"<random:24>"}`))
	p.waitReady("source")

	prefixA := env.cfg.PrefixOf(nsA)
	tests := []struct{ name, path, data string }{
		{"other-tenant", env.cfg.PrefixOf(nsB) + "stolen", `{"password":"<random:24>"}`},
		{"platform", "ohmlab/platforms/" + platform + "/core/stolen", `{"password":"<random:24>"}`},
		{"shared", sharedSource + nsA + "/stolen", `{"password":"<random:24>"}`},
		{"ref-platform", prefixA + "copy", `{"copy":"<ref:` + source + `#k>"}`},
	}
	for _, tt := range tests {
		f.create(f.seed(tt.name, tt.path, tt.data))
	}
	f.create(f.seed("own", prefixA+"own", `{"password":"<random:24>"}`))
	f.waitReady("own")
	g := NewWithT(t)
	for _, tt := range tests {
		obj := f.waitReason(tt.name, ohmlabv1alpha1.ReasonForbidden, 20*time.Second)
		g.Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Message).To(ContainSubstring("403"), tt.name)
		g.Expect(pathMissing(t, tt.path)).To(BeTrue(), "%s: %s was written", tt.name, tt.path)
	}
	// The platform object reads its path again, now that a tenant's object
	// references it: the process remembers it; the tenant still reads it
	// from Vault, and is refused.
	p.requestReconcile("source", "again")
	p.waitHandled("source", "again")
	// A spec change, not a reconcile request: a request reads every
	// source from Vault anyway.
	f.update("ref-platform", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"copy":"<ref:` + source + `#k>","more":"<random:8>"}`)
	})
	f.waitReason("ref-platform", ohmlabv1alpha1.ReasonForbidden, 20*time.Second)
	g.Expect(pathMissing(t, prefixA+"copy")).To(BeTrue(), "the copy of the platform path was written")
	g.Expect(f.emitted()).NotTo(ContainSubstring(readPath(t, source).Data["k"].(string)))

	refused := map[string]bool{}
	for _, e := range env.audit.requests() {
		if slices.Contains(e.Policies, controllerPolicy) && strings.Contains(e.Path, "/tenants/") {
			t.Errorf("the controller's token made %s %s", e.Operation, e.Path)
		}
		for _, tt := range tests {
			if underPrefix(e.Path, tt.path) {
				g.Expect(e.Namespace).To(Equal(nsA), "%s %s made by policies %v", e.Operation, e.Path, e.Policies)
				refused[tt.name] = refused[tt.name] || strings.Contains(e.Error, "permission denied")
			}
		}
		// The source is the platform object's, read with the controller's
		// token for it, and with A's for the reference.
		if underPrefix(e.Path, source) && e.Namespace != "" {
			g.Expect(e.Namespace).To(Equal(nsA), "%s %s", e.Operation, e.Path)
			refused["ref-platform"] = refused["ref-platform"] || strings.Contains(e.Error, "permission denied")
		}
	}
	for _, tt := range tests {
		g.Expect(refused).To(HaveKeyWithValue(tt.name, true), "no refused request of %s by %s's login in the audit log", tt.name, nsA)
	}
}

// TestDeletingATenantsServiceAccount: once tenant A's ServiceAccount is
// deleted, A's next login is refused and its objects are Forbidden (within
// one Vault token life: the role's TTL here is a few seconds), while
// tenant B, logging in again, stays Ready; A's message names nothing of B.
func TestDeletingATenantsServiceAccount(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 3*time.Second, nil)
	f := startTenants(t, env, platform, controllerOptions{})
	a, b := f.in(nsA), f.in(nsB)
	a.create(a.seed("app", env.cfg.PrefixOf(nsA)+"app", `{"password":"<random:24>"}`))
	b.create(b.seed("app", env.cfg.PrefixOf(nsB)+"app", `{"password":"<random:24>"}`))
	a.waitReady("app")
	b.waitReady("app")

	g := NewWithT(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: env.cfg.ServiceAccount}}
	g.Expect(cp.Client.Delete(context.Background(), sa)).To(Succeed())
	var ready *metav1.Condition
	g.Eventually(func() string {
		value := fmt.Sprint(time.Now().UnixNano())
		a.requestReconcile("app", value)
		ready = condition(a.waitHandled("app", value), ohmlabv1alpha1.ConditionReady)
		return ready.Reason
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal(ohmlabv1alpha1.ReasonForbidden))
	g.Expect(ready.Message).To(ContainSubstring(`serviceaccounts "` + env.cfg.ServiceAccount + `" not found`))
	g.Expect(ready.Message).NotTo(ContainSubstring(nsB))

	// B is reconciled until it has logged in again since A's refusal
	// began, each time Ready.
	i := 0
	g.Eventually(func(g Gomega) {
		i++
		value := fmt.Sprint("b-", i)
		b.requestReconcile("app", value)
		obj := b.waitHandled("app", value)
		NewWithT(t).Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Reason).To(Equal(ohmlabv1alpha1.ReasonReconciled), "B after A's ServiceAccount was deleted")
		g.Expect(env.kv.Logins()[nsB]).To(BeNumerically(">=", 2), "B's logins")
	}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// TestTenantOutOfScopeStalls: objects created while admission is off (no
// webhook runs here) that reach outside their namespace's scope are
// Stalled OutOfScope before any Vault request: the audit log shows no
// request for their paths and the tenant never logs in. A <ref:> to a
// platform path gets the same message whether the path exists or not, and
// no message echoes the path refused. An object in scope then goes Ready.
func TestTenantOutOfScopeStalls(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, nil)
	exists, missing := "ohmlab/platforms/"+platform+"/core/exists", "ohmlab/platforms/"+platform+"/core/missing"
	handWrite(t, exists, map[string]any{"k": "v"})
	f := startTenants(t, env, platform, controllerOptions{})
	prefixA := env.cfg.PrefixOf(nsA)
	tests := []struct{ name, path, data, key string }{
		{"other-tenant", env.cfg.PrefixOf(nsB) + "x", `{"a":"<random:8>"}`, tenancy.KeyPath},
		{"platform", "ohmlab/platforms/" + platform + "/core/x", `{"a":"<random:8>"}`, tenancy.KeyPath},
		{"look-alike", "ohmlab/tenants/" + nsA + "b/x", `{"a":"<random:8>"}`, tenancy.KeyPath},
		{"the-prefix", strings.TrimSuffix(prefixA, "/"), `{"a":"<random:8>"}`, tenancy.KeyPath},
		{"ref-exists", prefixA + "r1", `{"x":"<ref:` + exists + `#k>"}`, "x"},
		{"ref-missing", prefixA + "r2", `{"x":"<ref:` + missing + `#k>"}`, "x"},
		{"ref-other-tenant", prefixA + "r3", `{"x":"<ref:` + env.cfg.PrefixOf(nsB) + `y#k>"}`, "x"},
		{"ref-unlisted-shared", prefixA + "r4", `{"x":"<ref:ohmlab/shared/private/ca#pem>"}`, "x"},
		{"delete", prefixA + "d", `{"a":"<random:8>"}`, tenancy.KeyDeletionPolicy},
	}
	for _, tt := range tests {
		obj := f.seed(tt.name, tt.path, tt.data)
		if tt.name == "delete" {
			obj.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
		}
		f.create(obj)
	}
	g := NewWithT(t)
	messages := map[string]string{}
	for _, tt := range tests {
		obj := f.waitReason(tt.name, ohmlabv1alpha1.ReasonOutOfScope, 20*time.Second)
		g.Expect(condition(obj, ohmlabv1alpha1.ConditionStalled)).NotTo(BeNil(), tt.name)
		msg := condition(obj, ohmlabv1alpha1.ConditionReady).Message
		g.Expect(msg).To(HavePrefix(tt.key+": "), tt.name)
		g.Expect(msg).NotTo(Or(ContainSubstring(platform), ContainSubstring(nsB)), tt.name)
		g.Expect(controllerutil.ContainsFinalizer(obj, ohmlabv1alpha1.Finalizer)).To(BeFalse(), tt.name)
		messages[tt.name] = msg
	}
	g.Expect(messages["ref-exists"]).To(Equal(messages["ref-missing"]))
	g.Expect(env.audit.requests()).To(BeEmpty(), "requests for objects out of scope")
	g.Expect(env.kv.Logins()).To(BeEmpty(), "a tenant logged in for objects out of scope")

	f.create(f.seed("ok", prefixA+"ok", `{"a":"<random:8>"}`))
	f.waitReady("ok")
	for _, e := range env.audit.requests() {
		g.Expect(underPrefix(e.Path, prefixA+"ok")).To(BeTrue(), "%s %s", e.Operation, e.Path)
	}
}

// TestTenantAdoption: a path of a tenant's prefix written before its
// object, without an owner marker, is adopted only when
// targets.vault.tenants.allowAdoption says so; otherwise the object is
// Stalled OutOfScope and the path is left as it was: no marker, no write.
func TestTenantAdoption(t *testing.T) {
	for name, allow := range map[string]bool{"refused": false, "allowed": true} {
		t.Run(name, func(t *testing.T) {
			nsA, nsB, platform := tenantNamespaces(t)
			env := setUpTenants(t, []string{nsA, nsB}, 0, func(c *tenancy.Config) { c.AllowAdoption = allow })
			path := env.cfg.PrefixOf(nsA) + "legacy"
			handWrite(t, path, map[string]any{"password": "typed-by-hand"})
			f := startTenants(t, env, platform, controllerOptions{})
			f.create(f.seed("legacy", path, `{"password":"<random:24>","user":"app"}`))
			g := NewWithT(t)
			if !allow {
				obj := f.waitReason("legacy", ohmlabv1alpha1.ReasonOutOfScope, 20*time.Second)
				g.Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Message).To(ContainSubstring("adopting a path is not allowed in tenant namespaces"))
				got := readPath(t, path)
				g.Expect(got.Version).To(Equal(1))
				g.Expect(got.Metadata).NotTo(HaveKey(ohmlabv1alpha1.OwnerMetadataKey))
				g.Expect(got.Data).To(Equal(map[string]any{"password": "typed-by-hand"}))
				return
			}
			f.waitReady("legacy")
			got := readPath(t, path)
			g.Expect(got.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, nsA+"/legacy"))
			g.Expect(got.Data).To(HaveKeyWithValue("password", "typed-by-hand"))
		})
	}
}

// TestTenantOwnedByAnother: a tenant's object on a path that carries the
// owner marker of another namespace's object is OwnedByAnother with a
// message (and event) that names neither that namespace nor that object;
// an owner of its own namespace is named, as for platform objects.
func TestTenantOwnedByAnother(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, nil)
	prefixA := env.cfg.PrefixOf(nsA)
	handWrite(t, prefixA+"taken", map[string]any{"k": "v"})
	handMark(t, prefixA+"taken", map[string]any{ohmlabv1alpha1.OwnerMetadataKey: nsB + "/holder"})
	handWrite(t, prefixA+"sibling", map[string]any{"k": "v"})
	handMark(t, prefixA+"sibling", map[string]any{ohmlabv1alpha1.OwnerMetadataKey: nsA + "/holder"})
	f := startTenants(t, env, platform, controllerOptions{})
	f.create(f.seed("taken", prefixA+"taken", `{"a":"<random:8>"}`))
	f.create(f.seed("sibling", prefixA+"sibling", `{"a":"<random:8>"}`))

	g := NewWithT(t)
	taken := f.waitReason("taken", ohmlabv1alpha1.ReasonOwnedByAnother, 20*time.Second)
	msg := condition(taken, ohmlabv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("an object outside this namespace"))
	g.Expect(msg + strings.Join(f.events("taken"), "\n")).NotTo(Or(ContainSubstring(nsB), ContainSubstring("holder")))
	sibling := f.waitReason("sibling", ohmlabv1alpha1.ReasonOwnedByAnother, 20*time.Second)
	g.Expect(condition(sibling, ohmlabv1alpha1.ConditionReady).Message).To(ContainSubstring(nsA + "/holder"))
}

// TestOutOfScopeReason: the condition reason is the one the admission
// refusals carry.
func TestOutOfScopeReason(t *testing.T) {
	if ohmlabv1alpha1.ReasonOutOfScope != tenancy.ReasonOutOfScope {
		t.Errorf("api's ReasonOutOfScope %q, tenancy's %q", ohmlabv1alpha1.ReasonOutOfScope, tenancy.ReasonOutOfScope)
	}
}

// TestTenantDeletionPolicyDelete: with targets.vault.tenants.allowDelete
// (and the chart's tenant-policy-allow-delete.hcl on the tenant role), a
// tenant's object with deletionPolicy Delete gets the finalizer, and its
// deletion removes its path with the tenant's own login.
func TestTenantDeletionPolicyDelete(t *testing.T) {
	nsA, nsB, platform := tenantNamespaces(t)
	env := setUpTenants(t, []string{nsA, nsB}, 0, func(c *tenancy.Config) { c.AllowDelete = true })
	f := startTenants(t, env, platform, controllerOptions{})
	path := env.cfg.PrefixOf(nsA) + "gone"
	obj := f.seed("gone", path, `{"a":"<random:8>"}`)
	obj.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	f.create(obj)
	g := NewWithT(t)
	g.Expect(controllerutil.ContainsFinalizer(f.waitReady("gone"), ohmlabv1alpha1.Finalizer)).To(BeTrue())
	g.Expect(cp.Client.Delete(context.Background(), f.get("gone"))).To(Succeed())
	g.Eventually(func() bool { return pathMissing(t, path) }).WithTimeout(20 * time.Second).Should(BeTrue())
	var deletes []string
	for _, e := range env.audit.requests() {
		if e.Operation == "delete" {
			deletes = append(deletes, e.Namespace+" "+e.Path)
		}
	}
	mount, rest, _ := strings.Cut(path, "/")
	g.Expect(deletes).To(Equal([]string{nsA + " " + mount + "/metadata/" + rest}))
}
