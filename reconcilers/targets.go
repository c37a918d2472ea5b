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
	"maps"
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

// Target is one configured target: its checked configuration section.
type Target interface {
	// NewManager builds the target's manager.
	NewManager(ctx context.Context, p Process) (manager.Manager, error)
}

// loaders decode and check the section of each implemented target.
var loaders = map[string]func(section []byte) (Target, error){
	"vault": func(section []byte) (Target, error) { return LoadVaultConfig(section) },
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
	// Gather adds a target's own gatherer to the metrics endpoint, beside
	// Registry: families built at scrape time without the registry's copy
	// of each series (vaultseed.Metrics).
	Gather func(prometheus.Gatherer)
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
	// Shard, when set (--shard), is the shard of every target of the
	// process, as if each section said shard: <Shard>; a section naming
	// another shard is an error. One config file can then serve every
	// shard's process.
	Shard string
}

// file is the configuration file: one section per target the process runs.
type file struct {
	Targets map[string]json.RawMessage `json:"targets"`
}

// Load parses a configuration file (YAML or JSON) strictly and checks every
// target section, before anything is started. Unknown fields, an unknown
// target, a reserved one and a file with no target are errors, each on one
// line naming the field.
func Load(data []byte) (map[string]Target, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(f.Targets) == 0 {
		return nil, fmt.Errorf("config: targets: no target configured (known: %s)", strings.Join(Known(), ", "))
	}
	out := make(map[string]Target, len(f.Targets))
	for _, name := range slices.Sorted(maps.Keys(f.Targets)) {
		load, ok := loaders[name]
		switch {
		case slices.Contains(reserved, name):
			return nil, fmt.Errorf("config: targets.%s: reserved, not implemented yet", name)
		case !ok:
			return nil, fmt.Errorf("config: targets.%s: unknown target (known: %s)", name, strings.Join(Known(), ", "))
		}
		t, err := load(f.Targets[name])
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// Known returns the names of the implemented targets, sorted.
func Known() []string {
	return slices.Sorted(maps.Keys(loaders))
}
