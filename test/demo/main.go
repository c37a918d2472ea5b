// Command demo is `make demo`: it runs the controller on loopback against a
// real control plane and a real Vault, applies the product document's
// keycloak example and an object that references it, shows a refusal, and
// keeps everything running until Ctrl-C (or stops at once with -exit).
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
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *resync, *exit); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, resync time.Duration, exit bool) error {
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
	env, err := e2e.Start(ctx, e2e.Options{Dir: dir, Resync: resync, ControllerBin: filepath.Join(root, "bin", "ohmlab-controller"),
		Log: os.Stdout, ControllerLog: logFile})
	if err != nil {
		return err
	}
	defer env.Stop()
	controller, err := env.StartController(ctx)
	if err != nil {
		return err
	}
	defer controller.Stop()

	for _, s := range []e2e.Sample{e2e.Keycloak, e2e.Grafana} {
		out, err := env.Apply(ctx, s)
		fmt.Printf("==> kubectl apply -f config/samples/%s\n%s", s.File, out)
		if err != nil {
			return err
		}
	}
	for _, s := range []e2e.Sample{e2e.Keycloak, e2e.Grafana} {
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
	for _, s := range []e2e.Sample{e2e.Keycloak, e2e.Grafana} {
		desc, err := env.DescribePath(ctx, s.Path)
		if err != nil {
			return err
		}
		fmt.Print(desc)
	}
	out, err = env.Apply(ctx, e2e.Broken)
	fmt.Printf("==> kubectl apply -f config/samples/%s (a key name with a dot)\n%s", e2e.Broken.File, out)
	if err == nil {
		return fmt.Errorf("the webhook admitted %s", e2e.Broken.File)
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

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
