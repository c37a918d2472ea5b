// Package crd embeds the CRDs controller-gen writes into bases/, so that
// `ohmlab validate` judges an object by the very schema and rules the API
// server is given (internal/crdschema).
package crd

import _ "embed"

// VaultSeeds is bases/ohmlab.fr_vaultseeds.yaml.
//
//go:embed bases/ohmlab.fr_vaultseeds.yaml
var VaultSeeds []byte
