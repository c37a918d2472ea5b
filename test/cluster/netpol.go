package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MonitoringNamespace is where the NetworkPolicy step's scraper probe
// runs: the only namespace networkPolicy.metricsFrom lets reach the
// metrics port.
const MonitoringNamespace = "monitoring"

// NetworkPolicyValues are the chart values of the README's "Network"
// section on this node: the API server's endpoints (the EndpointSlices
// of default/kubernetes, as the values' comment says to list them),
// scrapes only from MonitoringNamespace, and the way to Vault as
// targets.vault.extraEgress. Vault runs on the node's network, so the
// way is an ipBlock, not the README's selector of Vault's pods.
func NetworkPolicyValues(ctx context.Context, c *Cluster, vaultAddr string) (map[string]any, error) {
	var slices discoveryv1.EndpointSliceList
	if err := c.Client.List(ctx, &slices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("listing the kubernetes Service's EndpointSlices: %w", err)
	}
	var cidrs []any
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				cidrs = append(cidrs, a+"/32")
			}
		}
	}
	if len(cidrs) == 0 {
		return nil, fmt.Errorf("the kubernetes Service has no endpoint address")
	}
	u, err := url.Parse(vaultAddr)
	if err != nil {
		return nil, err
	}
	host, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("Vault's address %s: %w", vaultAddr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("Vault's address %s: %w", vaultAddr, err)
	}
	return map[string]any{
		"networkPolicy": map[string]any{
			"enabled":   true,
			"apiServer": map[string]any{"cidrs": cidrs},
			"metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{
				"matchLabels": map[string]any{"kubernetes.io/metadata.name": MonitoringNamespace},
			}}},
		},
		"targets": map[string]any{"vault": map[string]any{"extraEgress": []any{map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": host + "/32"}}},
			"ports": []any{map[string]any{"port": port, "protocol": "TCP"}},
		}}}},
	}, nil
}

// Dial runs cmd/dial's image in a pod of namespace, against each of
// addrs (each tried again for retry while refused), and returns what it
// printed for each: "connected", "resolved IP..." (a lookup:NAME@SERVER
// target) or "refused: ...". The pod is deleted after.
func Dial(ctx context.Context, c *Cluster, namespace, name string, retry time.Duration, addrs []string) (map[string]string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "dial", Image: c.DialImage, ImagePullPolicy: corev1.PullNever,
				Args:            append([]string{"-retry=" + retry.String()}, addrs...),
				SecurityContext: probeSecurityContext(),
			}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", namespace, name, err)
	}
	defer func() {
		del, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Client.Delete(del, pod)
	}()
	err := WaitFor(ctx, "pod "+namespace+"/"+name+" to finish", time.Second, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error(), nil
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			return true, "", nil
		case corev1.PodFailed:
			return false, "", fmt.Errorf("pod %s/%s failed: %s", namespace, name, DescribePods([]corev1.Pod{*pod}))
		}
		return false, DescribePods([]corev1.Pod{*pod}), nil
	})
	if err != nil {
		return nil, err
	}
	return dialResults(ctx, c, namespace, name, "", addrs)
}

// dialResults reads what cmd/dial printed in a pod's container ("": its
// only one), by target, naming every target it printed nothing for.
func dialResults(ctx context.Context, c *Cluster, namespace, pod, container string, targets []string) (map[string]string, error) {
	raw, err := c.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s's logs: %w", namespace, pod, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if target, result, ok := strings.Cut(line, " "); ok {
			got[target] = result
		}
	}
	var missing []string
	for _, a := range targets {
		if _, ok := got[a]; !ok {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return got, fmt.Errorf("pod %s/%s printed nothing for %s: %q", namespace, pod, strings.Join(missing, ", "), raw)
	}
	return got, nil
}

