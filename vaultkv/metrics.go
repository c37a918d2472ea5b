package vaultkv

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the backend request metrics shared by all clients of a
// process; each client labels them with its Config.Target.
//
//	ohmlab_backend_requests_total{target,operation,code}         counter
//	ohmlab_backend_request_duration_seconds{target,operation}    histogram
//
// operation is read, write, mark, delete, login or generate (a password
// from a Vault password policy); code is a ClassOf value,
// or metadata_refused for the metadata read of ReadNew that a policy older
// than the chart's refuses (the path is then read as Read does, a read of
// its own): harmless, so not forbidden, which alert OhmlabBackendForbidden
// counts. One observation is made per call of a KV method (its outcome and
// total duration, a login or retry inside it included), one per login
// request, and one per request of ReadNew.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered). When reg already holds them (a second target), the
// registered collectors are shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ohmlab_backend_requests_total",
			Help: "Requests to a backend by operation and outcome class (ok, not_found, cas_mismatch, forbidden, unavailable, invalid; metadata_refused: a new path's metadata read refused by an older policy, then read as before).",
		}, []string{"target", "operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ohmlab_backend_request_duration_seconds",
			Help:    "Duration of requests to a backend, in seconds.",
			Buckets: prometheus.DefBuckets,
		}, []string{"target", "operation"}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.duration = register(reg, m.duration)
	}
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// codeMetadataRefused is the code of ReadNew's metadata read refused by a
// policy without read on metadata (older than the chart's vault/policy.hcl).
const codeMetadataRefused = "metadata_refused"

// observe records one outcome under its code (ClassOf, unless the caller
// knows better); a nil *Metrics records nothing.
func (m *Metrics) observe(target, op, code string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(target, op, code).Inc()
	m.duration.WithLabelValues(target, op).Observe(d.Seconds())
}
