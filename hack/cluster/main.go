// Command cluster runs a real single-node Kubernetes v1.37 on this machine
// for the end-to-end tests (make cluster, make cluster-down, make
// cluster-load):
//
//	cluster up   [-dir DIR] [-k8s-bin DIR] [-pause FILE] [-timeout D]
//	cluster down [-dir DIR]
//	cluster load [-dir DIR] [-name BASE] ARCHIVE...
//	cluster load-binary [-dir DIR] REF BINARY
//	cluster exec -- COMMAND [ARG...]
//
// up starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// containerd (with runc and the CNI bridge plugin), the kubelet,
// kube-proxy (iptables mode) and kube-router's NetworkPolicy firewall, all
// in the network namespace ohmlab-node, waits until the node is Ready,
// kube-proxy and kube-router have synced and the default
// ServiceAccount exists, and prints the admin kubeconfig's path. It needs
// root. There is no cluster DNS (no image can be pulled for CoreDNS): give
// pods addresses, not names.
//
// The contract the end-to-end test relies on:
//
//   - kubeconfig: DIR/kubeconfig (make cluster: .cluster/kubeconfig),
//     cluster-admin (system:masters), server https://10.77.0.2:6443, the
//     serving certificate's CA embedded (also DIR/pki/ca.crt, which the
//     ServiceAccounts' ca.crt holds too). It works from the host. The
//     ServiceAccount issuer is https://kubernetes.default.svc.cluster.local.
//   - node: ohmlab-node, InternalIP 10.77.0.2; pod CIDR 10.244.0.0/24;
//     Service CIDR 10.96.0.0/24 (kubernetes Service 10.96.0.1). The host
//     routes both ranges through the node: a process on the host reaches
//     pods and ClusterIPs, and kube-apiserver reaches webhook Services.
//   - the node's network: nsenter --net=/run/netns/ohmlab-node COMMAND
//     (or cluster exec -- COMMAND, or ip netns exec ohmlab-node COMMAND).
//     A server listening there on 10.77.0.2 is reachable from the host and
//     the pods; a server on the host bound to 10.77.0.1 is reachable from
//     the pods too.
//   - images: cluster load imports an archive into containerd's k8s.io
//     namespace, cluster load-binary an image REF of one static BINARY (its
//     entrypoint, run as 65535, as the pause image); pods must use
//     imagePullPolicy: Never or IfNotPresent, as no registry is reachable.
//     The sandbox image is built locally.
//   - NetworkPolicy: enforced by kube-router's firewall (iptables, ipset).
//   - admission: kube-apiserver's default plugins (PodSecurity,
//     MutatingAdmissionWebhook, ValidatingAdmissionWebhook,
//     ValidatingAdmissionPolicy, ResourceQuota...) plus NodeRestriction;
//     authorization Node,RBAC.
//
// One cluster runs on a machine at a time: up refuses while
// /run/ohmlab-cluster.json (the record of what up found on the host)
// exists, and down takes down only the cluster of its own -dir (another
// checkout's is someone else's). down puts the host back: the kubelet's sysctls, the network
// namespace, every process (the daemons' and the kubepods cgroups), every
// mount, the host directories the node created; a failed up takes itself
// down the same way.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: cluster up|down|load|load-binary|exec [flags]")
	}
	fs := flag.NewFlagSet("cluster "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".cluster", "state directory (kubeconfig, PKI, configuration, logs, containerd's store)")
	abs := func() (Layout, error) {
		d, err := filepath.Abs(*dir)
		return Layout{Dir: d}, err
	}
	switch args[0] {
	case "up":
		k8sBin := fs.String("k8s-bin", "bin/k8s", "directory of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kube-router")
		pause := fs.String("pause", "", "the static pause binary (default: DIR/bin/pause)")
		timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the node to become Ready")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		l, err := abs()
		if err != nil {
			return err
		}
		o := Options{Layout: l, Timeout: *timeout, Log: stderr}
		if o.K8sBin, err = filepath.Abs(*k8sBin); err != nil {
			return err
		}
		o.Pause = *pause
		if o.Pause == "" {
			o.Pause = l.path("bin", "pause")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		kubeconfig, err := Up(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, kubeconfig)
		return nil
	case "down":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		l, err := abs()
		if err != nil {
			return err
		}
		return Down(l, stderr)
	case "load":
		base := fs.String("name", "", "repository for an OCI archive whose images carry only a tag (e.g. ghcr.io/ohmlab/ohmlab-controller)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return fmt.Errorf("usage: cluster load [-name BASE] ARCHIVE...")
		}
		l, err := abs()
		if err != nil {
			return err
		}
		return Load(l, *base, fs.Args()...)
	case "load-binary":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 2 {
			return fmt.Errorf("usage: cluster load-binary REF BINARY")
		}
		l, err := abs()
		if err != nil {
			return err
		}
		archive := filepath.Join(l.Images(), filepath.Base(fs.Arg(1))+".tar")
		if err := WriteBinaryImage(fs.Arg(0), fs.Arg(1), archive); err != nil {
			return err
		}
		return Load(l, "", archive)
	case "exec":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return fmt.Errorf("usage: cluster exec -- COMMAND [ARG...]")
		}
		cmd := InNode(fs.Arg(0), fs.Args()[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
		return cmd.Run()
	default:
		return fmt.Errorf("unknown command %q: want up, down, load, load-binary or exec", args[0])
	}
}
