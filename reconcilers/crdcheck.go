package reconcilers

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/buildinfo"
)

// crdCheck compares the release annotation of a CRD (ohmlab.fr/revision,
// set by the chart) with the binary's version, at start and then every
// period, and exposes the result as ohmlab_crd_revision_mismatch (product
// document, "Operating": OhmlabCRDRevisionMismatch). It reads the CRD by
// name, without a cache: the ClusterRole grants get on that name only.
type crdCheck struct {
	reader client.Reader
	name   string
	every  time.Duration
}

func newCRDCheck(reader client.Reader, name string, every time.Duration) *crdCheck {
	return &crdCheck{reader: reader, name: name, every: every}
}

// NeedLeaderElection is false: every replica reports on its own binary.
func (c *crdCheck) NeedLeaderElection() bool { return false }

// Start runs the check until ctx ends.
func (c *crdCheck) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, c.check, c.every)
	return nil
}

func (c *crdCheck) check(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("crd-check")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.reader.Get(ctx, client.ObjectKey{Name: c.name}, crd); err != nil {
		log.Error(err, "reading the CRD", "crd", c.name)
		return
	}
	release := crd.Annotations[ohmlabv1alpha1.CRDRevisionAnnotation]
	mismatch := 0.0
	if release != "" && buildinfo.Version != "dev" && release != buildinfo.Version {
		mismatch = 1
		log.Info("the CRD and the controller were released apart: bring the lagging one up to the same release",
			"crd", c.name, "crdRelease", release, "controllerVersion", buildinfo.Version)
	}
	crdMismatch.WithLabelValues(c.name).Set(mismatch)
}
