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
// printed for each: "connected" or "refused: ...". The pod is deleted
// after.
func Dial(ctx context.Context, c *Cluster, namespace, name string, retry time.Duration, addrs []string) (map[string]string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "dial", Image: c.DialImage, ImagePullPolicy: corev1.PullNever,
				Args: append([]string{"-retry=" + retry.String()}, addrs...),
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
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
	raw, err := c.Clientset.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s's logs: %w", namespace, name, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if addr, result, ok := strings.Cut(line, " "); ok {
			got[addr] = result
		}
	}
	var missing []string
	for _, a := range addrs {
		if _, ok := got[a]; !ok {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return got, fmt.Errorf("pod %s/%s printed nothing for %s: %q", namespace, name, strings.Join(missing, ", "), raw)
	}
	return got, nil
}
