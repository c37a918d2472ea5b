package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/test/e2e"
)

// runBoth measures this build (cfg.controller), then the baseline, one
// after the other, each on fresh servers in a directory of its own, and
// prints their figures side by side (-baseline, BENCH_CONTROLLER).
func runBoth(ctx context.Context, cfg config, out io.Writer) error {
	dir := cfg.logDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ohmlab-bench-scale-"); err != nil {
			return err
		}
	}
	builds := []struct{ name, bin string }{{"this build", cfg.controller}, {"baseline", cfg.baseline}}
	var reports []report
	for _, b := range builds {
		c := cfg
		c.controller, c.logDir = b.bin, filepath.Join(dir, strings.ReplaceAll(b.name, " ", "-"))
		if cfg.cpuProfile != "" {
			c.cpuProfile = cfg.cpuProfile + "-" + strings.ReplaceAll(b.name, " ", "-")
		}
		if cfg.creationProfile != "" {
			c.creationProfile = cfg.creationProfile + "-" + strings.ReplaceAll(b.name, " ", "-")
		}
		if cfg.heapProfile != "" {
			c.heapProfile = cfg.heapProfile + "-" + strings.ReplaceAll(b.name, " ", "-")
		}
		if b.name == "baseline" {
			// -values are this build's; the baseline runs today's chart
			// with its own -baseline-values only.
			c.values = nil
		}
		if b.name == "baseline" && cfg.baselineValues != "" {
			if err := yaml.Unmarshal([]byte(cfg.baselineValues), &c.values); err != nil {
				return fmt.Errorf("-baseline-values: %w", err)
			}
		}
		fmt.Fprintf(os.Stderr, "--> measuring %s: %s\n", b.name, b.bin)
		r, err := run(ctx, c)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", b.name, b.bin, err)
		}
		reports = append(reports, r)
	}
	baseline := "baseline (" + cfg.baseline + ")"
	if cfg.baselineValues != "" {
		baseline += ", chart values " + cfg.baselineValues
	}
	return printColumns(out, []string{"this build (" + cfg.controller + ")", baseline}, reports)
}

// printColumns prints the reports' figures side by side: each report's
// rows, by position (the same flags give the same rows), named as the
// first report names them.
func printColumns(out io.Writer, names []string, reports []report) error {
	var tables [][][]string
	for _, r := range reports {
		var b bytes.Buffer
		r.write(&b)
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			rows = append(rows, strings.SplitN(line, "\t", 2))
		}
		tables = append(tables, rows)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for i, row := range tables[0] {
		cells := []string{row[0]}
		for k, t := range tables {
			switch {
			case i == 0:
				cells = append(cells, names[k])
			case i < len(t) && len(t[i]) == 2:
				cells = append(cells, t[i][1])
			default:
				cells = append(cells, "(no such row)")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// unknownField is the complaint of a build's strict configuration loader
// about a key it does not know (an older build and today's chart).
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// startAccepted starts the controller; when it exits refusing a key of the
// chart's configuration that its build does not know (an older build:
// `shards`), it drops that key from the configuration file and starts it
// again. It returns the keys dropped, which the report names.
func startAccepted(ctx context.Context, env *e2e.Env) (*e2e.Controller, []string, error) {
	var dropped []string
	for {
		c, err := env.StartController(ctx)
		if err == nil {
			return c, dropped, nil
		}
		m := unknownField.FindStringSubmatch(err.Error())
		if m == nil || len(dropped) >= 5 {
			return nil, dropped, err
		}
		if err := dropKey(env.Config, m[1]); err != nil {
			return nil, dropped, err
		}
		dropped = append(dropped, m[1])
		fmt.Fprintf(os.Stderr, "--> %s this build refuses the configuration key %q: dropped it, starting again\n", time.Now().Format("15:04:05"), m[1])
	}
}

// dropKey removes key wherever it appears in the YAML configuration file.
func dropKey(file, key string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	if !deleteKey(doc, key) {
		return fmt.Errorf("the build refuses %q, which %s does not hold", key, file)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o600)
}

func deleteKey(m map[string]any, key string) bool {
	_, found := m[key]
	delete(m, key)
	for _, v := range m {
		if sub, ok := v.(map[string]any); ok && deleteKey(sub, key) {
			found = true
		}
	}
	return found
}

// profiler is a process whose CPU profiles -cpuprofile-creation writes.
type profiler struct {
	// name names the process in messages.
	name string
	// base is the URL its /debug/pprof is under, asked with hc.
	base string
	// prefix is the profiles' file prefix.
	prefix string
	hc     *http.Client
}

// creationProfiles writes CPU profiles of p from now until done is closed,
// back to back, each of at most 10 s, to prefix-1.pprof, prefix-2.pprof,
// ...: a profile's length is set when it starts, and creation's is not
// known then. `go tool pprof prefix-[0-9]*.pprof` merges them.
func creationProfiles(ctx context.Context, p profiler, done <-chan struct{}) (int, error) {
	for i := 1; ; i++ {
		url := p.base + "/debug/pprof/profile?seconds=10"
		if err := fetchProfile(ctx, p.hc, "CPU profile of creation, "+p.name, url, time.Minute, fmt.Sprintf("%s-%d.pprof", p.prefix, i)); err != nil {
			return i - 1, err
		}
		select {
		case <-done:
			return i, nil
		default:
		}
	}
}

// mergeValues merges over into base, recursively for maps.
func mergeValues(base, over map[string]any) map[string]any {
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = mergeValues(bm, om)
				continue
			}
		}
		base[k] = v
	}
	return base
}
