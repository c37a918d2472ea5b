package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	vaultapi "github.com/hashicorp/vault/api"
)

// The test Vault is Vault's own minimal build (the minimal build tag: no
// cloud plugins, which are most of a full build's compile). It lacks the
// Kubernetes auth method that a release build carries built in, so make
// tools builds that method's plugin, at the version Vault's go.mod pins,
// into VaultPluginDir as kubernetesPlugin; EnableKubernetesAuth registers
// it in the catalog under the built-in's name. Mounted, it answers the
// same API at the same path as the built-in.
const kubernetesPlugin = "kubernetes"

// VaultPluginDir returns the plugin directory of the test Vault servers
// (bin/vault-plugins), its symbolic links resolved: Vault refuses to run a
// plugin whose resolved path lies outside its configured directory.
func VaultPluginDir() (string, error) {
	p, err := Bin(filepath.Join("vault-plugins", kubernetesPlugin))
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	if target, err := filepath.EvalSymlinks(p); err != nil || filepath.Dir(target) != dir {
		return "", fmt.Errorf("%s leads out of its directory (%s): Vault runs only a plugin inside its plugin directory; link the directory, not the file, or run `make tools`", p, target)
	}
	return dir, nil
}

// registerKubernetesPlugin adds the Kubernetes auth plugin of
// VaultPluginDir to the catalog of the server behind c.
func registerKubernetesPlugin(ctx context.Context, c *vaultapi.Client) error {
	dir, err := VaultPluginDir()
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, kubernetesPlugin))
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	err = c.Sys().RegisterPluginWithContext(ctx, &vaultapi.RegisterPluginInput{
		Name:    kubernetesPlugin,
		Type:    vaultapi.PluginTypeCredential,
		Command: kubernetesPlugin,
		SHA256:  hex.EncodeToString(h.Sum(nil)),
	})
	if err != nil {
		return fmt.Errorf("registering the kubernetes auth plugin: %w", err)
	}
	return nil
}
