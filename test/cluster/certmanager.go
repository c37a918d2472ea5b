package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ohmlab/ohmlab-controller/test/certmanager"
)

// StartCertManager installs cert-manager's CRDs (from the cert-manager
// module test/certmanager builds with) and runs its issuing controllers
// and cainjector on the host, against the cluster's API server, until ctx
// ends: cert-manager's own code, without an image of it for the node.
func StartCertManager(ctx context.Context, c *Cluster, log logr.Logger) error {
	dir, err := certmanager.CRDDirectory()
	if err != nil {
		return err
	}
	// InstallCRDs waits until the API server serves every one.
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
		Paths: []string{dir}, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute,
	}); err != nil {
		return fmt.Errorf("installing cert-manager's CRDs from %s: %w", dir, err)
	}
	// client-go's informers under cainjector log through controller-runtime's root logger.
	ctrllog.SetLogger(log)
	return certmanager.Start(ctx, c.ControlPlane(), log)
}
