package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/reconcilers"
)

// renderedDeployment is the chart's only Deployment (the Vault target's
// process) among its rendered objects.
func renderedDeployment(objs []unstructured.Unstructured) (*appsv1.Deployment, error) {
	deps := charttest.Filter(objs, "Deployment")
	if len(deps) != 1 {
		return nil, fmt.Errorf("the chart renders %d Deployments, want the Vault target's only", len(deps))
	}
	dep := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deps[0].Object, dep); err != nil {
		return nil, err
	}
	return dep, nil
}

// vaultAudience is the audience of the pod's projected ServiceAccount
// token (the one that is not the API's).
func vaultAudience(dep *appsv1.Deployment) string {
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.Audience != "" {
				return src.ServiceAccountToken.Audience
			}
		}
	}
	return ""
}

// PodConfig reads the configuration the pod's config volume projects (the
// chart's ConfigMap, config.yaml) and decodes its targets.vault section
// with the controller's own loader.
func PodConfig(ctx context.Context, c *Cluster, pod *corev1.Pod) (reconcilers.VaultConfig, error) {
	var cfg reconcilers.VaultConfig
	var cmName string
	for _, v := range pod.Spec.Volumes {
		if v.Name == "config" && v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil && cmName == "" {
					cmName = src.ConfigMap.Name
				}
			}
		}
	}
	if cmName == "" {
		return cfg, fmt.Errorf("pod %s projects no ConfigMap in its config volume", pod.Name)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cmName}, cm); err != nil {
		return cfg, fmt.Errorf("reading ConfigMap %s: %w", cmName, err)
	}
	var file struct {
		Targets map[string]json.RawMessage `json:"targets"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &file); err != nil {
		return cfg, fmt.Errorf("ConfigMap %s, config.yaml: %w", cmName, err)
	}
	section, ok := file.Targets["vault"]
	if !ok {
		return cfg, fmt.Errorf("ConfigMap %s, config.yaml has no targets.vault", cmName)
	}
	return reconcilers.LoadVaultConfig(section)
}

// TokenVolume finds where the pod's controller container has a file: the
// volume mounted at the file's directory and, for a projected
// ServiceAccount token, the source whose path is the file's name. It
// says what it found instead when there is none.
func TokenVolume(pod *corev1.Pod, file string) (*corev1.ServiceAccountTokenProjection, error) {
	dir, name := filepath.Dir(file), filepath.Base(file)
	var ctr *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "controller" {
			ctr = &pod.Spec.Containers[i]
		}
	}
	if ctr == nil {
		return nil, fmt.Errorf("pod %s has no controller container", pod.Name)
	}
	var mounts []string
	volume := ""
	for _, m := range ctr.VolumeMounts {
		mounts = append(mounts, m.Name+" at "+m.MountPath)
		if m.MountPath == dir && m.SubPath == "" {
			volume = m.Name
		}
	}
	if volume == "" {
		return nil, fmt.Errorf("pod %s mounts nothing at %s (the directory of %s); its mounts: %s", pod.Name, dir, file, strings.Join(mounts, ", "))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		if v.Projected == nil {
			return nil, fmt.Errorf("pod %s: volume %s at %s is not a projected volume", pod.Name, volume, dir)
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.Path == name {
				return src.ServiceAccountToken, nil
			}
		}
		return nil, fmt.Errorf("pod %s: projected volume %s projects no ServiceAccount token at %s", pod.Name, volume, name)
	}
	return nil, fmt.Errorf("pod %s mounts volume %s, which it does not define", pod.Name, volume)
}

// RolledOut is a Condition: the Deployment's current generation is rolled
// out to all its replicas, each Ready, and no pod of an older template
// is left (not even terminating).
func RolledOut(c *Cluster, key client.ObjectKey, before map[string]bool) Condition {
	return func(ctx context.Context) (bool, string, error) {
		dep := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, key, dep); err != nil {
			return false, err.Error(), nil
		}
		pods, err := DeploymentPods(ctx, c, dep)
		if err != nil {
			return false, err.Error(), nil
		}
		want := int32(1)
		if dep.Spec.Replicas != nil {
			want = *dep.Spec.Replicas
		}
		st := dep.Status
		seen := fmt.Sprintf("generation %d observed %d, replicas %d updated %d ready %d available %d; pods: %s",
			dep.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, DescribePods(pods))
		if st.ObservedGeneration != dep.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want ||
			st.AvailableReplicas != want || st.Replicas != want || len(pods) != int(want) {
			return false, seen, nil
		}
		for i := range pods {
			if before[pods[i].Name] || !PodReady(&pods[i]) {
				return false, seen, nil
			}
		}
		return true, seen, nil
	}
}

// NodeReady is a Condition: a node is Ready.
func NodeReady(c *Cluster) Condition {
	return func(ctx context.Context) (bool, string, error) {
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return true, "", nil
					}
					seen = append(seen, fmt.Sprintf("%s: Ready %s (%s)", n.Name, cond.Status, cond.Message))
				}
			}
		}
		if len(seen) == 0 {
			return false, fmt.Sprintf("%d nodes, none reporting Ready", len(nodes.Items)), nil
		}
		return false, strings.Join(seen, "; "), nil
	}
}

// WebhookCertificateIssued is a Condition: the Secret of the chart's
// webhook Certificate holds a certificate and key, and the webhook
// configuration's caBundle is its CA.
func WebhookCertificateIssued(c *Cluster, objs []unstructured.Unstructured) Condition {
	return func(ctx context.Context) (bool, string, error) {
		var secretName string
		for _, cert := range charttest.Filter(objs, "Certificate") {
			if cert.GetLabels()["app.kubernetes.io/component"] == "webhook" {
				secretName, _, _ = unstructured.NestedString(cert.Object, "spec", "secretName")
			}
		}
		vwcs := charttest.Filter(objs, "ValidatingWebhookConfiguration")
		if secretName == "" || len(vwcs) != 1 {
			return false, "", fmt.Errorf("the chart renders no webhook Certificate or not one webhook configuration")
		}
		s := &corev1.Secret{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: secretName}, s); err != nil {
			return false, err.Error(), nil
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 || len(s.Data["ca.crt"]) == 0 {
			return false, fmt.Sprintf("Secret %s has keys %v", secretName, slices.Sorted(maps.Keys(s.Data))), nil
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: vwcs[0].GetName()}, vwc); err != nil {
			return false, err.Error(), nil
		}
		for _, w := range vwc.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, s.Data["ca.crt"]) {
				return false, fmt.Sprintf("Secret %s issued; webhook %s's caBundle is not its ca.crt yet", secretName, w.Name), nil
			}
		}
		return true, "", nil
	}
}
