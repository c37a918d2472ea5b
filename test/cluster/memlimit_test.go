package cluster

import (
	"encoding/json"
	"strings"
	"testing"
)

// memoryLimit: each pod's Go runtime takes 90% of the container's memory
// limit (the cgroup the kubelet made from resources.limits.memory) as its
// soft limit, and says so in its log.
func (e *env) memoryLimit(t *testing.T) {
	ctx := t.Context()
	limit, ok := e.dep.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().AsInt64()
	if !ok || limit == 0 {
		t.Fatalf("the rendered Deployment has no memory limit (%v)", e.dep.Spec.Template.Spec.Containers[0].Resources.Limits)
	}
	want := int64(float64(limit) * 0.9)
	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.logs.Keep(ctx); err != nil {
		t.Fatal(err)
	}
	logs := e.logs.Logs()
	for _, p := range pods {
		got := int64(-1)
		for line := range strings.Lines(logs[p.Name]) {
			var l struct {
				Msg   string `json:"msg"`
				Limit int64  `json:"GOMEMLIMIT"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "Go memory limit set" {
				got = l.Limit
			}
		}
		if got != want {
			t.Errorf("pod %s: GOMEMLIMIT %d (-1: no \"Go memory limit set\" line), want %d (90%% of the container's limit, %d)", p.Name, got, want, limit)
		}
	}
}
