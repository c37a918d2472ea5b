package tenancy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure: the scope check links no Kubernetes client and no Vault client,
// so that the webhook, the CLI and the reconciler can all call it and it
// can make no request.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/ohmlab/ohmlab-controller/internal/tenancy").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go", "github.com/hashicorp/vault/api", "net/http"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("internal/tenancy links %s", dep)
			}
		}
	}
}
