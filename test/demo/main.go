// Command demo is `make demo`: it runs the controller on loopback against a
// real control plane and a real Vault, applies the product document's
// keycloak example, an object that references it and an object of the
// tenant namespace team-a, shows refusals, and keeps everything running
// until Ctrl-C (or stops at once with -exit).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ohmlab/ohmlab-controller/test/e2e"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

func main() {
	resync := flag.Duration("resync", 10*time.Minute, "The controller's resync period.")
	exit := flag.Bool("exit", false, "Stop after the refusal instead of running until Ctrl-C.")
	bin := flag.String("controller", filepath.Join(harness.RepoRoot(), "bin", "ohmlab-controller"), "The ohmlab-controller binary (make demo builds it there).")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *resync, *exit); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string, resync time.Duration, exit bool) error {
	root := harness.RepoRoot()
	dir := filepath.Join(root, ".demo")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// team-a and team-b are tenant namespaces, with the chart's defaults
	// otherwise (docs/users/tenants.md).
	tenants := []string{e2e.TeamNamespace, "team-b"}
	env, err := e2e.Start(ctx, e2e.Options{Dir: dir, Resync: resync, ControllerBin: bin,
		Log: os.Stdout, ControllerLog: logFile, Values: map[string]any{"targets": map[string]any{"vault": map[string]any{
			"tenants": map[string]any{"enabled": true, "namespaces": []any{tenants[0], tenants[1]}},
		}}}})
	if err != nil {
		return err
	}
	defer env.Stop()
	if err := env.SetUpTenants(ctx, tenants); err != nil {
		return err
	}
	controller, err := env.StartController(ctx)
	if err != nil {
		return err
	}
	defer controller.Stop()
	if err := applySamples(ctx, env, controller); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := copyFile(env.CP.Kubeconfig, kubeconfig); err != nil {
		return err
	}
	envFile := filepath.Join(dir, "env")
	lines := []string{
		"export KUBECONFIG=" + kubeconfig,
		"export VAULT_ADDR=" + env.Vault.Addr,
		"export VAULT_TOKEN=" + harness.VaultRootToken,
		"# the controller's own identity (the chart's ServiceAccount): kubectl --kubeconfig $CONTROLLER_KUBECONFIG auth can-i --list -n " + e2e.SeedNamespace,
		"export CONTROLLER_KUBECONFIG=" + env.Kubeconfig,
		"export VAULT_UNSEAL_KEY=" + env.Vault.UnsealKey() + "   # after vault operator seal: vault operator unseal $VAULT_UNSEAL_KEY",
		"export PATH=" + filepath.Join(root, "bin") + ":" + filepath.Join(root, "bin", "k8s") + ":$PATH",
	}
	if err := os.WriteFile(envFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	if exit {
		fmt.Println("==> demo done (DEMO_EXIT=1): stopping")
		return nil
	}
	fmt.Printf("==> running. In another shell: source %s, then try the README's \"Things to try\".\n", envFile)
	fmt.Printf("    The controller logs to %s. Ctrl-C stops everything.\n", logFile.Name())
	select {
	case <-ctx.Done():
		fmt.Println("==> stopping")
		return nil
	case <-controller.Done():
		return fmt.Errorf("ohmlab-controller exited: see %s", logFile.Name())
	}
}

// applySamples applies the samples until Ready, shows them and what Vault
// holds, and shows the webhook refusing a dotted key name and a tenant's
// path outside its prefix.
func applySamples(ctx context.Context, env *e2e.Env, controller *e2e.Controller) error {
	samples := []e2e.Sample{e2e.Keycloak, e2e.Grafana, e2e.TeamApp}
	for _, s := range samples {
		out, err := env.Apply(ctx, s)
		fmt.Printf("==> kubectl apply -f config/samples/%s\n%s", s.File, out)
		if err != nil {
			return err
		}
	}
	for _, s := range samples {
		if err := env.WaitReady(ctx, s); err != nil {
			return fmt.Errorf("%w\ncontroller logs:\n%s", err, controller.Logs())
		}
	}
	out, err := env.Kubectl(ctx, "get", "vaultseeds", "-A")
	fmt.Printf("==> kubectl get vaultseeds -A\n%s", out)
	if err != nil {
		return err
	}
	fmt.Println("==> what Vault holds (values masked)")
	for _, s := range samples {
		desc, err := env.DescribePath(ctx, s.Path)
		if err != nil {
			return err
		}
		fmt.Print(desc)
	}
	for _, r := range []struct {
		s    e2e.Sample
		what string
	}{{e2e.Broken, "a key name with a dot"}, {e2e.TeamEscape, "team-a's object on team-b's path"}} {
		out, err = env.Apply(ctx, r.s)
		fmt.Printf("==> kubectl apply -f config/samples/%s (%s)\n%s", r.s.File, r.what, out)
		if err == nil {
			return fmt.Errorf("the webhook admitted %s", r.s.File)
		}
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
