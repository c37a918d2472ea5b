// Package certmanager runs cert-manager in-process against a test control
// plane: the controllers that issue a Certificate from a self-signed or CA
// Issuer (trigger, key manager, request manager, CertificateRequest
// approver and signers, issuing, readiness, revision manager, the Issuer
// controller) and the cainjector, all from github.com/cert-manager/cert-manager
// itself, with its CRDs from the same module. ACME, Vault, Venafi, the
// ingress/gateway shims and cert-manager's own webhook are not run: the
// chart uses none of them.
package certmanager

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The Issuer types the chart uses, for the Issuer controller.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// controllers are the cert-manager controllers the chart's Issuers and
// Certificates need, by their registered names.
var controllers = []string{
	issuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// CRDDirectory is the directory of cert-manager's CRDs in the Go module
// cache, for harness.Options.CRDDirectories.
func CRDDirectory() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", fmt.Errorf("locating the cert-manager module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds"), nil
}

// Start runs cert-manager's controllers and cainjector against cp until ctx
// ends, authenticated as the control plane's admin (cert-manager is not
// under test). log receives what they log.
func Start(ctx context.Context, cp *harness.ControlPlane, log logr.Logger) error {
	ctx = logf.NewContext(ctx, log)
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         cp.Kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: "cert-manager"},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Second,
			CertificateRequestMaximumBackoffDuration: 10 * time.Second,
		},
	})
	if err != nil {
		return fmt.Errorf("cert-manager: %w", err)
	}
	known := controllerpkg.Known()
	for _, name := range controllers {
		build, ok := known[name]
		if !ok {
			return fmt.Errorf("cert-manager: no controller %q registered", name)
		}
		c, err := build(factory)
		if err != nil {
			return fmt.Errorf("cert-manager: building %s: %w", name, err)
		}
		go func() {
			if err := c.Run(2, ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "cert-manager controller stopped", "controller", name)
			}
		}()
	}
	// The controllers registered their informers on the shared factories:
	// start them, as cert-manager's controller binary does.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	return startCAInjector(ctx, cp, log)
}

// startCAInjector runs cainjector for ValidatingWebhookConfigurations, with
// the Certificate data source (cert-manager.io/inject-ca-from).
func startCAInjector(ctx context.Context, cp *harness.ControlPlane, log logr.Logger) error {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, admissionregistrationv1.AddToScheme, apiextensionsv1.AddToScheme,
		apiregistrationv1.AddToScheme, cmapi.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cfg := *cp.Config
	cfg.UserAgent = "cert-manager-cainjector"
	mgr, err := ctrl.NewManager(&cfg, ctrl.Options{
		Scheme: scheme, Logger: log.WithName("cainjector"),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("cainjector: %w", err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor:        map[string]bool{cainjector.ValidatingWebhookConfigurationName: true},
	}); err != nil {
		return fmt.Errorf("cainjector: %w", err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "cainjector stopped")
		}
	}()
	return nil
}
