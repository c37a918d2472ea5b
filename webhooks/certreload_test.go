package webhooks_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// servingCert is a self-signed serving certificate for 127.0.0.1 and
// localhost, in PEM, and its DER form.
type servingCert struct {
	certPEM, keyPEM, der []byte
}

func newServingCert(t testing.TB, cn string) servingCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return servingCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		der:     der,
	}
}

// writeInPlace rewrites tls.crt and tls.key in dir.
func writeInPlace(t testing.TB, dir, _ string, c servingCert) {
	t.Helper()
	for name, data := range map[string][]byte{"tls.crt": c.certPEM, "tls.key": c.keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAsKubelet writes the files as the kubelet updates a Secret volume
// (cert-manager's Certificate Secret): into a new timestamped directory,
// then swaps the ..data symlink that tls.crt and tls.key point through, and
// removes the old directory.
func writeAsKubelet(t testing.TB, dir, version string, c servingCert) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ts := "..data_" + version
	must(os.Mkdir(filepath.Join(dir, ts), 0o700))
	must(os.WriteFile(filepath.Join(dir, ts, "tls.crt"), c.certPEM, 0o600))
	must(os.WriteFile(filepath.Join(dir, ts, "tls.key"), c.keyPEM, 0o600))
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	must(os.Symlink(ts, filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	for _, name := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
			must(os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
	if old != "" {
		must(os.RemoveAll(filepath.Join(dir, old)))
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// served returns the leaf certificate the server presents.
func served(addr string) ([]byte, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test compares the certificate itself
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// TestCertificateReload rotates the certificate files under a running
// webhook server, as cert-manager's renewal reaches the pod, and sees the
// new certificate served (and trusted) without a restart.
func TestCertificateReload(t *testing.T) {
	tests := []struct {
		name  string
		write func(t testing.TB, dir, version string, c servingCert)
	}{
		{name: "a Secret volume updated by the kubelet", write: writeAsKubelet},
		{name: "files rewritten in place", write: writeInPlace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			dir := t.TempDir()
			first, second := newServingCert(t, "first"), newServingCert(t, "second")
			tt.write(t, dir, "1", first)

			port := freePort(t)
			srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
			srv.Register(webhooks.Path, webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns}))
			done := make(chan error, 1)
			go func() { done <- srv.Start(ctx) }()
			t.Cleanup(func() {
				cancel()
				g.Expect(<-done).To(Succeed())
			})
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			g.Eventually(func() ([]byte, error) { return served(addr) }, 10*time.Second, 50*time.Millisecond).Should(Equal(first.der))

			tt.write(t, dir, "2", second)
			g.Eventually(func() ([]byte, error) { return served(addr) }, 20*time.Second, 100*time.Millisecond).Should(Equal(second.der))

			// The API server, trusting only the new certificate, gets its answer.
			pool := x509.NewCertPool()
			pool.AddCert(mustParse(t, second.der))
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			req := request(t, admissionv1.Create, "", seed("a", "ohmlab/a", `{"a.b":"x"}`), nil)
			body, err := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request:  &req.AdmissionRequest,
			})
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := hc.Post("https://"+addr+webhooks.Path, "application/json", bytes.NewReader(body))
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			var review admissionv1.AdmissionReview
			g.Expect(json.NewDecoder(resp.Body).Decode(&review)).To(Succeed())
			g.Expect(review.Response.Allowed).To(BeFalse())
			g.Expect(review.Response.Result.Message).To(HavePrefix(`VaultSeed.ohmlab.fr "a" is invalid: a.b: `))
		})
	}
}

func mustParse(t testing.TB, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
