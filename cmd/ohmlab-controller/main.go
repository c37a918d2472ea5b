// Command ohmlab-controller runs the targets its configuration file names,
// one controller-runtime manager per target, behind one metrics endpoint and
// one probe endpoint (product document, "Topologies").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/buildinfo"
	"github.com/ohmlab/ohmlab-controller/reconcilers"
)

type flags struct {
	config           string
	metricsAddr      string
	probeAddr        string
	webhookPort      int
	webhookCertDir   string
	logLevel         string
	leaderElect      bool
	shard            string
	gracefulShutdown time.Duration
	pprofAddr        string
}

func main() {
	var f flags
	flag.StringVar(&f.config, "config", "/etc/ohmlab/config.yaml", "Configuration file: one section per target this process runs.")
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint (/metrics); \"0\" turns it off.")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of the probe endpoint (/healthz, /readyz).")
	flag.IntVar(&f.webhookPort, "webhook-port", 9443, "Port of the admission webhook server; 0 turns it off.")
	flag.StringVar(&f.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory holding the webhook's tls.crt and tls.key; reloaded when they change.")
	flag.StringVar(&f.logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	flag.BoolVar(&f.leaderElect, "leader-elect", true, "Hold a Lease per target (ohmlab-controller-<target>, or ohmlab-controller-<target>-<shard> for a target section that names a shard) so that one replica reconciles.")
	flag.StringVar(&f.shard, "shard", "", "Run every target as this shard: reconcile only the objects labelled ohmlab.fr/shard=<shard>, under the Lease ohmlab-controller-<target>-<shard>, without the webhook (the same as shard: in each target's section of the config).")
	flag.DurationVar(&f.gracefulShutdown, "graceful-shutdown-timeout", 30*time.Second, "How long in-flight reconciles may finish after SIGTERM.")
	flag.StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address of Go's profiling endpoint (/debug/pprof/), for measuring the controller (make bench-scale); empty, the default, turns it off.")
	flag.Parse()

	log, err := newLogger(f.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ohmlab-controller:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	setMemoryLimit(log)
	if err := run(ctrl.SetupSignalHandler(), f, log); err != nil {
		log.Error(err, "exiting")
		fmt.Fprintln(os.Stderr, "ohmlab-controller:", err)
		os.Exit(1)
	}
}

func newLogger(level string) (logr.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	// An error's message says what failed; a Go stack trace under it is noise
	// to the platform engineer reading the log.
	cfg.DisableStacktrace = true
	z, err := cfg.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return lazyCore{c} }))
	if err != nil {
		return logr.Logger{}, err
	}
	return zapr.NewLogger(z), nil
}

// lazyCore encodes the key-value pairs given to WithValues only when a line
// is written: controller-runtime gives every reconcile a logger with the
// object's name and a reconcile ID, and a quiet resync writes no line
// (encoding them eagerly cost a quiet resync CPU for nothing).
type lazyCore struct{ zapcore.Core }

func (c lazyCore) With(fields []zapcore.Field) zapcore.Core {
	return lazyCore{zapcore.NewLazyWith(c.Core, fields)}
}

// run starts one manager per configured target and serves the process's
// metrics and probes until ctx ends or a manager fails.
func run(ctx context.Context, f flags, log logr.Logger) error {
	data, err := os.ReadFile(f.config)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	targets, err := reconcilers.Load(data)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ohmlabv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	if err := reconcilers.RegisterMetrics(ctrlmetrics.Registry); err != nil {
		return err
	}
	// The endpoint serves the registry and the targets' own gatherers side
	// by side, without prometheus.Gatherers' second check of every series:
	// each gatherer's names are reserved in the registry.
	served := []prometheus.TransactionalGatherer{prometheus.ToTransactionalGatherer(ctrlmetrics.Registry)}
	p := reconcilers.Process{
		RestConfig: restConfig, Scheme: scheme, Registry: ctrlmetrics.Registry, Logger: log,
		Gather:         func(g prometheus.Gatherer) { served = append(served, prometheus.ToTransactionalGatherer(g)) },
		LeaderElection: f.leaderElect, GracefulShutdown: f.gracefulShutdown, Shard: f.shard,
	}
	if f.webhookPort != 0 {
		p.Webhook = &webhook.Options{Port: f.webhookPort, CertDir: f.webhookCertDir}
	}
	names := slices.Sorted(maps.Keys(targets))
	checks := healthz.Handler{Checks: map[string]healthz.Checker{}}
	managers := map[string]manager.Manager{}
	for _, name := range names {
		mgr, err := targets[name].NewManager(ctx, p)
		if err != nil {
			return err
		}
		managers[name] = mgr
		checks.Checks[name+"-cache"] = cacheSynced(mgr)
		if p.Webhook != nil && name == "vault" {
			checks.Checks[name+"-webhook"] = mgr.GetWebhookServer().StartedChecker()
		}
	}
	log.Info("starting", "version", buildinfo.Version, "revision", buildinfo.Revision, "targets", names)

	g, ctx := errgroup.WithContext(ctx)
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	serve(ctx, g, f.probeAddr, map[string]http.Handler{
		"/healthz":  http.StripPrefix("/healthz", live),
		"/healthz/": http.StripPrefix("/healthz", live),
		"/readyz":   http.StripPrefix("/readyz", &checks),
		"/readyz/":  http.StripPrefix("/readyz", &checks),
	})
	serveMetricsAndProfiles(ctx, g, f, served)
	for _, name := range names {
		mgr := managers[name]
		g.Go(func() error {
			if err := mgr.Start(ctx); err != nil {
				return fmt.Errorf("target %s: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// serveMetricsAndProfiles serves /metrics (unless the address is "0") and,
// when asked for, the profiles.
func serveMetricsAndProfiles(ctx context.Context, g *errgroup.Group, f flags, served []prometheus.TransactionalGatherer) {
	if f.metricsAddr != "0" {
		serve(ctx, g, f.metricsAddr, map[string]http.Handler{
			"/metrics": promhttp.HandlerForTransactional(prometheus.NewMultiTRegistry(served...), promhttp.HandlerOpts{}),
		})
	}
	if f.pprofAddr != "" {
		// Off by default: profiles show the process's internals to whoever
		// reaches the address.
		serve(ctx, g, f.pprofAddr, map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index),
			"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		})
	}
}

// cacheSynced is ready once the manager's cache has synced. A backend that
// is down never fails it: the probes report the process, not the backends.
func cacheSynced(mgr manager.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("cache not synced")
		}
		return nil
	}
}

// serve runs an HTTP server on addr until ctx ends.
func serve(ctx context.Context, g *errgroup.Group, addr string, routes map[string]http.Handler) {
	mux := http.NewServeMux()
	for path, h := range routes {
		mux.Handle(path, h)
	}
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving %s: %w", addr, err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	})
}
