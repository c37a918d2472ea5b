package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// kyvernoModule is the Kyverno release whose ClusterPolicy schema the
// README's policies must fit: the one test/tools/kyverno builds the CLI of,
// whose engine evaluates them (hack/image). Its CRDs come from its Go module
// source (the module cache); nothing of Kyverno is compiled here.
func kyvernoModule(t *testing.T) string {
	t.Helper()
	gomod := readChartFile(t, "../../test/tools/kyverno/go.mod")
	m := regexp.MustCompile(`(?m)^\s*github\.com/kyverno/kyverno (v\S+)`).FindStringSubmatch(gomod)
	if m == nil {
		t.Fatal("test/tools/kyverno/go.mod requires no github.com/kyverno/kyverno")
	}
	return "github.com/kyverno/kyverno@" + m[1]
}

// kyvernoClusterPolicyCRD returns the path of Kyverno's ClusterPolicy CRD.
func kyvernoClusterPolicyCRD(t *testing.T) string {
	t.Helper()
	kyvernoModule := kyvernoModule(t)
	out, err := exec.Command("go", "mod", "download", "-json", kyvernoModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", kyvernoModule, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", kyvernoModule, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "config", "crds", "kyverno", "kyverno.io_clusterpolicies.yaml")
}

// readmePolicies returns the README's Kyverno ClusterPolicies (the yaml
// blocks of "Verifying the image": with and without the transparency log).
func readmePolicies(t *testing.T) []string {
	t.Helper()
	var policies []string
	for _, block := range strings.Split(readChartFile(t, "README.md"), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: ClusterPolicy") {
			policies = append(policies, block)
		}
	}
	if len(policies) == 0 {
		t.Fatal("the README shows no Kyverno ClusterPolicy")
	}
	return policies
}

// TestKyvernoPolicyFitsKyvernosSchema server-side dry-runs each of the
// README's verify-images policies, with strict field validation, against a real
// kube-apiserver serving Kyverno's ClusterPolicy CRD; a misspelled field
// and a wrong enum value are refused, so the check can fail.
func TestKyvernoPolicyFitsKyvernosSchema(t *testing.T) {
	crd := kyvernoClusterPolicyCRD(t)
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing %s: %v", crd, err)
	}
	for i, policy := range readmePolicies(t) {
		t.Run(fmt.Sprintf("policy %d", i+1), func(t *testing.T) {
			checkPolicySchema(t, cp, policy)
		})
	}
}

// checkPolicySchema dry-runs the policy, then two broken copies of it.
func checkPolicySchema(t *testing.T, cp *harness.ControlPlane, policy string) {
	t.Helper()
	for _, want := range []string{"verifyImages:", "type: https://slsa.dev/provenance/v1", "ghcr.io/ohmlab/ohmlab-controller"} {
		if !strings.Contains(policy, want) {
			t.Errorf("the README's policy has no %q", want)
		}
	}

	tests := []struct {
		name    string
		policy  string
		wantErr string
	}{
		{name: "the README's policy", policy: policy},
		{name: "misspelled field", policy: strings.Replace(policy, "imageReferences:", "imageReference:", 1), wantErr: "imageReference"},
		{name: "unknown failure action", policy: strings.Replace(policy, "failureAction: Enforce", "failureAction: Block", 1), wantErr: "failureAction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(tt.policy), &obj.Object); err != nil {
				t.Fatalf("parsing the policy: %v", err)
			}
			err := cp.Client.Create(context.Background(), &obj, client.DryRunAll, client.FieldValidation("Strict"))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("the API server refuses the policy: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("the API server accepts the policy, want an error naming %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q does not name %q", err, tt.wantErr)
			}
		})
	}
}
