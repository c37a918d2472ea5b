package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Options are up's inputs.
type Options struct {
	Layout
	// K8sBin holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet, kube-proxy and kube-router.
	K8sBin string
	// Pause is the static pause binary.
	Pause string
	// Timeout bounds the wait for the node to become Ready.
	Timeout time.Duration
	Log     io.Writer
}

func (o Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Log, "cluster: "+format+"\n", args...)
}

// hostCommands are the host programs the node needs, with their Debian
// packages (make cluster-deps installs them).
var hostCommands = [][2]string{
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"iptables", "iptables"},
	{"conntrack", "conntrack"},
	{"ipset", "ipset"},
	{"ip", "iproute2"},
	{"nsenter", "util-linux"},
}

func preflight(o Options) error {
	if os.Geteuid() != 0 {
		return errors.New("the node needs root (network namespace, mounts, cgroups, sysctls)")
	}
	for _, c := range hostCommands {
		if _, err := findExecutable(c[0], c[1]); err != nil {
			return err
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if !exists(filepath.Join(CNIBinDir, p)) {
			return fmt.Errorf("CNI plugin %s not found in %s: install the Debian package containernetworking-plugins (make cluster-deps)", p, CNIBinDir)
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kube-router"} {
		if !exists(filepath.Join(o.K8sBin, b)) {
			return fmt.Errorf("%s not found in %s (make cluster builds it)", b, o.K8sBin)
		}
	}
	if !exists(o.Pause) {
		return fmt.Errorf("pause binary %s not found (make cluster builds it)", o.Pause)
	}
	return nil
}

// Up brings the node up and returns the admin kubeconfig's path. On any
// failure it takes down what it started before returning.
func Up(ctx context.Context, o Options) (kubeconfig string, err error) {
	if err := preflight(o); err != nil {
		return "", err
	}
	var rec *Record
	if err := withLock(func() error {
		var err error
		rec, err = newRecord(o.Dir)
		return err
	}); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			o.logf("up failed, taking the node down: %v", err)
			if derr := withLock(func() error { return teardown(rec, o.Log) }); derr != nil {
				err = errors.Join(err, fmt.Errorf("and the teardown: %w", derr))
			}
		}
	}()
	start := time.Now()
	// A previous run's mounts (a kubelet subPath binds a host directory
	// under the kubelet's root) must go before anything is removed.
	if err := Unmount([]string{o.Dir}); err != nil {
		return "", err
	}
	// The previous run's logs go too; bin/ (built by make) stays.
	if err := cleanState(o.Layout, "bin"); err != nil {
		return "", err
	}
	for _, d := range []string{o.Dir, o.PKI(), o.Config(), o.CNIConfDir(), o.Logs(), o.Run(), o.Images()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	files, err := writeFiles(o.Layout)
	if err != nil {
		return "", err
	}
	if err := SetUpNetwork(); err != nil {
		return "", err
	}
	d := daemons(o, files)
	started := map[string]int{}
	startOne := func(dm Daemon) error {
		p, err := dm.Start(o.Layout)
		if err != nil {
			return err
		}
		started[dm.Name] = p.Pid
		if err := AddToDaemonCgroup(p.Pid); err != nil {
			// Untracked, down would not find it.
			_ = p.Kill()
			if errors.Is(err, syscall.ESRCH) {
				// It exited before it could be tracked.
				return exited(o.Layout, dm.Name)
			}
			return fmt.Errorf("tracking %s: %w", dm.Name, err)
		}
		return nil
	}
	for _, name := range []string{"etcd", "containerd", "kube-apiserver"} {
		if err := startOne(d[name]); err != nil {
			return "", err
		}
	}
	w, err := newWaiter(o.Kubeconfig(), o.Layout, started)
	if err != nil {
		return "", err
	}
	if err := w.socket(ctx, "containerd", o.ContainerdSocket()); err != nil {
		return "", err
	}
	// The sandbox image must be in containerd's store before the kubelet
	// asks for a sandbox: it cannot be pulled.
	pauseArchive := filepath.Join(o.Images(), "pause.tar")
	if err := WriteBinaryImage(PauseImage, o.Pause, pauseArchive); err != nil {
		return "", err
	}
	if err := Load(o.Layout, "", pauseArchive); err != nil {
		return "", err
	}
	if err := w.apiServer(ctx); err != nil {
		return "", err
	}
	if err := grantKubeRouter(ctx, w.client); err != nil {
		return "", err
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if err := startOne(d[name]); err != nil {
			return "", err
		}
	}
	if err := w.node(ctx, o.Timeout); err != nil {
		return "", err
	}
	// kube-router finds its Node at start, and a pod started before its
	// first sync would run without its policies.
	if err := startOne(d["kube-router"]); err != nil {
		return "", err
	}
	if err := w.healthz(ctx, o.Timeout, "kube-router", KubeRouterHealthPort); err != nil {
		return "", err
	}
	o.logf("node %s Ready in %s; kube-apiserver %s; pods %s, Services %s", NodeName, time.Since(start).Round(100*time.Millisecond), APIServerURL(), PodCIDR, ServiceCIDR)
	return o.Kubeconfig(), nil
}

// files are the paths writeFiles wrote.
type files struct {
	ca, caKey                           string
	apiCert, apiKey                     string
	kubeletClientCert, kubeletClientKey string
	saKey, saPub                        string
	frontProxyCA                        string
	frontProxyCert, frontProxyKey       string
	// kubeconfigs by component: kube-controller-manager, kube-scheduler,
	// kubelet, kube-proxy, kube-router.
	kubeconfigs                    map[string]string
	containerd, kubelet, kubeProxy string
}

// clientIdentities are the components' client certificates: the user and
// groups Kubernetes' bootstrap RBAC policy binds for each.
var clientIdentities = map[string]CertRequest{
	"admin":                   {CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
	"kube-controller-manager": {CommonName: "system:kube-controller-manager"},
	"kube-scheduler":          {CommonName: "system:kube-scheduler"},
	"kubelet":                 {CommonName: "system:node:" + NodeName, Organization: []string{"system:nodes"}},
	"kube-proxy":              {CommonName: "system:kube-proxy"},
	// No bootstrap policy names kube-router: grantKubeRouter binds its own.
	"kube-router": {CommonName: KubeRouterUser},
}

// writeFiles writes the PKI, the kubeconfigs and the daemons' configuration.
func writeFiles(l Layout) (*files, error) {
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		return nil, err
	}
	f := &files{kubeconfigs: map[string]string{}}
	f.ca, f.caKey = filepath.Join(l.PKI(), "ca.crt"), filepath.Join(l.PKI(), "ca.key")
	caKeyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.ca, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.caKey, caKeyPEM, 0o600); err != nil {
		return nil, err
	}
	issue := func(name string, req CertRequest) (string, string, error) {
		c, err := ca.Issue(req, now)
		if err != nil {
			return "", "", err
		}
		return c.WriteFiles(l.PKI(), name)
	}
	// kube-apiserver serves on the node's address, on the kubernetes
	// Service's ClusterIP (pods) and on the namespace's loopback.
	if f.apiCert, f.apiKey, err = issue("kube-apiserver", CertRequest{
		CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", NodeName},
		IPs:      []net.IP{net.IP(NodeIP.Addr().AsSlice()), net.IP(KubernetesServiceIP.AsSlice()), net.IPv4(127, 0, 0, 1)},
	}); err != nil {
		return nil, err
	}
	if f.kubeletClientCert, f.kubeletClientKey, err = issue("kube-apiserver-kubelet-client", CertRequest{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true,
	}); err != nil {
		return nil, err
	}
	// The aggregation layer's front proxy has a CA of its own: the
	// request-header identity must not be one any client certificate of
	// the cluster CA could claim.
	frontProxyCA, err := NewCA(now)
	if err != nil {
		return nil, err
	}
	f.frontProxyCA = filepath.Join(l.PKI(), "front-proxy-ca.crt")
	if err := os.WriteFile(f.frontProxyCA, frontProxyCA.PEM, 0o644); err != nil {
		return nil, err
	}
	fp, err := frontProxyCA.Issue(CertRequest{CommonName: "front-proxy-client", Client: true}, now)
	if err != nil {
		return nil, err
	}
	if f.frontProxyCert, f.frontProxyKey, err = fp.WriteFiles(l.PKI(), "front-proxy-client"); err != nil {
		return nil, err
	}
	kubeletServingCert, kubeletServingKey, err := issue("kubelet", CertRequest{
		CommonName: NodeName, Server: true, DNSNames: []string{NodeName}, IPs: []net.IP{net.IP(NodeIP.Addr().AsSlice())},
	})
	if err != nil {
		return nil, err
	}
	saPriv, saPub, err := ServiceAccountKey()
	if err != nil {
		return nil, err
	}
	f.saKey, f.saPub = filepath.Join(l.PKI(), "sa.key"), filepath.Join(l.PKI(), "sa.pub")
	if err := os.WriteFile(f.saKey, saPriv, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.saPub, saPub, 0o644); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(clientIdentities)) {
		req := clientIdentities[name]
		req.Client = true
		c, err := ca.Issue(req, now)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(l.Config(), name+".kubeconfig")
		if name == "admin" {
			path = l.Kubeconfig()
		}
		if err := clientcmd.WriteToFile(*Kubeconfig(req.CommonName, ca.PEM, c), path); err != nil {
			return nil, err
		}
		f.kubeconfigs[name] = path
	}
	write := func(name string, render func() ([]byte, error)) (string, error) {
		b, err := render()
		if err != nil {
			return "", fmt.Errorf("rendering %s: %w", name, err)
		}
		path := filepath.Join(l.Config(), name)
		return path, os.WriteFile(path, b, 0o644)
	}
	if f.containerd, err = write("containerd.toml", func() ([]byte, error) { return ContainerdConfig(l) }); err != nil {
		return nil, err
	}
	if _, err = write(filepath.Join("cni", "10-ohmlab-pods.conflist"), func() ([]byte, error) { return CNIConfList(l) }); err != nil {
		return nil, err
	}
	if f.kubelet, err = write("kubelet.yaml", func() ([]byte, error) {
		return KubeletConfig(l, KubeletFiles{ClientCAFile: f.ca, TLSCertFile: kubeletServingCert, TLSPrivateKeyFile: kubeletServingKey})
	}); err != nil {
		return nil, err
	}
	if f.kubeProxy, err = write("kube-proxy.yaml", func() ([]byte, error) { return KubeProxyConfig(f.kubeconfigs["kube-proxy"]) }); err != nil {
		return nil, err
	}
	return f, nil
}

