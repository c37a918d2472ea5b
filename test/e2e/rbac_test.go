package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// behaviour is one thing the controller does that needs the Kubernetes
// API; check fails when it does not happen in time.
type behaviour struct {
	name  string
	check func(ctx context.Context, r *rbacRun) error
}

// rbacRun is one controller process started for TestRBACIsMinimal.
type rbacRun struct {
	env  *Env
	c    *Controller
	seed string // the VaultSeed this run creates
}

// behaviours are checked in this order; the first that fails names what a
// removed verb is needed for.
var behaviours = []behaviour{
	{"its cache syncs (/readyz)", func(ctx context.Context, r *rbacRun) error {
		if r.c == nil {
			return errors.New("not ready")
		}
		return nil
	}},
	{"it acquires its Lease", func(ctx context.Context, r *rbacRun) error {
		return poll(ctx, func(ctx context.Context) (bool, error) {
			l, err := r.env.lease(ctx)
			return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
		})
	}},
	{"it renews its Lease", func(ctx context.Context, r *rbacRun) error {
		return poll(ctx, func(ctx context.Context) (bool, error) {
			l, err := r.env.lease(ctx)
			return err == nil && l.Spec.RenewTime != nil && l.Spec.AcquireTime != nil && l.Spec.RenewTime.After(l.Spec.AcquireTime.Time), nil
		})
	}},
	{"it records the leader-election Event on its Lease", func(ctx context.Context, r *rbacRun) error {
		return poll(ctx, func(ctx context.Context) (bool, error) {
			l, err := r.env.lease(ctx)
			if err != nil || l.Spec.HolderIdentity == nil {
				return false, err
			}
			var list corev1.EventList
			if err := r.env.CP.Client.List(ctx, &list, client.InNamespace(ControllerNamespace)); err != nil {
				return false, err
			}
			return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
				return e.InvolvedObject.Kind == "Lease" && e.Reason == "LeaderElection" && e.Message == *l.Spec.HolderIdentity+" became leader"
			}), nil
		})
	}},
	{"it reads its CRD's revision (ohmlab_crd_revision_mismatch)", func(ctx context.Context, r *rbacRun) error {
		return poll(ctx, func(ctx context.Context) (bool, error) {
			_, body := httpGet(ctx, "http://"+r.c.MetricsAddr+"/metrics")
			return strings.Contains(body, `ohmlab_crd_revision_mismatch{crd="vaultseeds.ohmlab.fr"}`), nil
		})
	}},
	{"it removes a finalizer a VaultSeed no longer needs (allowDelete off)", func(ctx context.Context, r *rbacRun) error {
		seed := &ohmlabv1alpha1.VaultSeed{
			ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: r.seed, Finalizers: []string{ohmlabv1alpha1.Finalizer}},
			Spec: ohmlabv1alpha1.VaultSeedSpec{
				Path: "ohmlab/platforms/rbac/core/" + r.seed,
				Data: &apiextensionsv1.JSON{Raw: []byte(`{"admin":{"password":"<random:24>"}}`)},
			},
		}
		if err := r.env.CP.Client.Create(ctx, seed); err != nil {
			return err
		}
		return poll(ctx, func(ctx context.Context) (bool, error) {
			got := &ohmlabv1alpha1.VaultSeed{}
			err := r.env.CP.Client.Get(ctx, client.ObjectKeyFromObject(seed), got)
			return err == nil && len(got.Finalizers) == 0, err
		})
	}},
	{"a VaultSeed becomes Ready (status)", func(ctx context.Context, r *rbacRun) error {
		return poll(ctx, func(ctx context.Context) (bool, error) {
			got := &ohmlabv1alpha1.VaultSeed{}
			if err := r.env.CP.Client.Get(ctx, client.ObjectKey{Namespace: SeedNamespace, Name: r.seed}, got); err != nil {
				return false, err
			}
			return slices.ContainsFunc(got.Status.Conditions, func(c metav1.Condition) bool {
				return c.Type == ohmlabv1alpha1.ConditionReady && c.Status == metav1.ConditionTrue
			}), nil
		})
	}},
	{"it records an Event on the VaultSeed", func(ctx context.Context, r *rbacRun) error {
		return poll(ctx, func(ctx context.Context) (bool, error) {
			var list eventsv1.EventList
			if err := r.env.CP.Client.List(ctx, &list, client.InNamespace(SeedNamespace)); err != nil {
				return false, err
			}
			return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Kind == "VaultSeed" && e.Regarding.Name == r.seed
			}), nil
		})
	}},
	{"none of its Kubernetes API requests is refused (rest_client_requests_total)", func(ctx context.Context, r *rbacRun) error {
		// Last, for what the checks above cannot see: the reflector retries a
		// refused watch with a relist, so the cache still works, late.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			_, body := httpGet(ctx, "http://"+r.c.MetricsAddr+"/metrics")
			if strings.Contains(body, `rest_client_requests_total{code="403"`) {
				return errors.New("a request was refused (403)")
			}
			time.Sleep(500 * time.Millisecond)
		}
		return nil
	}},
}

