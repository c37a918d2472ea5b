package webhooks_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// TestTenantAdmission runs the webhook with tenant namespaces against a
// real API server, through kubectl: a tenant's object lies in its own
// prefix, reads only there and in the shared sources, keeps
// deletionPolicy Retain, and its namespace holds a bounded number of
// objects; the platform namespace behaves as before.
func TestTenantAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	bin, err := harness.Bin("k8s/kubectl")
	g.Expect(err).NotTo(HaveOccurred())
	k := kubectl{bin: bin, kubeconfig: cp.Kubeconfig}
	const teamA, teamB, full = "team-a", "team-b", "team-full"
	for _, n := range []string{ns, teamA, teamB, full} {
		g.Expect(cp.EnsureNamespace(ctx, n)).To(Succeed())
	}
	tenants := tenancy.DefaultConfig()
	tenants.Enabled = true
	tenants.Namespaces = []string{teamA, teamB, full}
	tenants.SharedSources = []string{"ohmlab/shared/public/"}
	tenants.MaxObjectsPerNamespace = 2

	install := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(harness.RepoRoot(), "config", "webhook")}}
	g.Expect(install.Install(cp.Config)).To(Succeed())
	t.Cleanup(func() { _ = install.Cleanup() })
	namespaces := map[string]ctrlcache.Config{}
	for _, n := range []string{ns, teamA, teamB, full} {
		namespaces[n] = ctrlcache.Config{}
	}
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  ctrlcache.Options{DefaultNamespaces: namespaces},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: install.LocalServingHost, Port: install.LocalServingPort, CertDir: install.LocalServingCertDir,
		}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seedindex.IndexFields(ctx, mgr)).To(Succeed())
	g.Expect(webhooks.SetupWithManager(mgr, []string{ns}, webhooks.Tenants(tenants))).To(Succeed())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	g.Eventually(func() (string, error) {
		return k.run(ctx, manifest(teamA, "probe", "    path: ohmlab/tenants/team-a/probe\n"), "apply", "--dry-run=server", "-f", "-")
	}, time.Minute, 200*time.Millisecond).Should(ContainSubstring("(server dry run)"), "the webhook server answers")

	// A platform object on a path that a tenant's object then names.
	out, err := k.apply(ctx, manifest(ns, "keycloak", "    path: ohmlab/platforms/production/core/keycloak\n    data:\n      k: \"<random:8>\"\n"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func() (int, error) {
		var list ohmlabv1alpha1.VaultSeedList
		err := mgr.GetCache().List(ctx, &list, client.InNamespace(ns))
		return len(list.Items), err
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(1))

	pathScope := "spec.path: Invalid value: must be a path under ohmlab/tenants/team-a/, this namespace's prefix (" + templating.PathRule + "); a tenant's object cannot choose another"
	refScope := "k: Invalid value: <ref:> must read a path under ohmlab/tenants/team-a/ (this namespace's prefix) or under a shared source (ohmlab/shared/public/); a tenant's object cannot read elsewhere"
	t.Run("an escape from the tenant's prefix is refused, naming the key and the prefix", func(t *testing.T) {
		tests := []struct {
			name string
			spec string
			want string
		}{
			{name: "another tenant's absolute path", spec: "path: ohmlab/tenants/team-b/db", want: pathScope},
			{name: "a platform path another object declares", spec: "path: ohmlab/platforms/production/core/keycloak", want: pathScope},
			{name: "a platform path nobody declares", spec: "path: ohmlab/platforms/production/core/nobody", want: pathScope},
			{name: "dot-dot (the CRD's rule)", spec: "path: ohmlab/tenants/team-a/../team-b/db", want: templating.PathMessage},
			{name: "double slash (the CRD's rule)", spec: "path: ohmlab/tenants/team-a//db", want: templating.PathMessage},
			{name: "percent-encoding (the CRD's rule)", spec: "path: ohmlab/tenants/team-a/%2e%2e/team-b", want: templating.PathMessage},
			{name: "trailing space (the CRD's rule)", spec: "path: \"ohmlab/tenants/team-a/db \"", want: templating.PathMessage},
			{name: "look-alike Unicode (the CRD's rule)", spec: "path: ohmlab/tenants/team-\u0430/db", want: templating.PathMessage},
			{name: "<ref:> to another tenant", spec: "path: ohmlab/tenants/team-a/r1\ndata:\n  k: \"<ref:ohmlab/tenants/team-b/db#password>\"", want: refScope},
			{name: "<ref:> to a platform path another object declares", spec: "path: ohmlab/tenants/team-a/r2\ndata:\n  k: \"<ref:ohmlab/platforms/production/core/keycloak#k>\"", want: refScope},
			{name: "<ref:> to a platform path nobody declares", spec: "path: ohmlab/tenants/team-a/r3\ndata:\n  k: \"<ref:ohmlab/platforms/production/core/nobody#k>\"", want: refScope},
			{name: "<ref:> to an unlisted shared path", spec: "path: ohmlab/tenants/team-a/r4\ndata:\n  k: \"<ref:ohmlab/shared/private/ca#pem>\"", want: refScope},
			{name: "<ref:> with dot-dot out of a shared source", spec: "path: ohmlab/tenants/team-a/r5\ndata:\n  k: \"<ref:ohmlab/shared/public/../../tenants/team-b/db#password>\"",
				want: "k: Invalid value: the path of <ref:mount/path#key.path> " + templating.PathMessage},
			{name: "deletionPolicy Delete", spec: "path: ohmlab/tenants/team-a/del\ndeletionPolicy: Delete",
				want: "spec.deletionPolicy: Invalid value: Delete is not allowed in tenant namespaces (the controller's chart leaves targets.vault.tenants.allowDelete false): use Retain"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				g := NewWithT(t)
				name := fmt.Sprintf("escape-%d", i)
				out, err := k.apply(ctx, manifest(teamA, name, indent(tt.spec, "    ")))
				g.Expect(err).To(HaveOccurred(), out)
				g.Expect(out).To(ContainSubstring(fmt.Sprintf("The VaultSeed %q is invalid", name)))
				g.Expect(out).To(ContainSubstring(tt.want))
				// Whether the path exists, and whose object declares it,
				// never shows.
				g.Expect(out).NotTo(ContainSubstring(ns))
				g.Expect(out).NotTo(ContainSubstring("also declared"))
			})
		}
	})

	t.Run("an object in its prefix, reading its prefix and a shared source, is admitted", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, manifest(teamA, "app", "    path: ohmlab/tenants/team-a/app\n    data:\n      password: \"<random:24>\"\n      db: \"<ref:ohmlab/tenants/team-a/db#password>\"\n      ca: \"<ref:ohmlab/shared/public/pki#ca>\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/app created"))
		g.Expect(out).NotTo(ContainSubstring("Warning"))
	})

	t.Run("the other tenant has its own prefix", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, manifest(teamB, "db", "    path: ohmlab/tenants/team-b/db\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		out, err = k.apply(ctx, manifest(teamB, "steal", "    path: ohmlab/tenants/team-b/steal\n    data:\n      k: \"<ref:ohmlab/tenants/team-a/app#password>\"\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("k: Invalid value: <ref:> must read a path under ohmlab/tenants/team-b/ (this namespace's prefix)"))
	})

	t.Run("the platform namespace is as before: any path, Delete with a warning", func(t *testing.T) {
		g := NewWithT(t)
		out, err := k.apply(ctx, manifest(ns, "platform", "    path: ohmlab/platforms/production/core/platform\n    deletionPolicy: Delete\n    data:\n      k: \"<ref:ohmlab/tenants/team-a/app#password>\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Warning: spec.deletionPolicy: Delete is not allowed by this controller"))
	})

	t.Run("a tenant namespace holds at most maxObjectsPerNamespace objects", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range []string{"one", "two"} {
			out, err := k.apply(ctx, manifest(full, name, "    path: ohmlab/tenants/team-full/"+name+"\n"))
			g.Expect(err).NotTo(HaveOccurred(), out)
		}
		g.Eventually(func() (int, error) {
			var list ohmlabv1alpha1.VaultSeedList
			err := mgr.GetCache().List(ctx, &list, client.InNamespace(full))
			return len(list.Items), err
		}, 10*time.Second, 50*time.Millisecond).Should(Equal(2))
		out, err := k.apply(ctx, manifest(full, "three", "    path: ohmlab/tenants/team-full/three\n"))
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(`vaultseeds.ohmlab.fr "three" is forbidden: namespace team-full already holds 2 VaultSeeds, the most a tenant namespace may (targets.vault.tenants.maxObjectsPerNamespace of the controller's chart): delete one first`))
		// An update of an object already there is no creation.
		out, err = k.apply(ctx, manifest(full, "two", "    path: ohmlab/tenants/team-full/two\n    data:\n      k: \"<random:8>\"\n"))
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(strings.Contains(out, "configured")).To(BeTrue(), out)
	})
}
