// Package cluster tests the product the way users run it: the Helm chart
// installed with Helm's library on a real single-node Kubernetes (`make
// cluster`), its Deployment's pods running the image `make image` built,
// cert-manager (its own controllers, in-process on the host) issuing the
// webhook's certificate, and a Vault dev server on the node's network.
// `make test-cluster` brings the node up, runs the test and takes it down.
package cluster

import (
	"fmt"
	"os"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Settings are what `make test-cluster` tells the test about the node and
// the image, in environment variables (mk/clustertest.mk sets them).
type Settings struct {
	// Kubeconfig authenticates as the cluster's administrator
	// (OHMLAB_CLUSTER_KUBECONFIG, the file `make cluster` printed).
	Kubeconfig string
	// NodeExec runs a command on the node's network: a command prefix
	// (OHMLAB_CLUSTER_NODE_EXEC, e.g. "ip netns exec ohmlab-node").
	NodeExec []string
	// NodeIP is the node's address, reachable from the host and from the
	// pods (OHMLAB_CLUSTER_NODE_IP): the Vault dev server listens there.
	NodeIP string
	// Image is the image reference imported into the node's containerd
	// (OHMLAB_CLUSTER_IMAGE, repository:tag), ImageLayout the OCI layout
	// `make image` built it into (OHMLAB_CLUSTER_IMAGE_LAYOUT, dist/oci).
	Image, ImageLayout string
	// Cosign is the cosign binary make chart signs with and the test
	// verifies with (OHMLAB_CLUSTER_COSIGN, bin/cosign).
	Cosign string
	// DialImage is the image of cmd/dial imported into the node
	// (OHMLAB_CLUSTER_DIAL_IMAGE): the NetworkPolicy step's probe pods.
	DialImage string
}

// SettingsFromEnv reads the Settings, naming every variable that is
// missing.
func SettingsFromEnv() (Settings, error) {
	s := Settings{
		Kubeconfig:  os.Getenv("OHMLAB_CLUSTER_KUBECONFIG"),
		NodeExec:    strings.Fields(os.Getenv("OHMLAB_CLUSTER_NODE_EXEC")),
		NodeIP:      os.Getenv("OHMLAB_CLUSTER_NODE_IP"),
		Image:       os.Getenv("OHMLAB_CLUSTER_IMAGE"),
		ImageLayout: os.Getenv("OHMLAB_CLUSTER_IMAGE_LAYOUT"),
		Cosign:      os.Getenv("OHMLAB_CLUSTER_COSIGN"),
		DialImage:   os.Getenv("OHMLAB_CLUSTER_DIAL_IMAGE"),
	}
	var missing []string
	for name, v := range map[string]bool{
		"OHMLAB_CLUSTER_KUBECONFIG":   s.Kubeconfig != "",
		"OHMLAB_CLUSTER_NODE_EXEC":    len(s.NodeExec) > 0,
		"OHMLAB_CLUSTER_NODE_IP":      s.NodeIP != "",
		"OHMLAB_CLUSTER_IMAGE":        s.Image != "",
		"OHMLAB_CLUSTER_IMAGE_LAYOUT": s.ImageLayout != "",
		"OHMLAB_CLUSTER_COSIGN":       s.Cosign != "",
		"OHMLAB_CLUSTER_DIAL_IMAGE":   s.DialImage != "",
	} {
		if !v {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return s, fmt.Errorf("%s not set: run the test with `make test-cluster`, which brings up the node and sets them", strings.Join(missing, ", "))
	}
	return s, nil
}

// Cluster is a connection to the node's API server as its administrator.
type Cluster struct {
	Settings
	Config    *rest.Config
	Client    client.Client
	Clientset kubernetes.Interface
	Scheme    *runtime.Scheme
}

// Connect builds the clients of s.Kubeconfig, with the CA loaded into
// Config.CAData (Vault's Kubernetes auth needs it as data).
func Connect(s Settings) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig %s: %w", s.Kubeconfig, err)
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("loading the kubeconfig's certificates: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, ohmlabv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Settings: s, Config: cfg, Client: cl, Clientset: cs, Scheme: scheme}, nil
}

// ControlPlane is the cluster as the harness's ControlPlane, for the
// harness's and test/certmanager's helpers that take one (Vault's
// Kubernetes auth, cert-manager): they use only its Config, Client and
// Kubeconfig.
func (c *Cluster) ControlPlane() *harness.ControlPlane {
	return &harness.ControlPlane{Config: c.Config, Client: c.Client, Scheme: c.Scheme, Kubeconfig: c.Kubeconfig}
}
