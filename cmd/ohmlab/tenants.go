package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
)

// readTenants reads targets.vault.tenants from a file that has it at that
// place: the controller chart's values file, or the controller's own
// configuration file. The section is decoded strictly over the chart's
// defaults (tenancy.DefaultConfig) and checked as the controller checks it
// at start; the rest of the file is ignored.
func readTenants(name string) (tenancy.Config, error) {
	cfg := tenancy.DefaultConfig()
	data, err := os.ReadFile(name)
	if err != nil {
		return cfg, fmt.Errorf("--values: %w", err)
	}
	var file struct {
		Targets struct {
			Vault struct {
				Namespaces []string        `json:"namespaces"`
				Tenants    json.RawMessage `json:"tenants"`
			} `json:"vault"`
		} `json:"targets"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		return cfg, fmt.Errorf("--values %s: %w", name, err)
	}
	// An empty file (a failed `helm get values > values.yaml`) would turn
	// the scope check off without a word.
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc) == 0 {
		return cfg, fmt.Errorf("--values %s: holds no values: give the chart's values (helm get values --all RELEASE)", name)
	}
	if len(file.Targets.Vault.Tenants) > 0 && string(file.Targets.Vault.Tenants) != "null" {
		if err := yaml.UnmarshalStrict(file.Targets.Vault.Tenants, &cfg); err != nil {
			return cfg, fmt.Errorf("--values %s: targets.vault.tenants: %w", name, err)
		}
	}
	if errs := cfg.Validate(file.Targets.Vault.Namespaces); len(errs) > 0 {
		return cfg, fmt.Errorf("--values %s: %s", name, strings.Join(errs, "; "))
	}
	return cfg, nil
}
