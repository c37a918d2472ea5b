package e2e

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// The demo's objects, in config/samples.
var (
	// Keycloak is the product document's production-core-keycloak, unchanged.
	Keycloak = Sample{Name: "production-core-keycloak", Path: "ohmlab/platforms/production/core/keycloak", File: "production-core-keycloak.yaml"}
	// Grafana references Keycloak's admin password and client secret and
	// hashes the password.
	Grafana = Sample{Name: "production-core-grafana", Path: "ohmlab/platforms/production/core/grafana", File: "production-core-grafana.yaml"}
	// Broken has a dotted key name: the webhook refuses it.
	Broken = Sample{Name: "production-core-broken", Path: "ohmlab/platforms/production/core/broken", File: "invalid-dotted-key.yaml"}
	// TeamApp is an object of the tenant namespace TeamNamespace.
	TeamApp = Sample{Name: "app", Path: "ohmlab/tenants/team-a/app", File: "team-a-app.yaml", Namespace: TeamNamespace}
	// TeamEscape is TeamNamespace's object on another team's path: refused.
	TeamEscape = Sample{Name: "escape", Path: "ohmlab/tenants/team-b/app", File: "team-a-escape.yaml", Namespace: TeamNamespace}
)

// TeamNamespace is the tenant namespace of the samples TeamApp and
// TeamEscape.
const TeamNamespace = "team-a"

// BrokenRefusal is what `kubectl apply` of Broken prints of the webhook's
// refusal (the API's Invalid status, naming the object and the key); the
// CRD's schema alone admits a dotted key name.
const BrokenRefusal = `The VaultSeed "production-core-broken" is invalid: smtp.password: Invalid value: key name "smtp.password" contains a dot`

// Sample is a VaultSeed manifest of config/samples.
type Sample struct {
	Name, Path, File string
	// Namespace is the object's; "" means SeedNamespace.
	Namespace string
}

// Manifest is the sample's file path.
func (s Sample) Manifest() string {
	return filepath.Join(harness.RepoRoot(), "config", "samples", s.File)
}

// Apply runs kubectl apply -f on the sample and returns kubectl's output.
func (e *Env) Apply(ctx context.Context, s Sample) (string, error) {
	return e.Kubectl(ctx, "apply", "-f", s.Manifest())
}

// WaitReady waits with kubectl until the sample's Ready condition is True.
func (e *Env) WaitReady(ctx context.Context, s Sample) error {
	ns := s.Namespace
	if ns == "" {
		ns = SeedNamespace
	}
	out, err := e.Kubectl(ctx, "-n", ns, "wait", "--for=condition=Ready", "--timeout=120s", "vaultseed/"+s.Name)
	if err != nil {
		return fmt.Errorf("waiting for %s: %v: %s", s.Name, err, out)
	}
	return nil
}