// TestRBACIsMinimal installs the chart, then removes each verb of each
// rule of its Roles and ClusterRole in turn, runs the controller with what
// is left, and checks that a named behaviour then fails; with the whole
// RBAC every behaviour holds. A verb whose removal breaks nothing is
// excess: the test fails, naming it.
func TestRBACIsMinimal(t *testing.T) {
	ctx := context.Background()
	// The cache lists then watches, as against an API server without
	// watch-list streaming (or when a client falls back from it): with
	// watch-list it needs watch only, a subset.
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: 2 * time.Second, ControllerBin: controllerBin,
		ControllerEnv: []string{"KUBE_FEATURE_WatchListClient=false"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)

	// Which behaviour each verb is needed for, by Role (release-relative name) and rule.
	want := map[string]string{
		"Role/vault-operator-system/ohmlab-system-ohmlab-controller-vault vaultseeds.ohmlab.fr list":                                      "its cache syncs (/readyz)",
		"Role/vault-operator-system/ohmlab-system-ohmlab-controller-vault vaultseeds.ohmlab.fr watch":                                     "none of its Kubernetes API requests is refused (rest_client_requests_total)",
		"Role/vault-operator-system/ohmlab-system-ohmlab-controller-vault vaultseeds.ohmlab.fr patch":                                     "it removes a finalizer a VaultSeed no longer needs (allowDelete off)",
		"Role/vault-operator-system/ohmlab-system-ohmlab-controller-vault vaultseeds/status.ohmlab.fr patch":                              "a VaultSeed becomes Ready (status)",
		"Role/vault-operator-system/ohmlab-system-ohmlab-controller-vault events.events.k8s.io create":                                    "it records an Event on the VaultSeed",
		"Role/ohmlab-system/ohmlab-controller-vault-leader-election leases.coordination.k8s.io[ohmlab-controller-vault] get":              "it acquires its Lease",
		"Role/ohmlab-system/ohmlab-controller-vault-leader-election leases.coordination.k8s.io[ohmlab-controller-vault] update":           "it renews its Lease",
		"Role/ohmlab-system/ohmlab-controller-vault-leader-election leases.coordination.k8s.io create":                                    "it acquires its Lease",
		"Role/ohmlab-system/ohmlab-controller-vault-leader-election events create":                                                        "it records the leader-election Event on its Lease",
		"ClusterRole/ohmlab-system-ohmlab-controller-vault-crds customresourcedefinitions.apiextensions.k8s.io[vaultseeds.ohmlab.fr] get": "it reads its CRD's revision (ohmlab_crd_revision_mismatch)",
	}

	n := 0
	run := func(t *testing.T) string {
		t.Helper()
		n++
		// A fresh Lease each time, so that acquiring it needs create.
		if err := env.CP.Client.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ControllerNamespace, Name: LeaseName}}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		r := &rbacRun{env: env, seed: fmt.Sprintf("rbac-%d", n)}
		c, err := env.StartControllerWithin(ctx, 20*time.Second)
		if err == nil {
			r.c = c
			defer func() {
				c.Stop()
				if t.Failed() {
					t.Logf("controller logs:\n%s", c.Logs())
				}
			}()
		}
		for _, b := range behaviours {
			start := time.Now()
			bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := b.check(bctx, r)
			cancel()
			if err != nil {
				t.Logf("%q fails (%v, after %s)", b.name, err, time.Since(start).Round(100*time.Millisecond))
				return b.name
			}
			t.Logf("%q holds (%s)", b.name, time.Since(start).Round(100*time.Millisecond))
		}
		return ""
	}

	if failed := run(t); failed != "" {
		t.Fatalf("with the chart's RBAC, %q fails", failed)
	}
	got := map[string]string{}
	for _, o := range env.Objects {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
		var rules []rbacv1.PolicyRule
		var obj client.Object
		if o.GetKind() == "Role" {
			role := &rbacv1.Role{}
			obj = role
			if err := env.CP.Client.Get(ctx, key, role); err != nil {
				t.Fatal(err)
			}
			rules = role.Rules
		} else {
			cr := &rbacv1.ClusterRole{}
			obj = cr
			if err := env.CP.Client.Get(ctx, key, cr); err != nil {
				t.Fatal(err)
			}
			rules = cr.Rules
		}
		for i, rule := range rules {
			for _, verb := range rule.Verbs {
				name := ruleName(charttest.Key(o), rule, verb)
				t.Run(strings.ReplaceAll(name, "/", ":"), func(t *testing.T) {
					setRules(obj, withoutVerb(rules, i, verb))
					if err := env.CP.Client.Update(ctx, obj); err != nil {
						t.Fatal(err)
					}
					defer func() {
						setRules(obj, rules)
						if err := env.CP.Client.Update(ctx, obj); err != nil {
							t.Fatal(err)
						}
					}()
					failed := run(t)
					got[name] = failed
					switch {
					case failed == "":
						t.Errorf("without it every behaviour holds: remove it from templates/rbac.yaml")
					case failed != want[name]:
						t.Errorf("without it %q fails, want %q", failed, want[name])
					default:
						t.Logf("without it %q fails", failed)
					}
				})
			}
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok && !strings.Contains(flag.Lookup("test.run").Value.String(), "/") {
			t.Errorf("%s: the chart no longer grants it; update the test", name)
		}
	}
}

func ruleName(role string, rule rbacv1.PolicyRule, verb string) string {
	var res []string
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			s := r
			if g != "" {
				s += "." + g
			}
			if len(rule.ResourceNames) > 0 {
				s += "[" + strings.Join(rule.ResourceNames, ",") + "]"
			}
			res = append(res, s)
		}
	}
	return role + " " + strings.Join(res, ",") + " " + verb
}

func withoutVerb(rules []rbacv1.PolicyRule, i int, verb string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for j, r := range rules {
		r = *r.DeepCopy()
		if j == i {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
			if len(r.Verbs) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func setRules(obj client.Object, rules []rbacv1.PolicyRule) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		o.Rules = rules
	case *rbacv1.ClusterRole:
		o.Rules = rules
	}
}

func poll(ctx context.Context, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			return false, nil
		}
		return ok, nil
	})
}

// lease returns the Vault target's Lease.
func (e *Env) lease(ctx context.Context) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	return l, e.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: LeaseName}, l)
}
