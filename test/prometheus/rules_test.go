// Package prometheus tests the chart's alerts with Prometheus' own rule engine (`promtool test
// rules`, built into bin/ from this module by make tools) and checks that every metric and label the
// alerts, their tests and the Grafana dashboard use is one the controller serves: the names
// come from a real scrape of /metrics that test/e2e records (testdata/metrics.yaml).
//
// It is a module of its own: Prometheus' dependency graph stays out of the controller's go.mod.
// It renders the chart with the main module's charts/charttest (replace ../..): after a change
// of the main go.mod, run go mod tidy here too.
package prometheus_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// values enable the Vault target, as an instance does; the PrometheusRule renders only with
// the Prometheus Operator's API.
const values = `
targets:
  vault:
    enabled: true
    namespaces: [vault-operator-system]
`

// wantAlerts are the alerts of the product document's "Alerts" (the chart's PrometheusRule).
var wantAlerts = []string{
	"OhmlabBackendErrors", "OhmlabBackendForbidden", "OhmlabCRDRevisionMismatch", "OhmlabControllerDown",
	"OhmlabObjectNotReady", "OhmlabReconcileStale", "OhmlabVaultDataLoss", "OhmlabWriteLoop",
}

// renderRules renders the chart with Helm's Go library and returns the PrometheusRule's spec,
// a Prometheus rules file.
func renderRules(t *testing.T) map[string]any {
	t.Helper()
	return renderRulesWith(t, values)
}

// renderRulesWith is renderRules with other values.
func renderRulesWith(t *testing.T, values string) map[string]any {
	t.Helper()
	objs := charttest.Filter(charttest.Render(t, charttest.Values(t, values), charttest.MonitoringAPI), "PrometheusRule")
	if len(objs) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(objs))
	}
	spec, ok := objs[0].Object["spec"].(map[string]any)
	if !ok {
		t.Fatal("the PrometheusRule has no spec")
	}
	return spec
}

// rule is one rule of the rendered rules file.
type rule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
}

func alertRules(t *testing.T, spec map[string]any) []rule {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// unitTests is the part of promtool's test file format this package reads.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string                    `json:"name"`
		InputSeries   []struct{ Series string } `json:"input_series"`
		AlertRuleTest []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

const alertTests = "testdata/alerts_test.yaml"

func loadUnitTests(t *testing.T) unitTests {
	t.Helper()
	return loadUnitTestsFrom(t, alertTests)
}

func loadUnitTestsFrom(t *testing.T, name string) unitTests {
	t.Helper()
	var u unitTests
	if err := yaml.Unmarshal(readFile(t, name), &u); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return u
}

// TestAlertsWithPromtool runs testdata/alerts_test.yaml with `promtool test rules` on the rules
// file the chart renders: for each alert, a series history that fires it (labels and
// annotations checked) and a healthy one that does not.
func TestAlertsWithPromtool(t *testing.T) {
	promtool, err := promtoolBin()
	if err != nil {
		t.Fatal(err)
	}
	if got := loadUnitTests(t).RuleFiles; len(got) != 1 || got[0] != "rules.yaml" {
		t.Fatalf("%s: rule_files is %v, want [rules.yaml] (the rendered chart's rules)", alertTests, got)
	}
	runPromtool(t, promtool, renderRules(t), readFile(t, alertTests))
}

// shardValues add two shards to values: an OhmlabControllerDown per shard's Deployment.
const shardValues = values + "    shards: [a, b]\n"

// shardAlertTests are the histories of the shards' OhmlabControllerDown.
const shardAlertTests = "testdata/shards_alerts_test.yaml"

// TestShardAlertsWithPromtool runs testdata/shards_alerts_test.yaml with `promtool test rules`
// on the rules the chart renders with targets.vault.shards: each Deployment's
// OhmlabControllerDown fires for its own pods only.
func TestShardAlertsWithPromtool(t *testing.T) {
	promtool, err := promtoolBin()
	if err != nil {
		t.Fatal(err)
	}
	runPromtool(t, promtool, renderRulesWith(t, shardValues), readFile(t, shardAlertTests))
}

// otherJobValues scrape the controller under another job than the chart's PodMonitor's (a
// ServiceMonitor of one's own, an annotation-based kubernetes-pods job).
const otherJobValues = values + `metrics:
  podMonitor: {enabled: false}
  prometheusRule: {job: kubernetes-pods}
`

// podMonitorJob is the job of the chart's PodMonitor in alerts_test.yaml's series.
const podMonitorJob = `job="ohmlab-controller/ohmlab-controller"`

// otherJobAlertTests are the histories that tell the two jobs apart.
const otherJobAlertTests = "testdata/other_job_alerts_test.yaml"

// TestAlertsUnderAnotherJobWithPromtool runs every history of alerts_test.yaml, its series moved
// to the job kubernetes-pods, on the rules rendered with metrics.prometheusRule.job set to it:
// each alert fires and stays silent as under the PodMonitor's job. Then
// testdata/other_job_alerts_test.yaml: series under the PodMonitor's job no longer count.
func TestAlertsUnderAnotherJobWithPromtool(t *testing.T) {
	promtool, err := promtoolBin()
	if err != nil {
		t.Fatal(err)
	}
	tests := readFile(t, alertTests)
	if n := strings.Count(string(tests), podMonitorJob); n < len(wantAlerts) {
		t.Fatalf("%s: %d series under %s, fewer than alerts", alertTests, n, podMonitorJob)
	}
	rules := renderRulesWith(t, otherJobValues)
	runPromtool(t, promtool, rules, []byte(strings.ReplaceAll(string(tests), podMonitorJob, `job="kubernetes-pods"`)))
	runPromtool(t, promtool, rules, readFile(t, otherJobAlertTests))
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// runPromtool writes the rules as rules.yaml beside the tests and runs promtool on them.
func runPromtool(t *testing.T, promtool string, spec map[string]any, tests []byte) {
	t.Helper()
	dir := t.TempDir()
	rules, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\nrules:\n%s", err, out, rules)
	}
	t.Logf("promtool test rules:\n%s", out)
}

// promtoolBin is bin/promtool (make tools), or $PROMTOOL when set.
func promtoolBin() (string, error) {
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p, nil
	}
	p := filepath.Join(charttest.RepoRoot(), "bin", "promtool")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is missing: run `make tools` at the repository root to build it", p)
	}
	return p, nil
}

