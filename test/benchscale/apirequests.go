package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiRequests counts the kube-apiserver's requests from every client (the
// benchmark's creations and admissions, the controller's status patches,
// events and Lease renewals) by verb and resource, from its
// apiserver_request_total: where the API server's share of creation goes.
type apiRequests map[string]float64

// apiRequestsNow reads apiserver_request_total from the API server's
// /metrics, keyed "VERB resource[/subresource]" (" (dry run)" appended for
// a dry-run request).
func apiRequestsNow(ctx context.Context, rc *rest.Config) (apiRequests, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := apiRequests{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		key := label(m, "verb") + " " + label(m, "resource")
		if s := label(m, "subresource"); s != "" {
			key += "/" + s
		}
		if d := label(m, "dry_run"); d != "" {
			key += " (dry run)"
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// sub is the requests made since before.
func (a apiRequests) sub(before apiRequests) apiRequests { return since(a, before) }

// since is what each counter of now gained over before (counters that did not move are left out).
func since[M ~map[string]V, V int | float64](now, before M) M {
	out := M{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// isWrite says whether a key's verb writes.
func isWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return !strings.HasSuffix(key, " (dry run)")
	}
	return false
}

// format lists the writes (write true) or the other requests, the most
// frequent first, with their total.
func (a apiRequests) format(write bool) string {
	var keys []string
	total := 0.0
	for k, v := range a {
		if isWrite(k) == write {
			keys = append(keys, k)
			total += v
		}
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Slice(keys, func(i, j int) bool {
		if a[keys[i]] != a[keys[j]] {
			return a[keys[i]] > a[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := []string{fmt.Sprintf("%.0f in all", total)}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, a[k]))
	}
	return strings.Join(parts, ", ")
}
