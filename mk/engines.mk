# Argo CD's and Prometheus' own engines on what the controller emits (issue 16):
# test/e2e records the fixtures (VaultSeed objects in every state, the /metrics
# scrape's names), test/argocd runs the Argo CD health script on them with
# Argo CD's code and kstatus, test/prometheus runs the alerts with promtool.

TOOLS        += $(BIN)/promtool
TEST_MODULES += test/argocd test/prometheus

PROMTOOL_MOD := test/tools/prometheus/go.mod test/tools/prometheus/go.sum
$(BIN)/promtool: $(PROMTOOL_MOD)
	cd test/tools/prometheus && go build $(TOOLS_GOFLAGS) -o $@ github.com/prometheus/prometheus/cmd/promtool

##@ Fixtures
.PHONY: fixtures
fixtures: $(BIN)/k8s/kube-apiserver $(BIN)/k8s/etcd $(BIN)/k8s/kubectl $(BIN)/vault ## Record the fixtures from the controller (argocd/testdata, test/prometheus/testdata/metrics.yaml).
	OHMLAB_WRITE_FIXTURES=1 go test -count=1 -run '^TestFixtures$$' ./test/e2e
	@git status --short -- charts/ohmlab-controller/argocd/testdata test/prometheus/testdata