// TestEveryAlertHasBothHistories checks the test file covers each rendered alert with a firing
// case and a case where it stays silent.
func TestEveryAlertHasBothHistories(t *testing.T) {
	var rendered []string
	for _, r := range alertRules(t, renderRules(t)) {
		rendered = append(rendered, r.Alert)
	}
	sort.Strings(rendered)
	if strings.Join(rendered, ",") != strings.Join(wantAlerts, ",") {
		t.Fatalf("the chart renders alerts %v, want %v", rendered, wantAlerts)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range loadUnitTests(t).Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range wantAlerts {
		if !fires[a] {
			t.Errorf("%s: no history fires it", a)
		}
		if !silent[a] {
			t.Errorf("%s: no healthy history", a)
		}
	}
}

// promql is the parser with Prometheus' default options (those of promtool).
var promql = parser.NewParser(parser.Options{})

// family is an entry of testdata/metrics.yaml.
type family struct {
	Type   string   `json:"type"`
	Labels []string `json:"labels"`
}

// targetLabels are added by the scrape (Prometheus and the chart's PodMonitor), not served on
// /metrics; namespace is the object's on ohmlab_ series (honorLabels) and the pod's elsewhere.
var targetLabels = []string{"job", "instance", "pod", "namespace", "container", "endpoint"}

// scraped returns every series name the recorded scrape shows, with its label names, as
// Prometheus stores them (a histogram as _bucket with le, _sum and _count).
func scraped(t *testing.T) map[string]map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("testdata/metrics.yaml")
	if err != nil {
		t.Fatalf("%v: run make fixtures", err)
	}
	var f struct {
		Metrics map[string]family `json:"metrics"`
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Metrics["ohmlab_object_ready"]; !ok {
		t.Fatal("testdata/metrics.yaml has no ohmlab_object_ready: run make fixtures")
	}
	series := map[string]map[string]bool{
		// up is Prometheus' own, one per scrape target.
		"up": set(targetLabels),
	}
	for name, fam := range f.Metrics {
		ls := set(append(append([]string{}, fam.Labels...), targetLabels...))
		switch fam.Type {
		case "histogram":
			series[name+"_bucket"] = set(append(keys(ls), "le"))
			series[name+"_sum"], series[name+"_count"] = ls, ls
		case "summary":
			series[name] = set(append(keys(ls), "quantile"))
			series[name+"_sum"], series[name+"_count"] = ls, ls
		default:
			series[name] = ls
		}
	}
	return series
}

func set(s []string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, e := range s {
		m[e] = true
	}
	return m
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkExpr reports every metric name and label an expression uses that the scrape does not
// have: in selectors, and in by/without/on/ignoring clauses (against the labels of the
// selectors under them).
func checkExpr(series map[string]map[string]bool, expr string) []string {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return []string{"parsing: " + err.Error()}
	}
	var problems []string
	var check func(parser.Node) map[string]bool
	check = func(n parser.Node) map[string]bool {
		available := map[string]bool{}
		if vs, ok := n.(*parser.VectorSelector); ok {
			ls, known := series[vs.Name]
			if !known {
				problems = append(problems, "metric "+vs.Name+" is not served")
				return available
			}
			for _, m := range vs.LabelMatchers {
				if m.Name != labels.MetricName && !ls[m.Name] {
					problems = append(problems, "metric "+vs.Name+" has no label "+m.Name)
				}
			}
			return ls
		}
		for _, c := range parser.Children(n) {
			for l := range check(c) {
				available[l] = true
			}
		}
		var used []string
		switch n := n.(type) {
		case *parser.AggregateExpr:
			used = n.Grouping
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				used = append(append(used, n.VectorMatching.MatchingLabels...), n.VectorMatching.Include...)
			}
		}
		for _, l := range used {
			if !available[l] {
				problems = append(problems, "label "+l+" of "+n.String()+" is on none of its series")
			}
		}
		return available
	}
	check(e)
	return problems
}

