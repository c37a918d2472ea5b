// Package charttest renders the ohmlab-controller Helm chart in tests with Helm's Go library,
// the way `helm template` (and Argo CD) does: values coalesced with values.yaml, checked against
// values.schema.json, templates rendered with the given capabilities, manifests sorted in
// Helm's install order and decoded into unstructured objects.
//
// It is shared by the chart's own tests and by the envtest tests that apply the rendered
// objects to a real API server.
package charttest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/test/repo"
)

const (
	// ReleaseName is the release name Render uses.
	ReleaseName = "ohmlab-controller"
	// Namespace is the release namespace Render uses.
	Namespace = "ohmlab-controller"
	// KubeVersion is the Kubernetes version Render announces (the envtest API server's).
	KubeVersion = "v1.37.2"
	// MonitoringAPI is the Prometheus Operator's API version; the PodMonitor and the
	// PrometheusRule render only when the capabilities include it.
	MonitoringAPI = "monitoring.coreos.com/v1"
	// CertManagerAPI is cert-manager's API version. A render announces it unless
	// Options.WithoutCertManager: the webhook's serving certificate needs cert-manager or
	// webhook.certificate.secretName.
	CertManagerAPI = "cert-manager.io/v1"
)

// ChartDir is the absolute path of charts/ohmlab-controller.
func ChartDir() string {
	return filepath.Join(RepoRoot(), "charts", "ohmlab-controller")
}

// RepoRoot is the absolute path of the repository (the module root).
func RepoRoot() string { return repo.MustRoot() }

// Options of a render. The zero value renders like Render.
type Options struct {
	// ReleaseName defaults to ReleaseName.
	ReleaseName string
	// Namespace defaults to Namespace.
	Namespace string
	// KubeVersion defaults to KubeVersion.
	KubeVersion string
	// APIVersions are added to Helm's default set (every built-in Kubernetes API) and
	// CertManagerAPI, for example MonitoringAPI.
	APIVersions []string
	// WithoutCertManager leaves CertManagerAPI out, as on a cluster without cert-manager.
	WithoutCertManager bool
}

// Result of a render.
type Result struct {
	// Objects in Helm's install order (CRDs, ServiceAccounts, ..., webhooks last).
	Objects []unstructured.Unstructured
	// Notes is the rendered NOTES.txt.
	Notes string
}

// Load loads the chart from ChartDir, honouring .helmignore.
func Load() (*chart.Chart, error) {
	return loader.Load(ChartDir())
}

// Run renders the chart with values (merged over values.yaml) and options.
func Run(values map[string]any, opts Options) (*Result, error) {
	if opts.ReleaseName == "" {
		opts.ReleaseName = ReleaseName
	}
	if opts.Namespace == "" {
		opts.Namespace = Namespace
	}
	if opts.KubeVersion == "" {
		opts.KubeVersion = KubeVersion
	}
	if values == nil {
		values = map[string]any{}
	}
	chrt, err := Load()
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	kv, err := chartutil.ParseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing kube version %q: %w", opts.KubeVersion, err)
	}
	// Helm's own check and message (action.Configuration.renderResources), so that a render
	// here refuses the Kubernetes versions `helm template --kube-version` and `helm install`
	// refuse.
	if want := chrt.Metadata.KubeVersion; want != "" && !chartutil.IsCompatibleRange(want, kv.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", want, kv.String())
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	caps.APIVersions = append(slices.Clone(caps.APIVersions), opts.APIVersions...)
	if !opts.WithoutCertManager {
		caps.APIVersions = append(caps.APIVersions, CertManagerAPI)
	}

	// Copy through YAML so that the caller's map is never modified and its numbers are
	// what a values file would give.
	raw, err := yaml.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("encoding values: %w", err)
	}
	vals, err := chartutil.ReadValues(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding values: %w", err)
	}
	top, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{
		Name:      opts.ReleaseName,
		Namespace: opts.Namespace,
		Revision:  1,
		IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return nil, err
	}

	res := &Result{}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			res.Notes = content
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart renders %d hook(s); it must render none", len(hooks))
	}
	for _, m := range manifests {
		j, err := yaml.YAMLToJSON([]byte(m.Content))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if string(j) == "null" {
			continue
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", m.Name, err, m.Content)
		}
		res.Objects = append(res.Objects, u)
	}
	return res, nil
}

