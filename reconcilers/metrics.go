package reconcilers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ohmlab/ohmlab-controller/internal/buildinfo"
)

// Process-wide metrics, registered once per process by RegisterMetrics.
var (
	buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ohmlab_build_info",
		Help: "Always 1; the labels say which build runs.",
	}, []string{"version", "revision"})
	crdMismatch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ohmlab_crd_revision_mismatch",
		Help: "1 when the installed CRD was released apart from this binary (alert OhmlabCRDRevisionMismatch), else 0.",
	}, []string{"crd"})
	resync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ohmlab_resync_period_seconds",
		Help: "The target's resync period (alert OhmlabReconcileStale).",
	}, []string{"target"})
)

// RegisterMetrics registers the process-wide metrics with reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{buildInfo, crdMismatch, resync} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	buildInfo.WithLabelValues(buildinfo.Version, buildinfo.Revision).Set(1)
	return nil
}
