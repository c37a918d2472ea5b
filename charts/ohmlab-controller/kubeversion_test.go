package chart_test

import (
	"strings"
	"testing"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// TestKubeVersion: the chart declares the oldest Kubernetes its objects work on, so that
// `helm template --kube-version` (Argo CD passes the cluster's) and `helm install` refuse an
// older cluster with Helm's own message, before the API server refuses the webhook's
// matchConditions or the preStop sleep, or silently drops a field it does not know. Managed
// clusters' pre-release and build spellings of a supported version still render. charttest
// renders with Helm's check (chartutil.IsCompatibleRange, as `helm template` does).
func TestKubeVersion(t *testing.T) {
	tests := []struct {
		version string
		// want is the error's text; empty: the chart renders.
		want string
	}{
		{version: "v1.29.15", want: "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.15"},
		{version: "1.28.0", want: "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.28.0"},
		{version: "v1.30.0"},
		{version: "v1.30.4-gke.1348000"},
		{version: "v1.30.5-eks-ce1d5eb"},
		{version: "v1.31.1+k3s1"},
		{version: charttest.KubeVersion},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			_, err := charttest.Run(charttest.Values(t, vaultOn), charttest.Options{KubeVersion: tt.version})
			switch {
			case tt.want == "" && err != nil:
				t.Error(err)
			case tt.want != "" && err == nil:
				t.Errorf("rendered for Kubernetes %s, want %q", tt.version, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
