package reconcilers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/reconcilers/vaultseed"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// VaultConfig is the section targets.vault of the configuration file. The
// defaults are those of DefaultVaultConfig.
type VaultConfig struct {
	// Namespaces are the only namespaces whose VaultSeeds are reconciled.
	// Required.
	Namespaces []string `json:"namespaces"`
	// ObserveOnly runs every reconcile and writes nothing to Vault.
	ObserveOnly bool `json:"observeOnly"`
	// AllowDelete lets deletionPolicy Delete remove paths.
	AllowDelete bool `json:"allowDelete"`
	// Shard, when set, makes this process one shard of the target: it
	// reconciles only the VaultSeeds labelled ohmlab.fr/shard=<shard>, with
	// a cache that holds only them, under the Lease
	// ohmlab-controller-vault-<shard>, and serves no webhook. Empty: the
	// objects without the label, under ohmlab-controller-vault.
	Shard string `json:"shard,omitempty"`
	// Shards are the shards the chart runs for the target
	// (targets.vault.shards), so that the webhook warns of an object
	// labelled with a shard that no process runs. nil, in a configuration
	// without the field (an older chart): no such warning, rather than a
	// false one; empty: no shard runs.
	Shards []string `json:"shards"`
	// ResyncPeriod is how often every object is reconciled again.
	ResyncPeriod metav1.Duration `json:"resyncPeriod"`
	// Concurrency is the number of objects reconciled at once.
	Concurrency int `json:"concurrency"`
	// LeaderElection configures the target's Lease.
	LeaderElection LeaderElection `json:"leaderElection"`
	// Backend is how to reach and log in to Vault.
	Backend VaultBackend `json:"backend"`
	// Tenants are the namespaces of application teams, each under its own
	// prefix and its own Vault identity (off by default).
	Tenants tenancy.Config `json:"tenants"`
	// Brake holds back the paths that vanished from Vault when many did
	// at once (docs/users/vault-data-loss.md).
	Brake VaultBrake `json:"brake"`
}

// VaultBrake is when the target stops creating anew the paths its objects
// wrote and that are now missing: more than VanishedShare of those paths,
// and at least MinVanished, missing within one resync period.
type VaultBrake struct {
	// VanishedShare of the paths the objects wrote, above which the brake
	// holds (more than 0, at most 1).
	VanishedShare float64 `json:"vanishedShare"`
	// MinVanished is the fewest vanished paths that hold it, so that a
	// small target is not held by one path.
	MinVanished int `json:"minVanished"`
	// ReleasedAt, an RFC 3339 time, lets through the vanished paths that
	// their objects last wrote before it: a person accepted their loss.
	// Empty: none.
	ReleasedAt string `json:"releasedAt,omitempty"`
}

// brake is the reconciler's Brake, from a checked configuration.
func (b VaultBrake) brake() vaultseed.Brake {
	released, _ := time.Parse(time.RFC3339Nano, b.ReleasedAt)
	return vaultseed.Brake{Share: b.VanishedShare, Min: b.MinVanished, ReleasedAt: released}
}

// check returns the problems of the section.
func (b VaultBrake) check() []string {
	var errs []string
	if !(b.VanishedShare > 0 && b.VanishedShare <= 1) {
		errs = append(errs, fmt.Sprintf("targets.vault.brake.vanishedShare: %g: must be more than 0 and at most 1", b.VanishedShare))
	}
	if b.MinVanished < 1 {
		errs = append(errs, fmt.Sprintf("targets.vault.brake.minVanished: %d: must be at least 1", b.MinVanished))
	}
	if _, err := time.Parse(time.RFC3339Nano, b.ReleasedAt); b.ReleasedAt != "" && err != nil {
		errs = append(errs, fmt.Sprintf("targets.vault.brake.releasedAt: %q: not an RFC 3339 time (2026-03-01T12:00:00Z)", b.ReleasedAt))
	}
	return errs
}

// LeaderElection configures a target's Lease, ohmlab-controller-<target>
// (-<shard> for a shard) unless named otherwise.
type LeaderElection struct {
	// Namespace of the Lease; "" means the pod's namespace (POD_NAMESPACE).
	Namespace string `json:"namespace"`
	// Name of the Lease, then -<shard> for a shard; "" means
	// ohmlab-controller-<target>. Two releases whose Leases share a
	// namespace need two names, or only one of them ever reconciles.
	Name string `json:"name,omitempty"`
	// LeaseDuration is how long a Lease holder is trusted without renewal,
	// so how long a hand-over takes at most.
	LeaseDuration metav1.Duration `json:"leaseDuration"`
}

