package harness_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestFoundation proves the real test environment: the CRD as the API server
// enforces it, kubectl's printer columns, the Vault KV v2 mount and a
// Kubernetes-auth login bound to the "vault" audience.
func TestFoundation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	v := harness.VaultForTest(t)

	t.Run("a VaultSeed round-trips through the API server", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(cp.EnsureNamespace(ctx, "vault-operator-system")).To(Succeed())
		seed := &ohmlabv1alpha1.VaultSeed{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vault-operator-system", Name: "keycloak"},
			Spec: ohmlabv1alpha1.VaultSeedSpec{
				Path: "ohmlab/platforms/production/core/keycloak",
				Data: &apiextensionsv1.JSON{Raw: []byte(`{"admin":{"username":"admin","password":"<random:24>"}}`)},
			},
		}
		g.Expect(cp.Client.Create(ctx, seed)).To(Succeed())
		got := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(seed), got)).To(Succeed())
		g.Expect(got.Spec.Path).To(Equal(seed.Spec.Path))
		g.Expect(got.Spec.DeletionPolicy).To(Equal(ohmlabv1alpha1.DeletionPolicyRetain), "defaulted by the CRD")
		var data map[string]any
		g.Expect(json.Unmarshal(got.Spec.Data.Raw, &data)).To(Succeed())
		g.Expect(data).To(HaveKeyWithValue("admin", HaveKeyWithValue("password", "<random:24>")))

		got.Spec.Path = "ohmlab/platforms/production/core/other"
		err := cp.Client.Update(ctx, got)
		g.Expect(err).To(MatchError(ContainSubstring("spec.path is immutable")))
	})

	t.Run("the API server refuses malformed paths", func(t *testing.T) {
		for _, path := range []string{"onlymount", "/ohmlab/x", "ohmlab/x/", "ohmlab//x"} {
			seed := &ohmlabv1alpha1.VaultSeed{
				ObjectMeta: metav1.ObjectMeta{Namespace: "vault-operator-system", GenerateName: "bad-"},
				Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path},
			}
			if err := cp.Client.Create(ctx, seed); err == nil {
				t.Errorf("path %q was admitted", path)
			}
		}
	})

	t.Run("kubectl get vaultseeds shows the printer columns", func(t *testing.T) {
		g := NewWithT(t)
		kubectl, err := harness.Bin("k8s/kubectl")
		g.Expect(err).NotTo(HaveOccurred())
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.Kubeconfig, "get", "vaultseeds", "-A").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
		g.Expect(header).To(Equal([]string{"NAMESPACE", "NAME", "PATH", "READY", "REASON", "AGE"}))
		g.Expect(string(out)).To(ContainSubstring("ohmlab/platforms/production/core/keycloak"))
	})

	t.Run("the ohmlab KV v2 mount stores and returns a secret", func(t *testing.T) {
		g := NewWithT(t)
		kv := v.Client.KVv2(harness.VaultMount)
		_, err := kv.Put(ctx, "platforms/test/core/app", map[string]any{"k": "v"})
		g.Expect(err).NotTo(HaveOccurred())
		s, err := kv.Get(ctx, "platforms/test/core/app")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Data).To(HaveKeyWithValue("k", "v"))
		g.Expect(s.VersionMetadata.Version).To(Equal(1))
	})

	t.Run("Kubernetes auth accepts the vault audience only", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(v.EnableKubernetesAuth(ctx, cp)).To(Succeed())
		g.Expect(cp.EnsureServiceAccount(ctx, "ohmlab-system", "ohmlab-controller-vault")).To(Succeed())
		g.Expect(v.WriteKubernetesRole(ctx, harness.KubernetesRole{
			Name: "ohmlab-controller", ServiceAccount: "ohmlab-controller-vault", Namespace: "ohmlab-system",
			Audience: "vault", Policies: []string{"default"},
		})).To(Succeed())
		login := func(audience string) error {
			jwt, err := cp.ServiceAccountToken(ctx, "ohmlab-system", "ohmlab-controller-vault", audience, 10*time.Minute)
			g.Expect(err).NotTo(HaveOccurred())
			c, err := v.WithToken("")
			g.Expect(err).NotTo(HaveOccurred())
			s, err := c.Logical().WriteWithContext(ctx, "auth/kubernetes/login", map[string]any{"role": "ohmlab-controller", "jwt": jwt})
			if err == nil && (s == nil || s.Auth == nil || s.Auth.ClientToken == "") {
				t.Fatalf("login with audience %q returned no token", audience)
			}
			return err
		}
		g.Expect(login("vault")).To(Succeed())
		g.Expect(login("other")).To(MatchError(ContainSubstring("invalid audience")))
	})
}
