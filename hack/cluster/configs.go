package main

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/BurntSushi/toml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// PauseImage is the sandbox image containerd starts every pod with, built
// and imported by up (pause.go).
const PauseImage = "localhost/ohmlab-cluster/pause:1.0"

// CNIBinDir is where Debian's containernetworking-plugins installs the
// plugins.
const CNIBinDir = "/usr/lib/cni"

// containerdConfig is the part of containerd 1.6's config.toml (version 2)
// the node sets; containerd's defaults hold for the rest.
type containerdConfig struct {
	Version int    `toml:"version"`
	Root    string `toml:"root"`
	State   string `toml:"state"`
	// DisabledPlugins keeps containerd off the host paths it would create
	// for plugins the node does not use (/opt/containerd for "opt").
	DisabledPlugins []string             `toml:"disabled_plugins"`
	GRPC            containerdGRPC       `toml:"grpc"`
	Plugins         containerdPluginsSet `toml:"plugins"`
}

type containerdGRPC struct {
	Address string `toml:"address"`
}

type containerdPluginsSet struct {
	CRI criConfig `toml:"io.containerd.grpc.v1.cri"`
}

type criConfig struct {
	SandboxImage string `toml:"sandbox_image"`
	// RestrictOOMScoreAdj: root on these machines lacks CAP_SYS_RESOURCE,
	// so the kubelet's negative oom_score_adj values would fail every
	// container start; containerd clamps them to its own score instead.
	RestrictOOMScoreAdj bool          `toml:"restrict_oom_score_adj"`
	Containerd          criContainerd `toml:"containerd"`
	CNI                 criCNI        `toml:"cni"`
}

type criContainerd struct {
	Snapshotter        string                `toml:"snapshotter"`
	DefaultRuntimeName string                `toml:"default_runtime_name"`
	Runtimes           map[string]criRuntime `toml:"runtimes"`
}

type criRuntime struct {
	RuntimeType string         `toml:"runtime_type"`
	Options     criRuncOptions `toml:"options"`
}

type criRuncOptions struct {
	// SystemdCgroup false: the kubelet's cgroupDriver is cgroupfs (there
	// is no systemd on these machines).
	SystemdCgroup bool `toml:"SystemdCgroup"`
}

type criCNI struct {
	BinDir     string `toml:"bin_dir"`
	ConfDir    string `toml:"conf_dir"`
	MaxConfNum int    `toml:"max_conf_num"`
}

