# Argo CD's and Prometheus' own engines on what the controller emits (issue 16):
# test/e2e records the fixtures (VaultSeed objects in every state, the /metrics
# scrape's names), test/argocd runs the Argo CD health script on them with
# Argo CD's code and kstatus, test/prometheus runs the alerts with promtool.

TOOLS        += $(BIN)/promtool
TEST_MODULES += test/argocd test/prometheus

# promtool is built in test/prometheus's module, whose tests use Prometheus' packages at the same
# version: the packages they share compile once. remove_all_sd is Prometheus' own build tag that leaves
# out every service discovery (the cloud SDKs, most of promtool's build); `promtool test rules`
# discovers nothing.
PROMTOOL_MOD := test/prometheus/go.mod test/prometheus/go.sum
$(BIN)/promtool: $(PROMTOOL_MOD)
	cd test/prometheus && go build $(TOOLS_GOFLAGS) -tags remove_all_sd -o $@ github.com/prometheus/prometheus/cmd/promtool

##@ Fixtures
.PHONY: fixtures
fixtures: $(BIN)/k8s/kube-apiserver $(BIN)/k8s/etcd $(BIN)/k8s/kubectl $(VAULT) ## Record the fixtures from the controller (argocd/testdata, test/prometheus/testdata/metrics.yaml).
	OHMLAB_WRITE_FIXTURES=1 go test -count=1 -run '^TestFixtures$$' ./test/e2e
	@git status --short -- charts/ohmlab-controller/argocd/testdata test/prometheus/testdata