// VaultBackend is how to reach Vault. It lives in the controller's
// configuration, never in an object (product document, "Security").
type VaultBackend struct {
	Address       string          `json:"address"`
	CAFile        string          `json:"caFile,omitempty"`
	TLSServerName string          `json:"tlsServerName,omitempty"`
	Timeout       metav1.Duration `json:"timeout"`
	QPS           float64         `json:"qps"`
	Burst         int             `json:"burst"`
	Auth          VaultAuth       `json:"auth"`
}

// VaultAuth says how the controller logs in to Vault.
type VaultAuth struct {
	// Method is "kubernetes" (a projected ServiceAccount token) or "token"
	// (a Vault token in a file, for local runs).
	Method string `json:"method"`
	// Mount of the Kubernetes auth method.
	Mount string `json:"mount"`
	// Role of the Kubernetes auth method.
	Role string `json:"role"`
	// Audience of the projected token; the Vault role accepts only it.
	Audience string `json:"audience"`
	// TokenFile is the projected token (kubernetes) or the Vault token
	// (token).
	TokenFile string `json:"tokenFile"`
}

// DefaultVaultConfig holds every default of targets.vault, in one place.
// The measurements behind the throughput defaults are in
// docs/maintainers/performance.md, "What shapes these figures" (make bench-scale).
func DefaultVaultConfig() VaultConfig {
	return VaultConfig{
		// Each object resyncs at its own phase of the period (see
		// vaultseed's resync), so a period is a steady trickle of reads, not
		// a burst.
		ResyncPeriod: metav1.Duration{Duration: 10 * time.Minute},
		// A reconcile spends most of its time on bcrypt (CPU) when it
		// generates a hash and otherwise waits on Vault and the API server.
		// bcrypt is bounded to one per core apart (bcryptSlots), so more
		// workers do not share the cores more: they keep a hash ready for
		// each core while the others wait on I/O.
		Concurrency:    16,
		LeaderElection: LeaderElection{Namespace: os.Getenv("POD_NAMESPACE"), LeaseDuration: metav1.Duration{Duration: 15 * time.Second}},
		Backend: VaultBackend{
			Timeout: metav1.Duration{Duration: 10 * time.Second},
			// 500 requests per second, 2 s of burst. A new path costs three
			// requests (read, marker, data), a quiet resync one read per
			// object: the limit leaves a small Vault most of its capacity
			// and is not what bounds creation, while a burst of creations
			// or a restart cannot take all of Vault. Vault's own rate limit
			// quotas still apply. The Kubernetes
			// client has no client-side limit: controller-runtime leaves it
			// to the API server's priority and fairness.
			QPS:   500,
			Burst: 1000,
			Auth: VaultAuth{
				Method:    vaultkv.MethodKubernetes,
				Mount:     "kubernetes",
				Role:      "ohmlab-controller",
				Audience:  "vault",
				TokenFile: "/var/run/secrets/ohmlab/vault/token",
			},
		},
		Tenants: tenancy.DefaultConfig(),
		// Half of the paths, and at least five: a restored snapshot or a
		// mount enabled again loses most paths at once, a person deletes
		// one or a few.
		Brake: VaultBrake{VanishedShare: 0.5, MinVanished: 5},
	}
}

// LoadVaultConfig decodes the targets.vault section strictly over the
// defaults and checks it.
func LoadVaultConfig(section []byte) (VaultConfig, error) {
	cfg := DefaultVaultConfig()
	if err := yaml.UnmarshalStrict(section, &cfg); err != nil {
		return cfg, fmt.Errorf("config: targets.vault: %w", err)
	}
	var errs []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, "targets.vault."+fmt.Sprintf(format, args...))
		}
	}
	check(len(cfg.Namespaces) > 0, "namespaces: required: list the namespaces of the VaultSeeds")
	if err := checkShard("vault", cfg.Shard); err != nil {
		errs = append(errs, "targets.vault.shard: "+err.Error())
	}
	for i, shard := range cfg.Shards {
		if shard == "" {
			errs = append(errs, fmt.Sprintf("targets.vault.shards[%d]: empty: a shard needs a name", i))
		} else if err := checkShard("vault", shard); err != nil {
			errs = append(errs, fmt.Sprintf("targets.vault.shards[%d]: %v", i, err))
		}
	}
	check(cfg.Backend.Address != "", "backend.address: required")
	check(cfg.ResyncPeriod.Duration >= time.Second, "resyncPeriod: must be at least 1s")
	check(cfg.Concurrency >= 1, "concurrency: must be at least 1")
	check(cfg.LeaderElection.LeaseDuration.Duration >= time.Second, "leaderElection.leaseDuration: must be at least 1s")
	for _, shard := range append([]string{cfg.Shard}, cfg.Shards...) {
		if msgs := validation.IsDNS1123Subdomain(cfg.leaseName(shard)); cfg.LeaderElection.Name != "" && len(msgs) > 0 {
			check(false, "leaderElection.name: the Lease %q is not a valid name: %s", cfg.leaseName(shard), strings.Join(msgs, "; "))
			break
		}
	}
	switch cfg.Backend.Auth.Method {
	case vaultkv.MethodKubernetes:
		check(cfg.Backend.Auth.Role != "", "backend.auth.role: required with method kubernetes")
		check(cfg.Backend.Auth.TokenFile != "", "backend.auth.tokenFile: required")
	case vaultkv.MethodToken:
		check(cfg.Backend.Auth.TokenFile != "", "backend.auth.tokenFile: required with method token")
	default:
		check(false, "backend.auth.method: %q is not kubernetes or token", cfg.Backend.Auth.Method)
	}
	errs = append(errs, cfg.Tenants.Validate(cfg.Namespaces)...)
	errs = append(errs, cfg.Brake.check()...)
	if len(errs) > 0 {
		return cfg, errors.New("config: " + strings.Join(errs, "; "))
	}
	return cfg, nil
}

