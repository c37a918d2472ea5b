package certmanager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/test/e2e"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

var controllerBin string

func TestMain(m *testing.M) {
	e2e.RunWithController("", func(bin string) int {
		controllerBin = bin
		return m.Run()
	})
}

// TestWebhookCertificateFromCertManager installs every object of the chart,
// Issuers and Certificates included, with cert-manager running: the
// webhook's Certificate is issued into the Secret the Deployment mounts,
// cainjector injects the CA into the chart's ValidatingWebhookConfiguration,
// the controller serves the webhook with those files, and a bad object is
// refused over that TLS (the API server calls the Service and verifies the
// certificate for its DNS name). The serving certificate lives seconds: a
// renewal is served without a restart and admissions keep being answered.
func TestWebhookCertificateFromCertManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	crds, err := CRDDirectory()
	g.Expect(err).NotTo(HaveOccurred())
	var cmLog strings.Builder
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(&cmLog, prefix, args) }, funcr.Options{})
	env, err := e2e.Start(ctx, e2e.Options{
		Dir: t.TempDir(), Resync: time.Minute, ControllerBin: controllerBin,
		CRDDirectories: []string{crds},
		// Renewed 20 s after each issuance (cert-manager's minimum duration is an hour).
		Values: map[string]any{"webhook": map[string]any{"certManager": map[string]any{"duration": "1h", "renewBefore": "59m40s"}}},
		CertManager: func(ctx context.Context, cp *harness.ControlPlane) error {
			return Start(ctx, cp, logger)
		},
	})
	if err != nil {
		t.Fatalf("%v\ncert-manager logs:\n%s", err, tail(cmLog.String()))
	}
	t.Cleanup(env.Stop)

	// Issued into the Secret the Deployment mounts, and the CA injected.
	secret := &corev1.Secret{}
	g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Namespace: e2e.ControllerNamespace, Name: env.Chart.WebhookSecret}, secret)).To(Succeed())
	g.Expect(secret.Annotations).To(HaveKeyWithValue("cert-manager.io/certificate-name", "ohmlab-controller-webhook"))
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Name: env.Chart.WebhookConfiguration}, vwc)).To(Succeed())
	g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
	g.Expect(vwc.Webhooks[0].ClientConfig.Service.Name).To(Equal(env.Chart.WebhookService))

	c, err := env.StartController(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("controller logs:\n%s\ncert-manager logs:\n%s", c.Logs(), tail(cmLog.String()))
		}
	})

	// What the replica serves, verified as the API server does: for the
	// Service's DNS name, against the injected caBundle.
	served := func() *x509.Certificate {
		pool := x509.NewCertPool()
		g.Expect(pool.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle)).To(BeTrue())
		conn, err := tls.Dial("tcp", c.WebhookAddr, &tls.Config{
			RootCAs: pool, ServerName: env.Chart.WebhookService + "." + e2e.ControllerNamespace + ".svc", MinVersion: tls.VersionTLS12,
		})
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	first := served()
	refused := func() {
		t.Helper()
		out, err := env.Apply(ctx, e2e.Broken)
		g.Expect(err).To(HaveOccurred())
		g.Expect(out).To(ContainSubstring(e2e.BrokenRefusal))
	}
	refused()
	out, err := env.Apply(ctx, e2e.Keycloak)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(env.WaitReady(ctx, e2e.Keycloak)).To(Succeed())

	// Renewed by cert-manager, synced to the files, served without a restart.
	g.Eventually(func() string { return served().SerialNumber.String() }).
		WithTimeout(2 * time.Minute).WithPolling(time.Second).ShouldNot(Equal(first.SerialNumber.String()))
	g.Expect(c.Exited()).To(BeFalse())
	refused()
	t.Logf("serving certificate %s renewed into %s without a restart", first.SerialNumber, served().SerialNumber)
}

func tail(s string) string {
	if len(s) > 20000 {
		return s[len(s)-20000:]
	}
	return s
}
