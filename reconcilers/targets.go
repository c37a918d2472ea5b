// Package reconcilers knows the controller's targets: their names, their
// configuration sections and how to build each one's manager (product
// document, "Topologies": the unit is the target, a Deployment is only
// packaging). Every target runs its own manager: its own cache, work queue
// and Lease (ohmlab-controller-<target>).
package reconcilers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"
)

// Reserved target names: the chart and the configuration know them, and the
// controller refuses to start them until they are implemented.
var reserved = []string{"harbor", "sonarqube"}

// builders build the manager of each implemented target from its section.
var builders = map[string]func(context.Context, []byte, Process) (manager.Manager, error){
	"vault": newVault,
}

// Process is what a target's manager shares with the rest of its process.
type Process struct {
	// RestConfig reaches the Kubernetes API.
	RestConfig *rest.Config
	// Scheme knows every kind the targets use.
	Scheme *runtime.Scheme
	// Registry receives the target's metrics; the process serves it on its
	// one metrics endpoint.
	Registry prometheus.Registerer
	// Logger is the process logger; each target logs under its own name.
	Logger logr.Logger
	// Webhook, when set, configures the admission webhook server of the
	// targets that have webhooks.
	Webhook *webhook.Options
	// LeaderElection turns on each target's Lease.
	LeaderElection bool
	// GracefulShutdown bounds how long in-flight reconciles may finish
	// after SIGTERM.
	GracefulShutdown time.Duration
}

// file is the configuration file: one section per target the process runs.
type file struct {
	Targets map[string]json.RawMessage `json:"targets"`
}

// Sections parses a configuration file (YAML or JSON) strictly and returns
// its target sections by name. Unknown fields, an unknown target and a
// reserved one are errors; so is a file with no target.
func Sections(data []byte) (map[string][]byte, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(f.Targets) == 0 {
		return nil, fmt.Errorf("config: targets: no target configured (known: %s)", strings.Join(Known(), ", "))
	}
	out := make(map[string][]byte, len(f.Targets))
	for name, raw := range f.Targets {
		switch {
		case slices.Contains(reserved, name):
			return nil, fmt.Errorf("config: targets.%s: reserved, not implemented yet", name)
		case builders[name] == nil:
			return nil, fmt.Errorf("config: targets.%s: unknown target (known: %s)", name, strings.Join(Known(), ", "))
		}
		out[name] = raw
	}
	return out, nil
}

// Known returns the names of the implemented targets, sorted.
func Known() []string {
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NewManager builds the manager of one target from its section.
func NewManager(ctx context.Context, name string, section []byte, p Process) (manager.Manager, error) {
	build, ok := builders[name]
	if !ok {
		return nil, fmt.Errorf("config: targets.%s: unknown target", name)
	}
	return build(ctx, section, p)
}

// decodeStrict decodes a section, refusing unknown fields.
func decodeStrict(target string, section []byte, into any) error {
	if err := yaml.UnmarshalStrict(section, into); err != nil {
		return fmt.Errorf("config: targets.%s: %w", target, err)
	}
	return nil
}