// bcryptSlots bounds the process's bcrypt work to one computation per core,
// however many workers (targets.vault.concurrency) generate or compare
// hashes at once. Keeping a core free of bcrypt made creation slower and
// the webhook no faster (docs/maintainers/performance.md).
var bcryptSlots = templating.NewBcryptSlots(runtime.GOMAXPROCS(0))

// NewManager builds the Vault target's manager: a cache scoped to its
// namespaces (and to its shard, see cacheOptions), the VaultSeed reconciler
// of its shard, the admission webhook, the CRD revision check, and the Lease
// ohmlab-controller-vault (-<shard> for a shard).
func (cfg VaultConfig) NewManager(ctx context.Context, p Process) (manager.Manager, error) {
	if err := cfg.withProcess(p); err != nil {
		return nil, err
	}
	selector, err := ShardSelector(cfg.Shard)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	mgr, err := ctrl.NewManager(p.RestConfig, cfg.managerOptions(p, selector))
	if err != nil {
		return nil, fmt.Errorf("vault: creating the manager: %w", err)
	}
	if err := seedindex.IndexFields(ctx, mgr); err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	kvCfg := cfg.kvConfig(p)
	kv, err := vaultkv.New(kvCfg)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	var tenantKV vaultseed.KVSource
	if cfg.Tenants.Enabled {
		// The manager's client mints the tenants' tokens: a create of
		// serviceaccounts/token, which its cache does not hold.
		tenantKV = vaultseed.NewTenantKV(cfg.Tenants, kvCfg, cfg.Backend.Auth.Mount, mgr.GetClient())
	}
	metrics := vaultseed.NewMetrics(p.Registry)
	p.Gather(metrics)
	r := &vaultseed.Reconciler{
		Client:       mgr.GetClient(),
		KV:           kv,
		Generator:    templating.Generator{Rand: rand.Reader, Cache: templating.NewHashCache(rand.Reader), Slots: bcryptSlots},
		Recorder:     mgr.GetEventRecorder("ohmlab-controller-vault"),
		Metrics:      metrics,
		Target:       "vault",
		ObserveOnly:  cfg.ObserveOnly,
		AllowDelete:  cfg.AllowDelete,
		Tenants:      cfg.Tenants,
		TenantKV:     tenantKV,
		ResyncPeriod: cfg.ResyncPeriod.Duration,
		Selector:     selector,
		Brake:        cfg.Brake.brake(),
	}
	if err := r.SetupWithManager(mgr, cfg.Concurrency); err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	if p.Webhook != nil {
		if err := webhooks.SetupWithManager(mgr, cfg.Namespaces, webhooks.AllowDelete(cfg.AllowDelete), webhooks.Shards(cfg.Shards), webhooks.Tenants(cfg.Tenants)); err != nil {
			return nil, fmt.Errorf("vault: %w", err)
		}
	}
	resync.WithLabelValues("vault").Set(cfg.ResyncPeriod.Seconds())
	p.Logger.WithName("vault").Info("reconciling the VaultSeeds of its shard", "shard", cfg.Shard, "selector", selector.String(), "lease", cfg.leaseName(cfg.Shard), "webhook", p.Webhook != nil)
	if err := mgr.Add(newCRDCheck(mgr.GetAPIReader(), "vaultseeds.ohmlab.fr", cfg.ResyncPeriod.Duration)); err != nil {
		return nil, err
	}
	return mgr, nil
}

// leaseName is the Lease of shard ("" for the target's own):
// leaderElection.name, or ohmlab-controller-vault, then -<shard>.
func (cfg VaultConfig) leaseName(shard string) string {
	if cfg.LeaderElection.Name == "" {
		return LeaseName("vault", shard)
	}
	if shard == "" {
		return cfg.LeaderElection.Name
	}
	return cfg.LeaderElection.Name + "-" + shard
}

