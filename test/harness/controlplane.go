package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// ControlPlane is a running kube-apiserver + etcd with the ohmlab CRDs.
type ControlPlane struct {
	Env *envtest.Environment
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config
	// Client is a controller-runtime client over Config with the ohmlab and
	// client-go schemes.
	Client client.Client
	// Scheme holds client-go's kinds, CustomResourceDefinitions and
	// ohmlab.fr/v1alpha1.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of a kubeconfig file for Config, for kubectl.
	Kubeconfig string
	dir        string
	apiserver  *apiserverProcess // set by StopAPIServer
}

// Options change what StartControlPlane installs.
type Options struct {
	// Webhooks, when set, is installed as envtest webhook configuration,
	// pointed at 127.0.0.1 with envtest's own CA; on return it holds the
	// serving port and the certificate directory (LocalServingPort,
	// LocalServingCertDir) that the webhook server must use.
	Webhooks *envtest.WebhookInstallOptions
	// Network, when set, carries the API server's connections to Services
	// (webhooks) to local processes (its "cluster" egress selector).
	Network *ServiceNetwork
	// CRDDirectories are installed besides config/crd/bases (for example
	// cert-manager's CRDs).
	CRDDirectories []string
}

// StartControlPlane starts a control plane and installs config/crd/bases.
// Call Stop when done; ForTest does it for a test.
func StartControlPlane(opts Options) (*ControlPlane, error) {
	assets, err := Bin("k8s")
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := Bin(filepath.Join("k8s", b)); err != nil {
			return nil, err
		}
	}
	// envtest logs through controller-runtime's root logger, which warns
	// with a stack trace when it has none: discard what it says.
	ctrllog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := ohmlabv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, opts.CRDDirectories...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if opts.Webhooks != nil {
		env.WebhookInstallOptions = *opts.Webhooks
	}
	if opts.Network != nil {
		path, err := opts.Network.EgressSelectorConfig()
		if err != nil {
			return nil, err
		}
		env.ControlPlane.GetAPIServer().Configure().Set("egress-selector-config-file", path)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	if opts.Webhooks != nil {
		// envtest chose the serving host, port and certificate directory.
		*opts.Webhooks = env.WebhookInstallOptions
	}
	cp := &ControlPlane{Env: env, Config: cfg, Scheme: scheme}
	if err := reapChildrenOnExit(assets); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	if err := cp.finish(); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) finish() error {
	c, err := client.New(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return err
	}
	cp.Client = c
	user, err := cp.Env.AddUser(envtest.User{Name: "harness-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding the kubeconfig user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if cp.dir, err = os.MkdirTemp("", "ohmlab-controlplane-"); err != nil {
		return err
	}
	cp.Kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	return os.WriteFile(cp.Kubeconfig, kc, 0o600)
}

// Stop stops the control plane and removes its files.
func (cp *ControlPlane) Stop() error {
	cp.stopRestartedAPIServer()
	err := cp.Env.Stop()
	if cp.dir != "" {
		_ = os.RemoveAll(cp.dir)
	}
	return err
}

// ControlPlaneForTest starts a control plane for one test and stops it when
// the test ends. It fails the test (never skips) when a binary is missing.
func ControlPlaneForTest(tb testing.TB, opts Options) *ControlPlane {
	tb.Helper()
	cp, err := StartControlPlane(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			tb.Errorf("stopping the control plane: %v", err)
		}
	})
	return cp
}
