package chart_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// caPEM stands for a CA certificate: the chart checks its PEM armour only.
const caPEM = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAAMB4XDTI2MDEwMTAwMDAwMFoX\n-----END CERTIFICATE-----\n"

// ownCertificate brings a serving certificate instead of cert-manager's.
const ownCertificate = vaultOn + `webhook:
  certificate:
    secretName: platform-webhook-tls
    caBundle: |
      -----BEGIN CERTIFICATE-----
      MIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAAMB4XDTI2MDEwMTAwMDAwMFoX
      -----END CERTIFICATE-----
`

// TestWebhookCertificate: the serving certificate comes from cert-manager where the cluster
// serves its API, or from a Secret and CA bundle of the user's; rendering fails, naming both
// ways, when neither is there.
func TestWebhookCertificate(t *testing.T) {
	tests := []struct {
		name        string
		values      string
		certManager bool
		// wantSecret is the Secret the Deployment mounts, wantCABundle the webhook's caBundle
		// (empty: left to cainjector), wantInject its inject-ca-from annotation.
		wantSecret, wantCABundle, wantInject string
		wantCertManagerObjects               int
	}{
		{
			name: "cert-manager", values: vaultOn, certManager: true,
			wantSecret: fullname + "-webhook-tls", wantInject: ns + "/" + fullname + "-webhook", wantCertManagerObjects: 4,
		},
		{
			name: "own Secret, without cert-manager", values: ownCertificate,
			wantSecret: "platform-webhook-tls", wantCABundle: caPEM,
		},
		{
			name: "own Secret wins over cert-manager", values: ownCertificate, certManager: true,
			wantSecret: "platform-webhook-tls", wantCABundle: caPEM,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := charttest.RenderE(charttest.Values(t, tt.values), charttest.Options{WithoutCertManager: !tt.certManager})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			for _, o := range objs {
				if o.GroupVersionKind().Group == "cert-manager.io" {
					n++
				}
			}
			if n != tt.wantCertManagerObjects {
				t.Errorf("%d cert-manager objects, want %d", n, tt.wantCertManagerObjects)
			}
			var d appsv1.Deployment
			charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
			i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "webhook-certs" })
			if i < 0 || d.Spec.Template.Spec.Volumes[i].Secret == nil || d.Spec.Template.Spec.Volumes[i].Secret.SecretName != tt.wantSecret {
				t.Errorf("webhook-certs volume %+v, want Secret %s", d.Spec.Template.Spec.Volumes, tt.wantSecret)
			}
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			charttest.Convert(t, mustFind(t, objs, "ValidatingWebhookConfiguration", "", clusterName), &vwc)
			if got := string(vwc.Webhooks[0].ClientConfig.CABundle); got != tt.wantCABundle {
				t.Errorf("caBundle %q, want %q", got, tt.wantCABundle)
			}
			if diff := cmp.Diff(tt.wantInject, vwc.Annotations["cert-manager.io/inject-ca-from"]); diff != "" {
				t.Errorf("inject-ca-from (-want +got):\n%s", diff)
			}
		})
	}

	refused := []struct {
		name, values string
		want         []string
	}{
		{
			name: "neither cert-manager nor a Secret", values: vaultOn,
			want: []string{"webhook.certificate: the webhook needs a serving certificate", "no cert-manager.io/v1", "--api-versions cert-manager.io/v1", "webhook.certificate.secretName", "webhook.certificate.caBundle"},
		},
		{
			name: "a Secret without its CA", values: vaultOn + "webhook: {certificate: {secretName: platform-webhook-tls}}\n",
			want: []string{"webhook.certificate.caBundle: required with webhook.certificate.secretName"},
		},
		{
			name: "a CA without a Secret", values: vaultOn + "webhook: {certificate: {caBundle: " + strconv.Quote(caPEM) + "}}\n",
			want: []string{"webhook.certificate.secretName: required with webhook.certificate.caBundle"},
		},
		{
			name: "a CA that is not PEM", values: vaultOn + "webhook: {certificate: {secretName: s, caBundle: LS0tLS1CRUdJTg==}}\n",
			want: []string{"values don't meet the specifications of the schema", "caBundle"},
		},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := charttest.RenderE(charttest.Values(t, tt.values), charttest.Options{WithoutCertManager: true})
			if err == nil {
				t.Fatal("rendering succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestClusterScopedNamesPerNamespace: two releases of one name in two namespaces render no
// cluster-scoped object of the same name, so neither takes over (or, uninstalled, deletes)
// the other's webhook configuration or ClusterRole.
func TestClusterScopedNamesPerNamespace(t *testing.T) {
	names := map[string][]string{}
	for _, namespace := range []string{"team-a", "team-b"} {
		objs, err := charttest.RenderE(charttest.Values(t, vaultOn), charttest.Options{ReleaseName: "ohmlab", Namespace: namespace})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetNamespace() == "" && o.GetKind() != "CustomResourceDefinition" {
				names[namespace] = append(names[namespace], charttest.Key(o))
			}
		}
	}
	want := map[string][]string{}
	for _, namespace := range []string{"team-a", "team-b"} {
		want[namespace] = []string{
			"ClusterRole/" + namespace + "-ohmlab-ohmlab-controller-vault-crds",
			"ClusterRoleBinding/" + namespace + "-ohmlab-ohmlab-controller-vault-crds",
			"ValidatingWebhookConfiguration/" + namespace + "-ohmlab-ohmlab-controller",
		}
	}
	for _, v := range names {
		slices.Sort(v)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("cluster-scoped objects by release namespace (-want +got):\n%s", diff)
	}
}
