package cluster

import (
	"fmt"
	"net"
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