// daemons are the node's processes and their flags.
func daemons(o Options, f *files) map[string]Daemon {
	bin := func(name string) string { return filepath.Join(o.K8sBin, name) }
	nodeIP := NodeIP.Addr().String()
	list := []Daemon{
		{Name: "etcd", Path: bin("etcd"), Args: []string{
			"--name=" + NodeName,
			"--data-dir=" + o.Etcd(),
			"--listen-client-urls=http://127.0.0.1:2379",
			"--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380",
			"--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=" + NodeName + "=http://127.0.0.1:2380",
			// The data is thrown away at down: no fsync on a shared disk.
			"--unsafe-no-fsync",
		}},
		{Name: "kube-apiserver", Path: bin("kube-apiserver"), Args: []string{
			"--etcd-servers=http://127.0.0.1:2379",
			"--advertise-address=" + nodeIP,
			"--bind-address=0.0.0.0",
			"--secure-port=" + strconv.Itoa(APIServerPort),
			"--tls-cert-file=" + f.apiCert,
			"--tls-private-key-file=" + f.apiKey,
			"--client-ca-file=" + f.ca,
			"--service-cluster-ip-range=" + ServiceCIDR.String(),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + f.saPub,
			"--service-account-signing-key-file=" + f.saKey,
			"--authorization-mode=Node,RBAC",
			// Added to the default plugins (which include PodSecurity,
			// the admission webhooks and ValidatingAdmissionPolicy), as
			// kubeadm does.
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--kubelet-client-certificate=" + f.kubeletClientCert,
			"--kubelet-client-key=" + f.kubeletClientKey,
			"--kubelet-certificate-authority=" + f.ca,
			"--kubelet-preferred-address-types=InternalIP",
			"--requestheader-client-ca-file=" + f.frontProxyCA,
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + f.frontProxyCert,
			"--proxy-client-key-file=" + f.frontProxyKey,
		}},
		{Name: "kube-controller-manager", Path: bin("kube-controller-manager"), Args: []string{
			"--kubeconfig=" + f.kubeconfigs["kube-controller-manager"],
			"--authentication-kubeconfig=" + f.kubeconfigs["kube-controller-manager"],
			"--authorization-kubeconfig=" + f.kubeconfigs["kube-controller-manager"],
			"--bind-address=127.0.0.1",
			// One node, one of each: no election to wait for.
			"--leader-elect=false",
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + f.saKey,
			"--root-ca-file=" + f.ca,
			"--cluster-signing-cert-file=" + f.ca,
			"--cluster-signing-key-file=" + f.caKey,
			"--allocate-node-cidrs=true",
			"--cluster-cidr=" + PodCIDR.String(),
			"--node-cidr-mask-size=" + strconv.Itoa(PodCIDR.Bits()),
			"--service-cluster-ip-range=" + ServiceCIDR.String(),
		}},
		{Name: "kube-scheduler", Path: bin("kube-scheduler"), Args: []string{
			"--kubeconfig=" + f.kubeconfigs["kube-scheduler"],
			"--authentication-kubeconfig=" + f.kubeconfigs["kube-scheduler"],
			"--authorization-kubeconfig=" + f.kubeconfigs["kube-scheduler"],
			"--bind-address=127.0.0.1",
			"--leader-elect=false",
		}},
		{Name: "containerd", Path: "containerd", Args: []string{"--config=" + f.containerd}},
		{Name: "kubelet", Path: bin("kubelet"), Args: []string{
			"--config=" + f.kubelet,
			"--kubeconfig=" + f.kubeconfigs["kubelet"],
			"--root-dir=" + o.KubeletRoot(),
			"--hostname-override=" + NodeName,
			"--node-ip=" + nodeIP,
		}},
		{Name: "kube-proxy", Path: bin("kube-proxy"), Args: []string{"--config=" + f.kubeProxy}},
		{Name: "kube-router", Path: bin("kube-router"), Args: []string{
			"--kubeconfig=" + f.kubeconfigs["kube-router"],
			"--hostname-override=" + NodeName,
			"--run-firewall=true",
			"--run-router=false",
			"--run-service-proxy=false",
			"--enable-cni=false",
			"--service-cluster-ip-range=" + ServiceCIDR.String(),
			"--health-port=" + strconv.Itoa(KubeRouterHealthPort),
		}},
	}
	m := map[string]Daemon{}
	for _, d := range list {
		m[d.Name] = d
	}
	return m
}
