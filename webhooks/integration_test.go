package webhooks_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// kubectl runs the built kubectl against the control plane, with stdin,
// and returns its combined output.
type kubectl struct {
	bin, kubeconfig string
}

func (k kubectl) run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (k kubectl) apply(ctx context.Context, manifest string) (string, error) {
	return k.run(ctx, manifest, "apply", "-f", "-")
}

// hashed is data (YAML) declaring n passwords, each with its bcrypt hash.
func hashed(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "p%03d: \"<random:16>\"\nh%03d: \"<bcrypt:p%03d>\"\n", i, i, i)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// manifest writes one VaultSeed; spec is YAML indented by four spaces.
func manifest(namespace, name, spec string) string {
	return fmt.Sprintf("apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", name, namespace, spec)
}

// TestAdmission runs the webhook against a real API server: the
// ValidatingWebhookConfiguration controller-gen writes into config/webhook,
// installed by envtest, calls a manager's webhook server, and kubectl
// applies the objects.
func TestAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const secret = "s3cr3t-typed-by-hand"
	const elsewhere = "elsewhere"
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	bin, err := harness.Bin("k8s/kubectl")
	g.Expect(err).NotTo(HaveOccurred())
	k := kubectl{bin: bin, kubeconfig: cp.Kubeconfig}
	g.Expect(cp.EnsureNamespace(ctx, ns)).To(Succeed())
	g.Expect(cp.EnsureNamespace(ctx, elsewhere)).To(Succeed())

	// Before the webhook exists: an invalid object that carries the
	// controller's finalizer.
	legacy := seed("legacy", "ohmlab/platforms/test/core/legacy", `{"a.b":"x"}`)
	legacy.Finalizers = []string{ohmlabv1alpha1.Finalizer}
	g.Expect(cp.Client.Create(ctx, legacy)).To(Succeed())

	install := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(harness.RepoRoot(), "config", "webhook")}}
	g.Expect(install.Install(cp.Config)).To(Succeed())
	t.Cleanup(func() { _ = install.Cleanup() })

	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  ctrlcache.Options{DefaultNamespaces: map[string]ctrlcache.Config{ns: {}}},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: install.LocalServingHost, Port: install.LocalServingPort, CertDir: install.LocalServingCertDir,
		}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seedindex.IndexFields(ctx, mgr)).To(Succeed())
	g.Expect(webhooks.SetupWithManager(mgr, []string{ns})).To(Succeed())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	valid := manifest(ns, "a", "    path: ohmlab/platforms/test/core/a\n    data:\n      admin:\n        password: \"<random:24>\"\n        hash: \"<bcrypt:admin.password>\"\n      k: \"<random:8>\"\n")
	g.Eventually(func() (string, error) {
		return k.run(ctx, valid, "apply", "--dry-run=server", "-f", "-")
	}, time.Minute, 200*time.Millisecond).Should(ContainSubstring("(server dry run)"), "the webhook server answers")

	// cached waits until the manager's cache holds n objects on path, so
	// that the webhook sees them.
	cached := func(g Gomega, path string, n int) {
		g.Eventually(func() (int, error) {
			var list ohmlabv1alpha1.VaultSeedList
			err := mgr.GetCache().List(ctx, &list, client.MatchingFields{seedindex.IndexPath: path})
			return len(list.Items), err
		}, 10*time.Second, 50*time.Millisecond).Should(Equal(n))
	}

	t.Run("each kind of bad object is refused at once with a message naming the key", func(t *testing.T) {
		tests := []struct {
			name     string
			data     string
			rotate   string
			wantKeys []string
			want     string // a message the denial holds, when set
		}{
			{name: "malformed template", data: "admin:\n  password: \"<random:0>\"", wantKeys: []string{"admin.password"}},
			{name: "unknown template", data: "admin:\n  password: \"<Random:8>\"", wantKeys: []string{"admin.password"}},
			{name: "a template is shown as typed, with what is expected", data: "admin:\n  password: \"<RANDOM:12>\"\n  ref: \"<ref:noslash>\"", wantKeys: []string{"admin.password", "admin.ref"},
				want: `admin.password: Invalid value: template kinds are lowercase: write "<random:12>", found "<RANDOM:12>"`},
			{name: "key name with a dot", data: "\"admin.password\": \"<random:8>\"", wantKeys: []string{"admin.password"}},
			{name: "empty key name", data: "admin:\n  \"\": x", wantKeys: []string{"admin"}},
			{name: "list leaf", data: "hosts: [a, b]", wantKeys: []string{"hosts"}},
			{name: "bcrypt of an undeclared key", data: "hash: \"<bcrypt:admin.password>\"", wantKeys: []string{"hash"}},
			{name: "bcrypt of a map", data: "admin:\n  password: x\nhash: \"<bcrypt:admin>\"", wantKeys: []string{"hash"}},
			{name: "bcrypt of a value longer than 72 bytes", data: "p: \"<random:100>\"\nhash: \"<bcrypt:p>\"", wantKeys: []string{"hash"}},
			{name: "age public without secret", data: "pub: \"<age:public>\"", wantKeys: []string{"pub"}},
			{name: "two age secrets", data: "s1: \"<age:secret>\"\ns2: \"<age:secret>\"", wantKeys: []string{"s1", "s2"}},
			{name: "ssh public without private", data: "pub: \"<ssh:public>\"", wantKeys: []string{"pub"},
				want: "pub: Invalid value: <ssh:public> needs an <ssh:private> in the same object"},
			{name: "two ssh privates", data: "s1: \"<ssh:private>\"\ns2: \"<ssh:private>\"", wantKeys: []string{"s1", "s2"},
				want: "s1: Invalid value: an object holds at most one <ssh:private>, found 2 (s1, s2)"},
			{name: "rotation of the ssh public", data: "s: \"<ssh:private>\"\np: \"<ssh:public>\"", rotate: "token: \"1\"\nkeys: [p]", wantKeys: []string{"p"},
				want: "p: Invalid value: rotate.keys names an <ssh:public>: list its <ssh:private> instead, the pair rotates together"},
			{name: "cycle of keys within the path", data: "a: \"<ref:ohmlab/platforms/test/core/bad#b>\"\nb: \"<ref:ohmlab/platforms/test/core/bad#a>\"", wantKeys: []string{"a", "b"}},
			{name: "rotation key not declared", data: "p: \"<random:8>\"", rotate: "token: \"1\"\nkeys: [q]", wantKeys: []string{"q"}},
			{name: "rotation key not generated", data: "p: " + secret, rotate: "token: \"1\"\nkeys: [p]", wantKeys: []string{"p"}},
			{name: "a password too short for its classes", data: "db:\n  password: \"<password:3:upper,lower,digit,symbol>\"", wantKeys: []string{"db.password"},
				want: `db.password: Invalid value: the length N of <password:N:classes> must be at least its number of classes, to hold one character of each (<password:N> has 3: upper, lower, digit), found "<password:3:upper,lower,digit,symbol>"`},
			{name: "a password with an unknown class, an empty symbol set, over 4096", data: "a: \"<password:16:upper,capital>\"\nb: \"<password:16:symbol=>\"\nc: \"<password:5000>\"", wantKeys: []string{"a", "b", "c"},
				want: `b: Invalid value: symbol=CHARS of <password:N:classes> needs one or more symbols after '=', found "<password:16:symbol=>"`},
			{name: "a Vault password policy name that is a path", data: "db:\n  password: \"<vault-password:a/b>\"", wantKeys: []string{"db.password"},
				want: `db.password: Invalid value: <vault-password:policy> needs the name of a Vault password policy: 1 to 128 letters, digits, '.', '_' and '-', not '.' or '..', found "<vault-password:a/b>"`},
			{name: "several problems in one message", data: "a.b: x\nt: \"<hex:3>\"\nl: [1]", wantKeys: []string{"a.b", "l", "t"}},
			{name: "more bcrypt hashes than one reconcile computes", data: hashed(templating.MaxCostlyKeys + 1), wantKeys: []string{"spec.data"},
				want: "spec.data: Invalid value: declares 101 bcrypt hashes and key pairs, more than the 100 one object may"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				g := NewWithT(t)
				name := fmt.Sprintf("bad-%d", i)
				spec := "path: ohmlab/platforms/test/core/" + name + "\ndata:\n" + indent(strings.ReplaceAll(tt.data, "core/bad#", "core/"+name+"#"), "  ")
				if tt.rotate != "" {
					spec += "rotate:\n" + indent(tt.rotate, "  ")
				}
				out, err := k.apply(ctx, manifest(ns, name, indent(spec, "    ")))
				g.Expect(err).To(HaveOccurred(), out)
				// kubectl prints the Invalid status by its causes.
				_, denial, found := strings.Cut(out, fmt.Sprintf(`The VaultSeed %q is invalid: `, name))
				g.Expect(found).To(BeTrue(), "the denial names the object: %s", out)
				for _, key := range tt.wantKeys {
					g.Expect(denial).To(ContainSubstring(key + ": Invalid value: "))
				}
				g.Expect(denial).To(ContainSubstring(tt.want))
				g.Expect(denial).NotTo(ContainSubstring(secret))
			})
		}
	})

	t.Run("a null leaf is refused when sent; kubectl apply drops it before sending", func(t *testing.T) {
		g := NewWithT(t)
		s := seed("nullleaf", "ohmlab/platforms/test/core/nullleaf", `{"webhook":null,"k":"<random:8>"}`)
		g.Expect(cp.Client.Create(ctx, s)).To(MatchError(ContainSubstring(`denied the request: VaultSeed.ohmlab.fr "nullleaf" is invalid: webhook: Invalid value: null is not a value`)))

		out, err := k.apply(ctx, manifest(ns, "nullleaf", "    path: ohmlab/platforms/test/core/nullleaf\n    data:\n      webhook: null\n      k: \"<random:8>\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		got := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), got)).To(Succeed())
		g.Expect(string(got.Spec.Data.Raw)).To(MatchJSON(`{"k":"<random:8>"}`))
	})

	t.Run("a valid object is admitted, a surprising one with a warning", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, valid)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/a created"))
		g.Expect(out).NotTo(ContainSubstring("Warning"))

		out, err = k.apply(ctx, manifest(ns, "plain", "    path: ohmlab/platforms/test/core/plain\n    data:\n      webhook: \"\"\n    rotate:\n      token: \"1\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Warning: spec.rotate: rotate has no keys and data declares no generated key"))

		// A template with white space around it would be written as text.
		out, err = k.apply(ctx, manifest(ns, "spaced", "    path: ohmlab/platforms/test/core/spaced\n    data:\n      a: \" <random:8>\"\n      b: \"<uuid> \"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/spaced created"))
		g.Expect(out).To(ContainSubstring("Warning: a: is plain text, not the template <random:8>: with the white space around it the controller writes the text as it is"))
		g.Expect(out).To(ContainSubstring("Warning: b: is plain text, not the template <uuid>:"))

		// Text around a <ref:> is a composed value: admitted, no warning.
		out, err = k.apply(ctx, manifest(ns, "composed", "    path: ohmlab/platforms/test/core/composed\n    data:\n      url: \"postgres://app:<ref:ohmlab/platforms/test/core/db#password>@db:5432/app\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/composed created"))
		g.Expect(out).NotTo(ContainSubstring("Warning"))

		// A template never closed is stored as its text: kubectl shows why,
		// and the template to write.
		out, err = k.apply(ctx, manifest(ns, "unclosed", "    path: ohmlab/platforms/test/core/unclosed\n    data:\n      c: \"<random:12\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/unclosed created"))
		g.Expect(out).To(ContainSubstring("Warning: c: is plain text, the template <random:12> without its closing '>': it is stored in Vault literally, as typed, not generated; write <random:12> to generate the value"))

		// A path copied from `vault kv get`'s "Secret Path" names another
		// secret than the one meant (a secret may be named data, so it is
		// admitted): kubectl shows why, and the path to write.
		out, err = k.apply(ctx, manifest(ns, "apipath", "    path: ohmlab/data/platforms/test/core/apipath\n    data:\n      k: \"<random:8>\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/apipath created"))
		g.Expect(out).To(ContainSubstring(`Warning: spec.path: ohmlab/data/platforms/test/core/apipath has data/ after the mount, as KV v2's API path does (vault kv prints it as "Secret Path"), ` +
			"but a VaultSeed's path is <mount>/<path> without it: the controller adds data/ itself and would use ohmlab/data/data/platforms/test/core/apipath, " +
			"which its policy usually does not cover (permission denied). Write ohmlab/platforms/test/core/apipath, unless the secret's own path does begin with data/"))

		// A rotate block without keys regenerates a key pair with the rest.
		out, err = k.apply(ctx, manifest(ns, "rotateall", "    path: ohmlab/platforms/test/core/rotateall\n    data:\n      pw: \"<random:8>\"\n      deploy:\n        private: \"<ssh:private>\"\n        public: \"<ssh:public>\"\n    rotate:\n      token: \"1\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/rotateall created"))
		g.Expect(out).To(ContainSubstring("Warning: spec.rotate: rotate has no keys, so a new token regenerates every generated key, the private keys deploy.private (<ssh:private>) included, " +
			"and their public keys with them: what was encrypted to the old age key, or trusts the old SSH key, stops working. List the keys to regenerate in rotate.keys (a private key only when its pair must change)"))
	})

	t.Run("a path that is not one Vault path is refused with the one message", func(t *testing.T) {
		g := NewWithT(t)
		// The CRD refuses spec.path before the webhook is called...
		out, err := k.apply(ctx, manifest(ns, "dots", "    path: ohmlab/platforms/test/core/../other\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(`spec.path: Invalid value: "ohmlab/platforms/test/core/../other": ` + templating.PathMessage))
		// ...and the webhook the path of a reference.
		out, err = k.apply(ctx, manifest(ns, "refdots", "    path: ohmlab/platforms/test/core/refdots\n    data:\n      k: \"<ref:ohmlab/platforms/test/core/../a#k>\"\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(`The VaultSeed "refdots" is invalid: k: Invalid value: the path of <ref:mount/path#key.path> ` + templating.PathMessage))
	})

	t.Run("a second object on the same path is refused", func(t *testing.T) {
		g := NewWithT(t)
		cached(g, "ohmlab/platforms/test/core/a", 1)
		out, err := k.apply(ctx, manifest(ns, "a2", "    path: ohmlab/platforms/test/core/a\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(`The VaultSeed "a2" is invalid: spec.path: Invalid value: path ohmlab/platforms/test/core/a is also declared by vault-operator-system/a`))
	})

	t.Run("an object closing a reference ring is refused", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range []string{
			manifest(ns, "r1", "    path: ohmlab/platforms/test/core/r1\n    data:\n      k: \"<ref:ohmlab/platforms/test/core/r2#k>\"\n"),
			manifest(ns, "r2", "    path: ohmlab/platforms/test/core/r2\n    data:\n      k: \"<ref:ohmlab/platforms/test/core/r3#k>\"\n"),
		} {
			out, err := k.apply(ctx, m)
			g.Expect(err).NotTo(HaveOccurred(), out)
		}
		cached(g, "ohmlab/platforms/test/core/r1", 1)
		cached(g, "ohmlab/platforms/test/core/r2", 1)
		out, err := k.apply(ctx, manifest(ns, "r3", "    path: ohmlab/platforms/test/core/r3\n    data:\n      k: \"<ref:ohmlab/platforms/test/core/r1#k>\"\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(`The VaultSeed "r3" is invalid: k: Invalid value: reference cycle: ohmlab/platforms/test/core/r1 -> ohmlab/platforms/test/core/r2 -> ohmlab/platforms/test/core/r3 -> ohmlab/platforms/test/core/r1`))
	})

	t.Run("changing spec.path is refused", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, manifest(ns, "a", "    path: ohmlab/platforms/test/core/moved\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("spec.path is immutable"))
	})

	t.Run("a changed template is admitted with a warning", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, strings.Replace(valid, "<random:8>", "<random:16>", 1))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Warning: k: now declared as <random:16>, but the controller seeds once"))
	})

	t.Run("an object outside the watched namespaces is not analysed", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, manifest(elsewhere, "bad", "    path: ohmlab/platforms/test/core/bad\n    data:\n      a.b: x\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
	})

	t.Run("an object created while the webhook was absent can be updated in metadata and status, and deleted", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.run(ctx, "", "-n", ns, "patch", "vaultseed", "legacy", "--type", "merge", "-p", `{"spec":{"prune":true}}`)
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(`The VaultSeed "legacy" is invalid: a.b: Invalid value: key name "a.b" contains a dot`), "a spec change is analysed")

		out, err = k.run(ctx, "", "-n", ns, "label", "vaultseed", "legacy", "team=core")
		g.Expect(err).NotTo(HaveOccurred(), out)

		got := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(legacy), got)).To(Succeed())
		got.Status.Conditions = []metav1.Condition{{Type: ohmlabv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: "a.b: key name contains a dot", LastTransitionTime: metav1.Now()}}
		g.Expect(cp.Client.Status().Update(ctx, got)).To(Succeed())

		out, err = k.run(ctx, "", "-n", ns, "delete", "vaultseed", "legacy", "--wait=false")
		g.Expect(err).NotTo(HaveOccurred(), out)
		out, err = k.run(ctx, "", "-n", ns, "patch", "vaultseed", "legacy", "--type", "merge", "-p", `{"metadata":{"finalizers":null}}`)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Eventually(func() error {
			err := cp.Client.Get(ctx, client.ObjectKeyFromObject(legacy), &ohmlabv1alpha1.VaultSeed{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("the object is still there (%v)", err)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	})
}

// indent prefixes every line of s and ends it with a newline.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
