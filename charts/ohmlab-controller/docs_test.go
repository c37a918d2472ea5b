package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

func readChartFile(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// readmeAnchors returns the GitHub anchors of the README's headings.
func readmeAnchors(t *testing.T) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	strip := regexp.MustCompile("[^a-z0-9 _-]")
	inCode := false
	for _, line := range strings.Split(readChartFile(t, "README.md"), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		anchors[strings.ReplaceAll(strip.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")] = true
	}
	return anchors
}

func TestReadme(t *testing.T) {
	readme := readChartFile(t, "README.md")
	anchors := readmeAnchors(t)
	for _, want := range []string{"values", "topologies", "vault-side", "argo-cd", "runbooks", "security", "monitoring"} {
		if !anchors[want] {
			t.Errorf("README has no section %q (has %v)", want, sortedSet(anchors))
		}
	}
	for _, a := range alertNames {
		if !anchors[strings.ToLower(a)] {
			t.Errorf("README has no runbook section for %s", a)
		}
	}
	for _, want := range []string{
		"resource.customizations.health.ohmlab.fr_VaultSeed", // argocd-cm key
		"ignoreDifferences", "/webhooks/0/clientConfig/caBundle",
		"vault policy write", "auth/kubernetes/role/",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README does not mention %q", want)
		}
	}

	// Every leaf of the schema is in the values table.
	var schema map[string]any
	if err := json.Unmarshal([]byte(readChartFile(t, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	for _, leaf := range schemaLeaves(schema, "") {
		if leaf == "global" {
			continue
		}
		if !strings.Contains(readme, "| `"+leaf+"` |") {
			t.Errorf("README's values table has no row for `%s`", leaf)
		}
	}
}

// grouped are schema objects documented as one row.
var grouped = map[string]bool{"metrics.prometheusRule.alerts": true}

func schemaLeaves(node map[string]any, prefix string) []string {
	props, ok := node["properties"].(map[string]any)
	if !ok || grouped[prefix] {
		return []string{prefix}
	}
	var out []string
	for k, v := range props {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, schemaLeaves(v.(map[string]any), p)...)
	}
	sort.Strings(out)
	return out
}

func sortedSet(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestDashboard(t *testing.T) {
	raw := readChartFile(t, filepath.Join("files", "dashboards", "ohmlab-controller.json"))
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeated", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkMetrics(t, "dashboard panel "+p.Title, q.Expr)
			for _, m := range metricNames(q.Expr) {
				used[m] = true
			}
		}
	}
	for _, m := range knownMetrics {
		if strings.HasPrefix(m, "ohmlab_") && !used[m] {
			t.Errorf("the dashboard does not show %s", m)
		}
	}

	objs := render(t, vaultOn)
	var cm corev1.ConfigMap
	charttest.Convert(t, mustFind(t, objs, "ConfigMap", ns, fullname+"-dashboard"), &cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("labels %v", cm.Labels)
	}
	if strings.TrimSpace(cm.Data["ohmlab-controller.json"]) != strings.TrimSpace(raw) {
		t.Error("the ConfigMap does not hold the dashboard file")
	}
	if charttest.Find(render(t, vaultOn+"dashboard: {enabled: false}\n"), "ConfigMap", ns, fullname+"-dashboard") != nil {
		t.Error("dashboard rendered with dashboard.enabled=false")
	}
}