// TestAlertsUseServedMetrics checks each alert's expression against the scrape.
func TestAlertsUseServedMetrics(t *testing.T) {
	series := scraped(t)
	for _, r := range alertRules(t, renderRules(t)) {
		for _, p := range checkExpr(series, r.Expr) {
			t.Errorf("%s: %s\n  expr: %s", r.Alert, p, r.Expr)
		}
	}
}

// TestAlertTestsUseServedMetrics checks the series of every alert test file against the scrape,
// so a test cannot pass on a metric or label the controller does not serve.
func TestAlertTestsUseServedMetrics(t *testing.T) {
	series := scraped(t)
	tests := loadUnitTests(t).Tests
	for _, file := range []string{shardAlertTests, otherJobAlertTests} {
		tests = append(tests, loadUnitTestsFrom(t, file).Tests...)
	}
	for _, tc := range tests {
		for _, in := range tc.InputSeries {
			ls, err := promql.ParseMetric(in.Series)
			if err != nil {
				t.Errorf("%s: %q: %v", tc.Name, in.Series, err)
				continue
			}
			name := ls.Get(labels.MetricName)
			known, ok := series[name]
			if !ok {
				t.Errorf("%s: metric %s is not served", tc.Name, name)
				continue
			}
			ls.Range(func(l labels.Label) {
				if l.Name != labels.MetricName && !known[l.Name] {
					t.Errorf("%s: metric %s has no label %s", tc.Name, name, l.Name)
				}
			})
		}
	}
}

// grafanaInterval matches Grafana's interval variables, which stand for a duration.
var grafanaInterval = regexp.MustCompile(`\$__(rate_interval|interval|range)`)

// TestDashboardUsesServedMetrics checks every expression of the chart's Grafana dashboard.
func TestDashboardUsesServedMetrics(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(charttest.ChartDir(), "files", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard: %v", err)
	}
	series := scraped(t)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var dashboard any
		if err := json.Unmarshal(raw, &dashboard); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		exprs := collectExprs(dashboard, nil)
		if len(exprs) < 10 {
			t.Fatalf("%s: only %d expressions found", f, len(exprs))
		}
		for _, expr := range exprs {
			for _, p := range checkExpr(series, grafanaInterval.ReplaceAllString(expr, "5m")) {
				t.Errorf("%s: %s\n  expr: %s", filepath.Base(f), p, expr)
			}
		}
	}
}

// collectExprs returns the value of every "expr" key (a panel target's query).
func collectExprs(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "expr" {
				out = append(out, s)
				continue
			}
			out = collectExprs(e, out)
		}
	case []any:
		for _, e := range v {
			out = collectExprs(e, out)
		}
	}
	return out
}

// TestCheckExpr makes sure the check above finds what it is for.
func TestCheckExpr(t *testing.T) {
	series := map[string]map[string]bool{
		"ohmlab_object_ready":          set([]string{"target", "namespace", "name", "reason", "job"}),
		"ohmlab_resync_period_seconds": set([]string{"target", "job"}),
	}
	tests := []struct {
		name, expr string
		problems   int
	}{
		{name: "served", expr: `max by (target, reason) (ohmlab_object_ready{job="j", reason!="ObserveOnly"}) == 0`},
		{name: "matching on a served label", expr: `ohmlab_object_ready > on (target) group_left () ohmlab_resync_period_seconds`},
		{name: "unknown metric", expr: `ohmlab_object_readyy == 0`, problems: 1},
		{name: "unknown matcher label", expr: `ohmlab_object_ready{reasn="x"}`, problems: 1},
		{name: "unknown grouping label", expr: `sum by (controller) (ohmlab_object_ready)`, problems: 1},
		{name: "grouping label of another metric", expr: `sum by (reason) (ohmlab_resync_period_seconds)`, problems: 1},
		{name: "unknown matching label", expr: `ohmlab_object_ready > on (process) ohmlab_resync_period_seconds`, problems: 1},
		{name: "not PromQL", expr: `sum by (`, problems: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkExpr(series, tt.expr); len(got) != tt.problems {
				t.Errorf("checkExpr(%s) = %q, want %d problems", tt.expr, got, tt.problems)
			}
		})
	}
}
