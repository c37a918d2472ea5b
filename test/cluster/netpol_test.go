package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// networkPolicyEnforced: the release runs with networkPolicy.enabled
// (setUp), so the steps before it (pods Ready, the webhook answering
// through its Service, the keycloak example Ready from Vault) went through
// the policy. kube-router enforces it: from a pod in another namespace
// the webhook and probe ports connect and the metrics port is refused;
// from MonitoringNamespace (networkPolicy.metricsFrom) it connects.
func (e *env) networkPolicyEnforced(t *testing.T) {
	ctx := t.Context()
	var policies networkingv1.NetworkPolicyList
	if err := e.c.Client.List(ctx, &policies, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(policies.Items) == 0 {
		t.Fatalf("no NetworkPolicy in %s: the release was installed without networkPolicy.enabled", Namespace)
	}
	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	for i := range pods {
		if PodReady(&pods[i]) && pods[i].Status.PodIP != "" {
			pod = &pods[i]
			break
		}
	}
	if pod == nil {
		t.Fatalf("no Ready controller pod: %s", DescribePods(pods))
	}
	port := map[string]string{}
	for _, p := range pod.Spec.Containers[0].Ports {
		port[p.Name] = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.ContainerPort)))
	}
	if err := e.c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MonitoringNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		namespace string
		want      map[string]bool // port name -> connects
		// retry: a rule that selects the probe's namespace holds the
		// probe pod's address only once kube-router has seen it start.
		retry time.Duration
	}{
		{"default", map[string]bool{"webhook": true, "health": true, "metrics": false}, 0},
		{MonitoringNamespace, map[string]bool{"metrics": true}, 30 * time.Second},
	} {
		var addrs []string
		for name := range tt.want {
			if port[name] == "" {
				t.Fatalf("pod %s has no %s port: %v", pod.Name, name, pod.Spec.Containers[0].Ports)
			}
			addrs = append(addrs, port[name])
		}
		got, err := Dial(ctx, e.c, tt.namespace, "dial", tt.retry, addrs)
		if err != nil {
			t.Fatal(err)
		}
		for name, connects := range tt.want {
			result := got[port[name]]
			t.Logf("from %s to %s's %s port %s: %s", tt.namespace, pod.Name, name, port[name], result)
			if connects != (result == "connected") {
				t.Errorf("from a pod in %s, %s's %s port (%s): %s, want %s", tt.namespace, pod.Name, name, port[name], result, want(connects))
			}
		}
	}
	if t.Failed() {
		t.Logf("the policies: %s", describePolicies(policies.Items))
	}
}

// networkPolicyEgress: the policy's egress is default deny. From a
// controller pod (an ephemeral container in it, which shares its network
// and so its policy) Vault connects (targets.vault.extraEgress) and a name
// resolves through a DNS server in kube-system labelled k8s-app=kube-dns
// (the chart's DNS rule, over UDP, and its TCP port connects), while a
// server on the host and the same DNS server in another namespace are
// refused. The control: a pod in default, which no policy selects, reaches
// the host's server and resolves through both DNS servers, so a refusal
// from the controller's pod is its policy's.
func (e *env) networkPolicyEgress(t *testing.T) {
	ctx := t.Context()
	u, err := url.Parse(e.vault.Addr)
	if err != nil {
		t.Fatal(err)
	}
	vault := u.Host
	outside, err := HostListener(e.c.NodeIP)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	dnsLabels := map[string]string{"k8s-app": "kube-dns"} // the chart's networkPolicy.dns.podSelector
	dns := map[string]*corev1.Pod{}
	for _, ns := range []string{"kube-system", "default"} {
		pod, err := StartDNS(ctx, e.c, ns, "dns", dnsLabels, e.c.NodeIP)
		if pod != nil {
			defer func() {
				del, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = e.c.Client.Delete(del, pod)
			}()
		}
		if err != nil {
			t.Fatal(err)
		}
		dns[ns] = pod
	}
	lookup := func(ns string) string {
		return "lookup:" + DNSName + "@" + net.JoinHostPort(dns[ns].Status.PodIP, "53")
	}
	dnsTCP := func(ns string) string { return net.JoinHostPort(dns[ns].Status.PodIP, "53") }
	resolved := "resolved " + e.c.NodeIP

	control, err := Dial(ctx, e.c, "default", "dial-egress", 0, []string{outside.Addr().String(), lookup("kube-system"), lookup("default")})
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{outside.Addr().String(): "connected", lookup("kube-system"): resolved, lookup("default"): resolved} {
		t.Logf("control, from a pod in default: %s %s", target, control[target])
		if control[target] != want {
			t.Fatalf("from a pod in default, which no policy selects, %s: %s, want %s", target, control[target], want)
		}
	}

	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	for i := range pods {
		if PodReady(&pods[i]) {
			pod = &pods[i]
			break
		}
	}
	if pod == nil {
		t.Fatalf("no Ready controller pod: %s", DescribePods(pods))
	}
	for _, tt := range []struct {
		container string
		want      map[string]string // target -> result; "refused" for any refusal
		// retry: a rule that selects the DNS pod holds its address only
		// once kube-router has seen it start.
		retry time.Duration
	}{
		{"egress-allowed", map[string]string{vault: "connected", lookup("kube-system"): resolved, dnsTCP("kube-system"): "connected"}, 30 * time.Second},
		{"egress-denied", map[string]string{outside.Addr().String(): "refused", lookup("default"): "refused", dnsTCP("default"): "refused"}, 0},
	} {
		var targets []string
		for target := range tt.want {
			targets = append(targets, target)
		}
		got, err := DialFromPod(ctx, e.c, pod, tt.container, tt.retry, targets)
		if err != nil {
			t.Fatal(err)
		}
		for target, want := range tt.want {
			result := got[target]
			t.Logf("from controller pod %s: %s %s", pod.Name, target, result)
			if want == "refused" && !strings.HasPrefix(result, "refused: ") {
				t.Errorf("from controller pod %s, %s: %s, want refused by the NetworkPolicy", pod.Name, target, result)
			}
			if want != "refused" && result != want {
				t.Errorf("from controller pod %s, %s: %s, want %s", pod.Name, target, result, want)
			}
		}
	}
	if t.Failed() {
		var policies networkingv1.NetworkPolicyList
		if err := e.c.Client.List(ctx, &policies, client.InNamespace(Namespace)); err == nil {
			t.Logf("the policies: %s", describePolicies(policies.Items))
		}
	}
}

func want(connects bool) string {
	if connects {
		return "connected"
	}
	return "refused by the NetworkPolicy"
}

// describePolicies prints the policies' specs as YAML, for a failure.
func describePolicies(ps []networkingv1.NetworkPolicy) string {
	var b strings.Builder
	for _, p := range ps {
		spec, err := yaml.Marshal(p.Spec)
		if err != nil {
			spec = []byte(err.Error())
		}
		fmt.Fprintf(&b, "\n%s:\n%s", p.Name, spec)
	}
	return b.String()
}
