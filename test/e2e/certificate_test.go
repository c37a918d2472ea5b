package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOwnServingCertificate installs the chart the way a cluster without
// cert-manager takes it: the webhook's serving certificate is the user's
// (webhook.certificate.secretName, a kubernetes.io/tls Secret, and caBundle,
// its CA). The API server trusts the webhook through the chart's caBundle
// alone: a valid VaultSeed is admitted and a dotted key is refused with the
// webhook's own message. The controller serves the Secret's certificate, and
// serves the next one once the user renews the Secret (the kubelet updates
// the files; the controller reloads them), with admissions answered after.
func TestOwnServingCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: time.Minute, ControllerBin: controllerBin, OwnCertificate: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)
	g.Expect(env.Chart.WebhookSecret).To(Equal(OwnCertificateSecret), "the Deployment mounts the user's Secret")

	// The webhook configuration carries the user's CA, written by the chart.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Name: env.Chart.WebhookConfiguration}, vwc)).To(Succeed())
	g.Expect(vwc.Annotations).NotTo(HaveKey("cert-manager.io/inject-ca-from"))
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle)).To(BeTrue(), "caBundle %q", vwc.Webhooks[0].ClientConfig.CABundle)

	c := startController(t, env)
	out, err := env.Apply(ctx, Keycloak)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(env.WaitReady(ctx, Keycloak)).To(Succeed())
	out, err = env.Apply(ctx, Broken)
	g.Expect(err).To(HaveOccurred(), "the webhook must refuse a dotted key")
	g.Expect(out).To(ContainSubstring(BrokenRefusal))

	// What the webhook serves, verified as the API server verifies it.
	serverName := env.Chart.WebhookService + "." + ControllerNamespace + ".svc"
	served := func() ([]byte, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.WebhookAddr,
			&tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw, nil
	}
	der := func(crtPEM []byte) []byte {
		block, _ := pem.Decode(crtPEM)
		if block == nil {
			t.Fatalf("not a PEM certificate: %q", crtPEM)
		}
		return block.Bytes
	}
	stored := &corev1.Secret{}
	g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: OwnCertificateSecret}, stored)).To(Succeed())
	first := der(stored.Data["tls.crt"])
	g.Expect(served()).To(Equal(first), "the webhook serves the Secret's certificate")

	renewed, err := env.RenewOwnCertificate(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	next := der(renewed)
	g.Expect(bytes.Equal(next, first)).To(BeFalse())
	g.Eventually(served).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).Should(Equal(next),
		"the webhook serves the renewed certificate once its files change")
	out, err = env.Apply(ctx, Grafana)
	g.Expect(err).NotTo(HaveOccurred(), fmt.Sprintf("admitted after the renewal: %s", out))
	g.Expect(env.WaitReady(ctx, Grafana)).To(Succeed())
}