// ContainerdConfig renders containerd's config.toml.
func ContainerdConfig(l Layout) ([]byte, error) {
	c := containerdConfig{
		Version: 2,
		Root:    l.ContainerdRoot(),
		State:   l.path("containerd-state"),
		DisabledPlugins: []string{
			"io.containerd.internal.v1.opt",
			"io.containerd.snapshotter.v1.aufs",
			"io.containerd.snapshotter.v1.btrfs",
			"io.containerd.snapshotter.v1.devmapper",
			"io.containerd.snapshotter.v1.zfs",
			"io.containerd.tracing.processor.v1.otlp",
		},
		GRPC: containerdGRPC{Address: l.ContainerdSocket()},
		Plugins: containerdPluginsSet{CRI: criConfig{
			SandboxImage:        PauseImage,
			RestrictOOMScoreAdj: true,
			Containerd: criContainerd{
				Snapshotter:        "overlayfs",
				DefaultRuntimeName: "runc",
				Runtimes: map[string]criRuntime{
					"runc": {RuntimeType: "io.containerd.runc.v2"},
				},
			},
			CNI: criCNI{BinDir: CNIBinDir, ConfDir: l.CNIConfDir(), MaxConfNum: 1},
		}},
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(c); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// cniConfList is a CNI network configuration list (the CNI spec's
// .conflist): a bridge with host-local IPAM over the node's PodCIDR, then
// portmap for hostPort.
type cniConfList struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

type cniBridge struct {
	Type        string  `json:"type"`
	Bridge      string  `json:"bridge"`
	IsGateway   bool    `json:"isGateway"`
	IPMasq      bool    `json:"ipMasq"`
	HairpinMode bool    `json:"hairpinMode"`
	IPAM        cniIPAM `json:"ipam"`
}

type cniIPAM struct {
	Type    string       `json:"type"`
	DataDir string       `json:"dataDir"`
	Ranges  [][]cniRange `json:"ranges"`
	Routes  []cniRoute   `json:"routes"`
}

type cniRange struct {
	Subnet string `json:"subnet"`
}

type cniRoute struct {
	Dst string `json:"dst"`
}

type cniPortmap struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

// CNIConfList renders the pod network's conflist.
func CNIConfList(l Layout) ([]byte, error) {
	c := cniConfList{
		CNIVersion: "1.0.0",
		Name:       "ohmlab-pods",
		Plugins: []any{
			cniBridge{
				Type:      "bridge",
				Bridge:    Bridge,
				IsGateway: true,
				// ipMasq: pods reach the host's side of the veth (HostIP)
				// from the node's address, which the host routes back.
				IPMasq: true,
				// hairpinMode lets a pod reach itself through its own
				// Service.
				HairpinMode: true,
				IPAM: cniIPAM{
					Type:    "host-local",
					DataDir: l.CNIIPAMDir(),
					Ranges:  [][]cniRange{{{Subnet: PodCIDR.String()}}},
					Routes:  []cniRoute{{Dst: "0.0.0.0/0"}},
				},
			},
			cniPortmap{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(c, "", "  ")
}

// KubeletFiles are the files KubeletConfig refers to.
type KubeletFiles struct {
	ClientCAFile, TLSCertFile, TLSPrivateKeyFile string
}

// KubeletConfig renders the kubelet's KubeletConfiguration.
func KubeletConfig(l Layout, f KubeletFiles) ([]byte, error) {
	c := kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		// These machines run cgroup v1, which the kubelet refuses by
		// default since 1.35, and no systemd.
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		ContainerRuntimeEndpoint: "unix://" + l.ContainerdSocket(),
		Address:                  NodeIP.Addr().String(),
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		TLSCertFile:              f.TLSCertFile,
		TLSPrivateKeyFile:        f.TLSPrivateKeyFile,
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: f.ClientCAFile},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
		// No cluster DNS: CoreDNS would need an image, and no registry is
		// reachable. Pods get the host's resolv.conf.
		ClusterDomain: "cluster.local",
		PodLogsDir:    l.path("pod-logs"),
		// Images come from ctr import, not a registry: garbage-collecting
		// one would lose it for good.
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		// A shared development machine's disk is often fuller than a
		// node's: evict only when it is truly about to fill.
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
		// Without CAP_SYS_RESOURCE the kubelet cannot lower its own score.
		OOMScoreAdj: ptr.To[int32](0),
		FailSwapOn:  ptr.To(false),
	}
	return yaml.Marshal(c)
}

// KubeProxyConfig renders kube-proxy's KubeProxyConfiguration (iptables
// mode).
func KubeProxyConfig(kubeconfig string) ([]byte, error) {
	c := kubeproxyconfigv1alpha1.KubeProxyConfiguration{
		TypeMeta:         metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		ClientConnection: componentbaseconfigv1alpha1.ClientConnectionConfiguration{Kubeconfig: kubeconfig},
		HostnameOverride: NodeName,
		Mode:             "iptables",
		ClusterCIDR:      PodCIDR.String(),
		// Healthz on the node's address: up waits on it from the host.
		HealthzBindAddress: NodeIP.Addr().String() + ":10256",
		MetricsBindAddress: "127.0.0.1:10249",
		// NodePorts on the node's own address only.
		NodePortAddresses: []string{"primary"},
		// Leave the conntrack table's size and timeouts as the kernel has
		// them: they are not per network namespace on every kernel.
		Conntrack: kubeproxyconfigv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptr.To[int32](0),
			Min:                   ptr.To[int32](0),
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
		},
		OOMScoreAdj: ptr.To[int32](0),
		IPTables: kubeproxyconfigv1alpha1.KubeProxyIPTablesConfiguration{
			SyncPeriod:    metav1.Duration{Duration: 30 * time.Second},
			MinSyncPeriod: metav1.Duration{Duration: time.Second},
		},
	}
	return yaml.Marshal(c)
}

// Kubeconfig is a kubeconfig for one client certificate.
func Kubeconfig(user string, caPEM []byte, cert *Cert) *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters[NodeName] = &clientcmdapi.Cluster{
		Server:                   APIServerURL(),
		CertificateAuthorityData: caPEM,
	}
	c.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cert.CertPEM,
		ClientKeyData:         cert.KeyPEM,
	}
	c.Contexts[NodeName] = &clientcmdapi.Context{Cluster: NodeName, AuthInfo: user}
	c.CurrentContext = NodeName
	return c
}

// APIServerURL is kube-apiserver's address, the same from the host and
// from inside the node.
func APIServerURL() string {
	return "https://" + NodeIP.Addr().String() + ":" + itoa(APIServerPort)
}
