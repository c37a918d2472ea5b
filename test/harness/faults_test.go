package harness_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestFileVaultKeepsItsData checks what the fault suite relies on: a
// an on-disk Vault keeps its data and tokens across a seal and a crash,
// and comes back sealed after one.
func TestFileVaultKeepsItsData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	v := harness.FileVaultForTest(t)
	kv := v.Client.KVv2(harness.VaultMount)
	_, err := kv.Put(ctx, "platforms/test/core/app", map[string]any{"k": "v"})
	g.Expect(err).NotTo(HaveOccurred())
	child, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"default"}})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(v.Seal()).To(Succeed())
	_, err = kv.Get(ctx, "platforms/test/core/app")
	g.Expect(err).To(MatchError(ContainSubstring("Vault is sealed")))
	g.Expect(v.Unseal()).To(Succeed())

	v.Stop()
	_, err = kv.Get(ctx, "platforms/test/core/app")
	g.Expect(isURLError(err)).To(BeTrue(), "a stopped server refuses connections: %v", err)
	g.Expect(v.Start()).To(Succeed())
	st, err := v.Client.Sys().SealStatus()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Sealed).To(BeTrue(), "a restarted server is sealed")
	g.Expect(v.Unseal()).To(Succeed())

	g.Expect(v.Restart()).To(Succeed())
	s, err := kv.Get(ctx, "platforms/test/core/app")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Data).To(HaveKeyWithValue("k", "v"))
	c, err := v.WithToken(child.Auth.ClientToken)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Auth().Token().LookupSelf()
	g.Expect(err).NotTo(HaveOccurred(), "tokens survive a restart")
}

// TestKVProxyHooks checks that a hook fires at the chosen KV v2 request,
// before or after it lands, and that a dropped or unanswered request looks
// like a broken connection to the client.
func TestKVProxyHooks(t *testing.T) {
	ctx := context.Background()
	v := harness.FileVaultForTest(t)
	p := harness.KVProxyForTest(t, v.Addr, harness.VaultMount)
	c, err := v.WithToken(v.Client.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAddress(p.URL); err != nil {
		t.Fatal(err)
	}
	direct := v.Client.KVv2(harness.VaultMount)
	proxied := c.KVv2(harness.VaultMount)
	const path = "platforms/test/core/app"
	if _, err := direct.Put(ctx, path, map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	isMark := func(r harness.KVRequest) bool {
		return r.Kind == harness.KVMetadata && r.Method == http.MethodPatch && r.Path == harness.VaultMount+"/"+path && r.CustomMetadata["owner"] == "me"
	}
	isWrite := func(r harness.KVRequest) bool { return r.Kind == harness.KVData && r.Write() }

	tests := []struct {
		name        string
		when        harness.When
		match       func(harness.KVRequest) bool
		pass        bool
		send        func() error
		wantLanded  func() bool
		wantLands   bool
		wantFailure bool
	}{
		{
			name: "after a metadata patch, answered", when: harness.AfterForwarding, match: isMark, pass: true,
			send: func() error {
				return proxied.PatchMetadata(ctx, path, vaultapi.KVMetadataPatchInput{CustomMetadata: map[string]any{"owner": "me"}})
			},
			wantLanded: func() bool {
				m, _ := direct.GetMetadata(ctx, path)
				return m != nil && m.CustomMetadata["owner"] == "me"
			},
			wantLands: true,
		},
		{
			name: "after a data write, not answered", when: harness.AfterForwarding, match: isWrite, pass: false,
			send:       func() error { _, err := proxied.Put(ctx, path, map[string]any{"k": "w"}); return err },
			wantLanded: func() bool { s, _ := direct.Get(ctx, path); return s != nil && s.Data["k"] == "w" },
			wantLands:  true, wantFailure: true,
		},
		{
			name: "before a data write, dropped", when: harness.BeforeForwarding, match: isWrite, pass: false,
			send:       func() error { _, err := proxied.Put(ctx, path, map[string]any{"k": "x"}); return err },
			wantLanded: func() bool { s, _ := direct.Get(ctx, path); return s != nil && s.Data["k"] == "x" },
			wantLands:  false, wantFailure: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			landedAtHook := false
			h := p.Once(tt.when, tt.match, func(harness.KVRequest) bool { landedAtHook = tt.wantLanded(); return tt.pass })
			err := tt.send()
			g.Expect(h.Fired()).To(BeClosed())
			g.Expect(landedAtHook).To(Equal(tt.wantLands), "the request had landed when the hook ran")
			g.Expect(tt.wantLanded()).To(Equal(tt.wantLands))
			if tt.wantFailure {
				g.Expect(isURLError(err)).To(BeTrue(), "a broken connection, not an HTTP answer: %v", err)
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}

	t.Run("a stopped Vault is a broken connection", func(t *testing.T) {
		v.Stop()
		defer func() { _ = v.Restart() }()
		_, err := proxied.Get(ctx, path)
		NewWithT(t).Expect(isURLError(err)).To(BeTrue(), "%v", err)
	})
}

// TestAPIServerRestart checks that a restarted kube-apiserver keeps its
// objects (same etcd), its serving certificate (the same client works) and
// its ServiceAccount signing key (a token issued before still reviews).
func TestAPIServerRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	g.Expect(cp.EnsureServiceAccount(ctx, "restart", "sa")).To(Succeed())
	jwt, err := cp.ServiceAccountToken(ctx, "restart", "sa", "vault", 10*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	for range 2 {
		g.Expect(cp.StopAPIServer()).To(Succeed())
		g.Expect(cp.Client.Get(ctx, client.ObjectKey{Name: "restart"}, &corev1.Namespace{})).NotTo(Succeed(), "the apiserver is down")
		g.Expect(cp.StartAPIServer(ctx)).To(Succeed())
	}
	g.Expect(cp.Client.Get(ctx, client.ObjectKey{Name: "restart"}, &corev1.Namespace{})).To(Succeed())
	cs, err := kubernetes.NewForConfig(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: jwt, Audiences: []string{"vault"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(review.Status.Authenticated).To(BeTrue(), review.Status.Error)
}

func isURLError(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}