// probeSecurityContext is a probe container's: what restricted Pod
// Security asks of a container (the controller's namespace enforces it).
func probeSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// DialFromPod runs cmd/dial's image as the ephemeral container name in a
// running pod, against each target (each tried again for retry while
// refused), and returns what it printed for each. An ephemeral container
// shares its pod's network namespace, so its connections are the pod's:
// the NetworkPolicies that select the pod apply to them. Ephemeral
// containers cannot be removed; the pod keeps it, exited, until it is
// replaced.
func DialFromPod(ctx context.Context, c *Cluster, pod *corev1.Pod, name string, retry time.Duration, targets []string) (map[string]string, error) {
	p := &corev1.Pod{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
		return nil, err
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: c.DialImage, ImagePullPolicy: corev1.PullNever,
			Args:            append([]string{"-retry=" + retry.String()}, targets...),
			SecurityContext: probeSecurityContext(),
		},
	})
	if _, err := c.Clientset.CoreV1().Pods(p.Namespace).UpdateEphemeralContainers(ctx, p.Name, p, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("adding the ephemeral container %s to pod %s/%s: %w", name, p.Namespace, p.Name, err)
	}
	err := WaitFor(ctx, "ephemeral container "+name+" of pod "+p.Namespace+"/"+p.Name+" to finish", time.Second, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, err.Error(), nil
		}
		for _, cs := range p.Status.EphemeralContainerStatuses {
			if cs.Name != name {
				continue
			}
			switch {
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
				return true, "", nil
			case cs.State.Terminated != nil:
				return false, "", fmt.Errorf("ephemeral container %s of pod %s/%s exited %d: %s", name, p.Namespace, p.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
			case cs.State.Waiting != nil:
				return false, "waiting: " + cs.State.Waiting.Reason + " " + cs.State.Waiting.Message, nil
			}
			return false, "running", nil
		}
		return false, "no status yet", nil
	})
	if err != nil {
		return nil, err
	}
	return dialResults(ctx, c, p.Namespace, p.Name, name, targets)
}

// DNSName is the name the NetworkPolicy steps' DNS servers (StartDNS)
// answer, fully qualified so that no search domain of the pod's
// resolv.conf is tried first.
const DNSName = "vault.ohmlab.test."

// StartDNS runs cmd/dial's DNS server (-serve-dns) in a pod of namespace
// with labels, on port 53, answering DNSName with ip, and returns the pod
// once it is Ready (it listens). The port is below 1024: the pod lowers
// net.ipv4.ip_unprivileged_port_start (a namespaced, safe sysctl) rather
// than run as root. The caller deletes the pod.
func StartDNS(ctx context.Context, c *Cluster, namespace, name string, labels map[string]string, ip string) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
			},
			Containers: []corev1.Container{{
				Name: "dns", Image: c.DialImage, ImagePullPolicy: corev1.PullNever,
				Args:  []string{"-serve-dns=:53", "-dns-answer=" + DNSName + "=" + ip},
				Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(53)}},
					PeriodSeconds: 1,
				},
				SecurityContext: probeSecurityContext(),
			}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", namespace, name, err)
	}
	err := WaitFor(ctx, "DNS pod "+namespace+"/"+name+" to be Ready", time.Second, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error(), nil
		}
		if pod.Status.Phase == corev1.PodFailed {
			return false, "", fmt.Errorf("pod %s/%s failed: %s", namespace, name, DescribePods([]corev1.Pod{*pod}))
		}
		return PodReady(pod) && pod.Status.PodIP != "", DescribePods([]corev1.Pod{*pod}), nil
	})
	return pod, err
}

// HostListener listens on the host's end of the link to the node (the
// address the host reaches NodeIP from, which the pods reach too) and
// accepts, and closes, every connection until it is closed: an address
// no rule of the chart's NetworkPolicy names.
func HostListener(nodeIP string) (net.Listener, error) {
	// A UDP "connection" sends nothing: it only picks the route's source address.
	probe, err := net.Dial("udp", net.JoinHostPort(nodeIP, "9"))
	if err != nil {
		return nil, fmt.Errorf("finding the host's address towards the node %s: %w", nodeIP, err)
	}
	host := probe.LocalAddr().(*net.UDPAddr).IP
	probe.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(host.String(), "0"))
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return ln, nil
}
