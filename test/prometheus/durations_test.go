package prometheus_test

import (
	"testing"

	"github.com/prometheus/common/model"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// TestChartDurationsAreParsedAsPrometheusDoes checks the verdicts of charttest's duration
// table, which the chart's values schema is tested on (the PodMonitor's interval, the alerts'
// for), against Prometheus' own parser.
func TestChartDurationsAreParsedAsPrometheusDoes(t *testing.T) {
	for _, d := range charttest.PrometheusDurations {
		_, err := model.ParseDuration(d.Value)
		if got := err == nil; got != d.Valid {
			t.Errorf("%q: Prometheus accepts it: %v (%v), the table says %v", d.Value, got, err, d.Valid)
		}
	}
}
