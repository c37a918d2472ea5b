package vaultseed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// The shared Vault's Kubernetes auth method, enabled by the first test
// that logs in with it.
var (
	kubeAuthOnce sync.Once
	kubeAuthErr  error
)

// The controller's ServiceAccount and the roles of the login tests.
const (
	loginNamespace      = "ohmlab-system"
	loginServiceAccount = "ohmlab-controller"
)

func enableKubernetesAuth(t *testing.T) {
	t.Helper()
	startServers(t)
	kubeAuthOnce.Do(func() {
		ctx := context.Background()
		if kubeAuthErr = vault.EnableKubernetesAuth(ctx, cp); kubeAuthErr != nil {
			return
		}
		if kubeAuthErr = cp.EnsureServiceAccount(ctx, loginNamespace, loginServiceAccount); kubeAuthErr != nil {
			return
		}
		for _, role := range []harness.KubernetesRole{
			{Name: "ohmlab", ServiceAccount: loginServiceAccount, Namespace: loginNamespace, Audience: "vault"},
			{Name: "other-sa", ServiceAccount: "someone-else", Namespace: loginNamespace, Audience: "vault"},
		} {
			if kubeAuthErr = vault.WriteKubernetesRole(ctx, role); kubeAuthErr != nil {
				return
			}
		}
	})
	if kubeAuthErr != nil {
		t.Fatal(kubeAuthErr)
	}
}

// TestLoginRefusedIsForbidden: a controller whose login Vault refuses
// reports Forbidden with Vault's reason (product document, "Forbidden": its
// login role is missing or does not accept the controller's
// ServiceAccount), counted as a forbidden login.
func TestLoginRefusedIsForbidden(t *testing.T) {
	enableKubernetesAuth(t)
	tests := []struct {
		name     string
		role     string
		audience string // of the ServiceAccount token
		reason   string // Vault's, in the condition message
	}{
		{"missing role", "nope", "vault", `invalid role name "nope"`},
		{"role bound to another ServiceAccount", "other-sa", "vault", "service account name not authorized"},
		{"token with the wrong audience", "ohmlab", "other", "invalid audience (aud) claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			jwt, err := cp.ServiceAccountToken(context.Background(), loginNamespace, loginServiceAccount, tt.audience, 10*time.Minute)
			g.Expect(err).NotTo(HaveOccurred())
			tokenFile := filepath.Join(t.TempDir(), "token")
			g.Expect(os.WriteFile(tokenFile, []byte(jwt), 0o600)).To(Succeed())
			reg := prometheus.NewRegistry()
			kv, err := vaultkv.New(vaultkv.Config{Address: vault.Addr, Timeout: 2 * time.Second, Metrics: vaultkv.NewMetrics(reg),
				Auth: vaultkv.AuthConfig{Method: vaultkv.MethodKubernetes, Role: tt.role, Audience: "vault", TokenFile: tokenFile}})
			g.Expect(err).NotTo(HaveOccurred())

			f := startController(t, controllerOptions{kv: kv})
			f.create(f.seed("a", f.path("a"), `{"password":"<random:24>"}`))
			obj := f.waitReason("a", ohmlabv1alpha1.ReasonForbidden, 20*time.Second)
			ready := apimeta.FindStatusCondition(obj.Status.Conditions, ohmlabv1alpha1.ConditionReady)
			g.Expect(ready.Status).To(BeEquivalentTo("False"))
			g.Expect(ready.Message).To(ContainSubstring(tt.reason))
			g.Expect(ready.Message).To(ContainSubstring("login"))
			t.Logf("Ready=False %s: %s", ready.Reason, ready.Message)
			g.Expect(strings.Contains(f.emitted(), jwt)).To(BeFalse(), "the JWT appears in what the controller emitted")

			mfs, err := reg.Gather()
			g.Expect(err).NotTo(HaveOccurred())
			var forbidden, other float64
			for _, mf := range mfs {
				if mf.GetName() != "ohmlab_backend_requests_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["operation"] == vaultkv.OpLogin && labels["code"] == "forbidden" {
						forbidden += m.GetCounter().GetValue()
					} else if labels["operation"] == vaultkv.OpLogin {
						other += m.GetCounter().GetValue()
					}
				}
			}
			g.Expect(forbidden).To(BeNumerically(">=", 1), "ohmlab_backend_requests_total{operation=login,code=forbidden}")
			g.Expect(other).To(BeZero(), "logins counted with another code")
		})
	}
}