// RenderE renders the chart with values and options and returns its objects.
func RenderE(values map[string]any, opts Options) ([]unstructured.Unstructured, error) {
	res, err := Run(values, opts)
	if err != nil {
		return nil, err
	}
	return res.Objects, nil
}

// Render renders the chart as release ReleaseName in Namespace, with values merged over
// values.yaml and apiVersions added to the built-in ones and CertManagerAPI (MonitoringAPI for
// the Prometheus Operator's objects). It fails the test on any error.
func Render(t testing.TB, values map[string]any, apiVersions ...string) []unstructured.Unstructured {
	t.Helper()
	objs, err := RenderE(values, Options{APIVersions: apiVersions})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return objs
}

// Values builds a values map from YAML, failing the test when it does not parse.
func Values(t testing.TB, doc string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values: %v\n%s", err, doc)
	}
	return v
}

// Filter returns the objects of a kind.
func Filter(objs []unstructured.Unstructured, kind string) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// Find returns the object of a kind, namespace ("" for cluster-scoped) and name, or nil.
func Find(objs []unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for i := range objs {
		o := &objs[i]
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Key names an object as Kind/namespace/name (Kind/name when cluster-scoped).
func Key(o unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// Keys names every object, in order.
func Keys(objs []unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, Key(o))
	}
	return out
}

// Convert decodes an unstructured object into a typed one (for example a corev1 or appsv1
// struct), failing the test when it does not fit.
func Convert(t testing.TB, o unstructured.Unstructured, into any) {
	t.Helper()
	j, err := o.MarshalJSON()
	if err != nil {
		t.Fatalf("%s: %v", Key(o), err)
	}
	if err := yaml.UnmarshalStrict(j, into); err != nil {
		t.Fatalf("%s does not decode strictly into %T: %v", Key(o), into, err)
	}
}

// crdGroups are the API groups of objects that need a CRD besides the chart's own
// (cert-manager, Prometheus Operator).
var crdGroups = []string{"cert-manager.io", "monitoring.coreos.com"}

// Core returns the objects an API server accepts without third-party CRDs installed: all but
// cert-manager's and the Prometheus Operator's, in install order. The chart's own CRD is
// included; none of the core objects needs it to exist.
func Core(objs []unstructured.Unstructured) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, o := range objs {
		if !slices.Contains(crdGroups, o.GroupVersionKind().Group) {
			out = append(out, o)
		}
	}
	return out
}

// ProcessConfigs returns the config.yaml of each process, by process name, from the
// ConfigMaps the chart renders (label ohmlab.fr/process).
func ProcessConfigs(objs []unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range Filter(objs, "ConfigMap") {
		process, ok := o.GetLabels()["ohmlab.fr/process"]
		if !ok {
			continue
		}
		cfg, found, err := unstructured.NestedString(o.Object, "data", "config.yaml")
		if err == nil && found {
			out[process] = cfg
		}
	}
	return out
}

// Namespaces returns the namespaces the rendered objects live in, sorted: the release
// namespace and every watched or leader-election namespace. They must exist before the
// objects are applied.
func Namespaces(objs []unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// Duration is a spelling of a duration and whether Prometheus accepts it: the PodMonitor's
// interval and each alert's for are parsed by Prometheus (model.ParseDuration), not by Go.
type Duration struct {
	Value string
	Valid bool
}

// PrometheusDurations are the spellings the chart's values schema is checked against;
// test/prometheus checks each verdict with Prometheus' own parser.
var PrometheusDurations = []Duration{
	{Value: "30s", Valid: true},
	{Value: "90s", Valid: true},
	{Value: "1d", Valid: true},
	{Value: "2w", Valid: true},
	{Value: "1y", Valid: true},
	{Value: "1h30m", Valid: true},
	{Value: "1d12h", Valid: true},
	{Value: "500ms", Valid: true},
	{Value: "1m30s500ms", Valid: true},
	{Value: "0", Valid: true},
	{Value: "0s", Valid: true},
	{Value: "1.5h", Valid: false},
	{Value: "", Valid: false},
	{Value: "5", Valid: false},
	{Value: "-5m", Valid: false},
	{Value: "5 m", Valid: false},
	{Value: "1m1h", Valid: false},
	{Value: "10us", Valid: false},
	{Value: "1h1h", Valid: false},
}