// withProcess takes the process's flags into cfg (its shard) and refuses
// what the process cannot run.
func (cfg *VaultConfig) withProcess(p Process) error {
	if p.Shard != "" {
		if cfg.Shard != "" && cfg.Shard != p.Shard {
			return fmt.Errorf("vault: --shard %q contradicts targets.vault.shard %q of the config: set one of the two", p.Shard, cfg.Shard)
		}
		if err := checkShard("vault", p.Shard); err != nil {
			return fmt.Errorf("--shard: %w", err)
		}
		cfg.Shard = p.Shard
	}
	if cfg.Shard != "" && p.Webhook != nil {
		return fmt.Errorf("vault: shard %q: a shard's process cannot serve the admission webhook: its cache holds only the shard's VaultSeeds, and the webhook's analysis (duplicate paths, reference cycles) must see every one; run it with --webhook-port=0 and let the process without a shard serve the webhook", cfg.Shard)
	}
	if p.LeaderElection && cfg.LeaderElection.Namespace == "" && !inPod() {
		// controller-runtime would say "please specify LeaderElectionNamespace".
		return fmt.Errorf("vault: the Lease %s needs a namespace: set targets.vault.leaderElection.namespace in the config (or POD_NAMESPACE), or run with --leader-elect=false", cfg.leaseName(cfg.Shard))
	}
	return nil
}

// managerOptions are the manager's: its cache, its Lease, its webhook
// server; metrics and probes are the process's, served once for every
// target.
func (cfg VaultConfig) managerOptions(p Process, selector labels.Selector) ctrl.Options {
	lease := cfg.LeaderElection.LeaseDuration.Duration
	opts := ctrl.Options{
		Scheme:                        p.Scheme,
		Logger:                        p.Logger.WithName("vault"),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Cache:                         cfg.cacheOptions(selector, p.Webhook != nil),
		MapperProvider:                newRESTMapper,
		LeaderElection:                p.LeaderElection,
		LeaderElectionID:              cfg.leaseName(cfg.Shard),
		LeaderElectionNamespace:       cfg.LeaderElection.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(lease),
		RenewDeadline:                 ptr.To(lease * 2 / 3),
		RetryPeriod:                   ptr.To(max(lease/8, 200*time.Millisecond)),
		GracefulShutdownTimeout:       ptr.To(p.GracefulShutdown),
	}
	if p.Webhook != nil {
		opts.WebhookServer = webhook.NewServer(*p.Webhook)
	}
	return opts
}

// kvConfig is the Vault client's configuration: the backend section. Its
// rate limit is one for the process: the tenants' clients share it with
// the controller's own.
func (cfg VaultConfig) kvConfig(p Process) vaultkv.Config {
	b := cfg.Backend
	limit := rate.Inf
	if b.QPS > 0 {
		limit = rate.Limit(b.QPS)
	}
	return vaultkv.Config{
		Address:       b.Address,
		CAFile:        b.CAFile,
		TLSServerName: b.TLSServerName,
		Timeout:       b.Timeout.Duration,
		Limiter:       rate.NewLimiter(limit, max(b.Burst, 1)),
		Auth: vaultkv.AuthConfig{
			Method: b.Auth.Method, Mount: b.Auth.Mount, Role: b.Auth.Role,
			Audience: b.Auth.Audience, TokenFile: b.Auth.TokenFile,
		},
		Target:  "vault",
		Metrics: vaultkv.NewMetrics(p.Registry),
		Logger:  p.Logger.WithName("vault").WithName("backend"),
	}
}

// cacheOptions scopes the cache to the target's namespaces and its
// VaultSeeds to the shard's selector, so that a shard's process holds only
// its share of the objects in memory. A process that serves the webhook
// caches every VaultSeed instead: the webhook's analysis must see the
// objects of every shard (a duplicate path or a cycle across shards), and
// its reconciler filters to its shard (vaultseed.Reconciler.Selector).
// Cached objects go without their managedFields, which nothing here reads:
// memory and GC at scale (docs/maintainers/performance.md, "Memory").
func (cfg VaultConfig) cacheOptions(selector labels.Selector, webhook bool) cache.Options {
	namespaces := map[string]cache.Config{}
	for _, ns := range cfg.Namespaces {
		namespaces[ns] = cache.Config{}
	}
	if cfg.Tenants.Enabled {
		for _, ns := range cfg.Tenants.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	opts := cache.Options{DefaultNamespaces: namespaces, DefaultTransform: cache.TransformStripManagedFields()}
	if !webhook {
		opts.ByObject = map[client.Object]cache.ByObject{&ohmlabv1alpha1.VaultSeed{}: {Label: selector}}
	}
	return opts
}

// inPod reports whether the process runs in a pod, where controller-runtime
// reads the Lease's default namespace from the ServiceAccount's mount.
func inPod() bool {
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return err == nil
}
