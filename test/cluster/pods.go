package cluster

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeploymentPods lists the pods of a Deployment (its selector), by name.
func DeploymentPods(ctx context.Context, c *Cluster, dep *appsv1.Deployment) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the pods of %s/%s: %w", dep.Namespace, dep.Name, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

// PodReady says whether a pod is Running with its Ready condition True.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DescribePods says, one line per pod, its phase, readiness and what its
// containers wait on (for failure messages).
func DescribePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no pods"
	}
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s: phase %s, ready %t", p.Name, p.Status.Phase, PodReady(&p))
		if p.DeletionTimestamp != nil {
			b.WriteString(", terminating")
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(&b, ", %s waiting (%s: %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				fmt.Fprintf(&b, ", %s terminated (%s, exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
			if cs.RestartCount > 0 {
				fmt.Fprintf(&b, ", %d restarts", cs.RestartCount)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				fmt.Fprintf(&b, ", %s: %s", c.Type, c.Message)
			}
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// LogBook keeps the logs of the controller's pods, also of the pods a
// rollout or a deletion removes (Keep them before), to search and dump
// them at the end.
type LogBook struct {
	c        *Cluster
	selector labels.Selector
	mu       sync.Mutex
	logs     map[string]string // pod name -> its controller container's logs
}

// NewLogBook keeps the logs of the pods in Namespace matching selector.
func NewLogBook(c *Cluster, selector labels.Selector) *LogBook {
	return &LogBook{c: c, selector: selector, logs: map[string]string{}}
}

// Keep reads the logs of every matching pod now (its current and, after a
// restart, its previous container).
func (l *LogBook) Keep(ctx context.Context) error {
	var pods corev1.PodList
	if err := l.c.Client.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabelsSelector{Selector: l.selector}); err != nil {
		return err
	}
	var errs []string
	for _, p := range pods.Items {
		var all strings.Builder
		for _, previous := range []bool{true, false} {
			if previous && (len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount == 0) {
				continue
			}
			s, err := l.read(ctx, p.Name, previous)
			if apierrors.IsNotFound(err) {
				continue // gone since the list: its logs are those kept last time
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", p.Name, err))
				continue
			}
			all.WriteString(s)
		}
		l.mu.Lock()
		if all.Len() >= len(l.logs[p.Name]) {
			l.logs[p.Name] = all.String()
		}
		l.mu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("reading pod logs: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (l *LogBook) read(ctx context.Context, pod string, previous bool) (string, error) {
	rc, err := l.c.Clientset.CoreV1().Pods(Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: "controller", Previous: previous}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// Logs returns the kept logs, by pod name.
func (l *LogBook) Logs() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.logs))
	for k, v := range l.logs {
		out[k] = v
	}
	return out
}

// Secret is a value that must never be printed, and what it is (said
// instead of it).
type Secret struct {
	What, Value string
}

// Redact replaces every occurrence of each secret's value in s with
// ********.
func Redact(s string, secrets []Secret) string {
	for _, v := range secrets {
		if v.Value != "" {
			s = strings.ReplaceAll(s, v.Value, "********")
		}
	}
	return s
}
