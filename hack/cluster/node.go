package main

import (
	"net/netip"
	"path/filepath"
)

// The node's fixed names and addresses: the contract the end-to-end test and
// docs/maintainers/real-node.md rely on. One cluster at a time runs on a machine, so they need
// not vary.
const (
	// NodeName is the Node object's name (kubelet --hostname-override,
	// kube-proxy hostnameOverride) and the network namespace's.
	NodeName = "ohmlab-node"
	// NetNS is the network namespace every node process runs in
	// (/run/netns/ohmlab-node).
	NetNS = NodeName
	// HostVeth is the host's end of the veth pair; the node's end, inside
	// the namespace, is NodeVeth.
	HostVeth = "ohmlab0"
	NodeVeth = "eth0"
	// Bridge is the CNI bridge the pods' veths attach to, inside the
	// namespace.
	Bridge = "cni0"
)

var (
	// HostIP is the host's address on the veth link: a process on the host
	// that binds it is reachable from the pods.
	HostIP = netip.MustParsePrefix("10.77.0.1/30")
	// NodeIP is the node's InternalIP: kube-apiserver (port 6443), the
	// kubelet (10250) and any process started on the node's network listen
	// there, reachable from the host and from the pods.
	NodeIP = netip.MustParsePrefix("10.77.0.2/30")
	// PodCIDR is the node's spec.podCIDR and the CNI bridge's range.
	PodCIDR = netip.MustParsePrefix("10.244.0.0/24")
	// ServiceCIDR is the Service ClusterIP range; its first address is the
	// kubernetes Service's.
	ServiceCIDR = netip.MustParsePrefix("10.96.0.0/24")
	// KubernetesServiceIP is the ClusterIP of default/kubernetes.
	KubernetesServiceIP = ServiceCIDR.Addr().Next()
)

// APIServerPort is kube-apiserver's secure port on NodeIP.
const APIServerPort = 6443

// Layout names the files of one cluster under its state directory (make
// cluster: .cluster/ in the repository). bin/ (the cluster program and the
// pause binary, built by make) and logs/ (kept after down, for the post
// mortem) survive a down; everything else is removed.
type Layout struct{ Dir string }

func (l Layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}

// Kubeconfig is the cluster-admin kubeconfig for the host (make cluster
// prints it).
func (l Layout) Kubeconfig() string     { return l.path("kubeconfig") }
func (l Layout) PKI() string            { return l.path("pki") }
func (l Layout) Config() string         { return l.path("config") }
func (l Layout) Logs() string           { return l.path("logs") }
func (l Layout) Run() string            { return l.path("run") }
func (l Layout) Etcd() string           { return l.path("etcd") }
func (l Layout) KubeletRoot() string    { return l.path("kubelet") }
func (l Layout) ContainerdRoot() string { return l.path("containerd") }
func (l Layout) CNIConfDir() string     { return l.path("config", "cni") }
func (l Layout) CNIIPAMDir() string     { return l.path("cni-ipam") }
func (l Layout) Images() string         { return l.path("images") }

// ContainerdSocket is containerd's CRI and API socket (ctr -a).
func (l Layout) ContainerdSocket() string { return l.path("run", "containerd.sock") }

// Survivors are the entries of Dir that a down keeps.
var Survivors = []string{"bin", "logs"}
