package main

import (
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// chartPolicies returns the Kyverno ClusterPolicies the chart's README
// shows (its yaml blocks of that kind), in order.
func chartPolicies(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "charts", "ohmlab-controller", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var policies []string
	for _, block := range strings.Split(string(readme), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: ClusterPolicy") {
			policies = append(policies, block)
		}
	}
	return policies
}

// noTlogLines are the lines by which the README's second policy, for an
// image signed without the transparency log, differs from the first.
var noTlogLines = regexp.MustCompile(`(?m)^ *(rekor: \{ignoreTlog: true\}|ctlog: \{ignoreSCT: true\})\n`)

// releaseKey is the README's placeholder for the release's public key.
var releaseKey = regexp.MustCompile(`(?m)^( *)-----BEGIN PUBLIC KEY-----\n *\(the release key: cosign\.pub\)\n *-----END PUBLIC KEY-----\n`)

// forRegistry does what the README says to do with a policy: the public
// key in both places, the registry's path in imageReferences.
func forRegistry(t *testing.T, policy, host, pubFile string) string {
	t.Helper()
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(releaseKey.FindAllString(policy, -1)); n != 2 {
		t.Fatalf("the policy has %d release key placeholders, want 2 (signature and attestation)", n)
	}
	policy = releaseKey.ReplaceAllStringFunc(policy, func(m string) string {
		indent := releaseKey.FindStringSubmatch(m)[1]
		var b strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(string(pub)), "\n") {
			b.WriteString(indent + line + "\n")
		}
		return b.String()
	})
	const ghcr = `"ghcr.io/ohmlab/ohmlab-controller*"`
	if !strings.Contains(policy, ghcr) {
		t.Fatalf("the policy's imageReferences are not %s", ghcr)
	}
	return strings.ReplaceAll(policy, "ghcr.io/ohmlab/", host+"/")
}

// outsideRequests is an HTTP proxy that refuses everything and records
// what was asked of it: the Kyverno CLI's only way out of loopback (Go
// never proxies a loopback address, so the registry is reached directly).
type outsideRequests struct {
	mu    sync.Mutex
	hosts []string
}

func (o *outsideRequests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.hosts = append(o.hosts, r.Host)
	o.mu.Unlock()
	http.Error(w, "this test allows no network beyond loopback", http.StatusForbidden)
}

// take returns the hosts asked for since the last take, each once.
func (o *outsideRequests) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := slices.Compact(slices.Sorted(slices.Values(o.hosts)))
	o.hosts = nil
	return h
}

// kyvernoResult is what kyverno apply said of one Pod.
type kyvernoResult struct {
	exitCode int
	output   string
	summary  string // "pass: 2, fail: 0, warn: 0, error: 0, skip: 0"
}

var kyvernoSummary = regexp.MustCompile(`pass: \d+, fail: \d+, warn: \d+, error: \d+, skip: \d+`)

// workload is a Pod, or a Deployment as the chart renders its processes,
// running image.
func workload(kind, image string) string {
	if kind == "Pod" {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: controller\n  namespace: ohmlab-controller\nspec:\n" +
			"  containers:\n    - name: controller\n      image: " + image + "\n"
	}
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ohmlab-controller
  namespace: ohmlab-controller
spec:
  replicas: 2
  selector:
    matchLabels: {app.kubernetes.io/name: ohmlab-controller}
  template:
    metadata:
      labels: {app.kubernetes.io/name: ohmlab-controller}
    spec:
      containers:
        - name: controller
          image: ` + image + "\n"
}

// kyvernoApply runs kyverno apply of the policy to a workload of kind
// running image, with registry access (anonymous: its own HOME holds no
// credentials) and every request beyond loopback sent to proxy.
func kyvernoApply(t *testing.T, bin, proxy, policy, kind, image string) kyvernoResult {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.yaml"), policy)
	writeFile(t, filepath.Join(dir, "resource.yaml"), workload(kind, image))
	cmd := exec.Command(bin, "apply", "policy.yaml", "--resource", "resource.yaml", "--registry", "--remove-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "DOCKER_CONFIG="+filepath.Join(dir, ".docker"),
		"HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	res := kyvernoResult{output: string(out), summary: kyvernoSummary.FindString(string(out))}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.exitCode = exit.ExitCode()
	case err != nil:
		t.Fatalf("kyverno apply: %v", err)
	}
	t.Logf("$ kyverno apply policy.yaml --resource resource.yaml (%s, image %s): exit code %d\n%s", kind, image, res.exitCode, out)
	return res
}

// TestKyvernoAdmitsOnlyTheSignedImage evaluates the chart README's
// verify-images policy with Kyverno's own engine (bin/kyverno, its CLI,
// built by make tools from test/tools/kyverno), offline, against a
// registry on loopback: the release image that make sign signed and
// attested is admitted (its tag rewritten to its digest), as a Pod and as a
// Deployment. Refused: an unsigned image; one signed and attested with
// another key; the release when the policy names another key; and, signed
// with the release key, one it did not attest, one attested with another
// predicate type, and ones attested with a provenance the release process
// does not write (another builder, or built from a fork's clone): what the
// policy checks beyond the key.
//
// The policy run is the README's second one, for an image signed without
// the transparency log (as here: offline). The first, for make sign's
// default, asks Sigstore's TUF repository for its trusted root, so offline
// it refuses every image: the test checks that, and that the two policies
// differ only by the lines that skip the log.
func TestKyvernoAdmitsOnlyTheSignedImage(t *testing.T) {
	policies := chartPolicies(t)
	if len(policies) != 2 {
		t.Fatalf("the chart's README shows %d Kyverno ClusterPolicies, want 2 (with and without the transparency log)", len(policies))
	}
	tlogPolicy, offlinePolicy := policies[0], policies[1]
	if got := noTlogLines.ReplaceAllString(offlinePolicy, ""); got != tlogPolicy {
		t.Errorf("the README's two policies differ by more than rekor.ignoreTlog and ctlog.ignoreSCT:\n%s\n---\n%s", tlogPolicy, offlinePolicy)
	}
	if n := len(noTlogLines.FindAllString(offlinePolicy, -1)); n != 4 {
		t.Errorf("the second policy has %d rekor/ctlog lines, want 4 (both, for the signature and the attestation)", n)
	}

	res, out := buildOnce(t)
	kyverno := toolBin(t, "kyverno")
	// Without the referrers API, clients keep an image's referrers in the
	// index tagged sha256-<digest>, with each manifest's artifactType. The
	// in-process registry's referrers API lists the config's media type as
	// the artifact type instead (against the distribution spec), which
	// hides cosign's Sigstore bundles from Kyverno.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	outside := &outsideRequests{}
	proxy := httptest.NewServer(outside)
	t.Cleanup(proxy.Close)

	// The release: pushed and signed as make image-push and make sign do.
	if _, err := Push(filepath.Join(out, "oci"), host+"/ohmlab-controller:"+testVersion(t), true); err != nil {
		t.Fatal(err)
	}
	release, flags := offlineSigner(t, toolBin(t, "cosign"), host)
	makeSign(t, release, host, out, flags)

	// Other images, each behind its own tag, signed by hand as make sign
	// does: by signer (none: unsigned), attested with a predicate of type
	// predicateType (none: not attested) made from the release's
	// provenance by edit.
	cosignBin := toolBin(t, "cosign")
	other, otherFlags := offlineSigner(t, cosignBin, host)
	type signing struct {
		signer        *cosignRun
		flags         string
		predicateType string
		edit          func(p *provenance)
	}
	push := func(tag string, sg signing) {
		idx := tamper(t, res.Index, "#!/bin/sh\necho "+tag+"\n")
		ref, err := name.NewTag(host+"/ohmlab-controller:"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(ref, idx); err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if sg.signer == nil {
			return
		}
		digestRef := ref.Context().Digest(d.String()).String()
		key := filepath.Join(sg.signer.dir, "cosign.key")
		args := strings.Fields(sg.flags)
		if _, err := sg.signer.run(append([]string{"sign", "--yes", "--key", key}, append(args, digestRef)...)...); err != nil {
			t.Fatalf("cosign sign %s: %v", tag, err)
		}
		if sg.predicateType == "" {
			return
		}
		raw, err := os.ReadFile(filepath.Join(out, "provenance.json"))
		if err != nil {
			t.Fatal(err)
		}
		var p provenance
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if sg.edit != nil {
			sg.edit(&p)
		}
		if raw, err = json.Marshal(p); err != nil {
			t.Fatal(err)
		}
		predicate := filepath.Join(t.TempDir(), "provenance.json")
		writeFile(t, predicate, string(raw))
		if _, err := sg.signer.run(append([]string{"attest", "--yes", "--key", key, "--type", sg.predicateType,
			"--predicate", predicate}, append(args, digestRef)...)...); err != nil {
			t.Fatalf("cosign attest %s: %v", tag, err)
		}
	}
	const slsa = "slsaprovenance1"
	push("unsigned", signing{})
	push("other-key", signing{signer: &other, flags: otherFlags, predicateType: slsa})
	push("signed-only", signing{signer: &release, flags: flags})
	push("another-predicate", signing{signer: &release, flags: flags, predicateType: "https://example.com/provenance/v1"})
	push("toolchain-builder", signing{signer: &release, flags: flags, predicateType: slsa, edit: func(p *provenance) {
		p.RunDetails.Builder.ID = "pkg:golang/golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64"
	}})
	push("fork", signing{signer: &release, flags: flags, predicateType: slsa, edit: func(p *provenance) {
		p.BuildDefinition.ExternalParameters.Source.URI = "git+https://github.com/someone/ohmlab-controller"
	}})

	releasePub := filepath.Join(release.dir, "cosign.pub")
	otherPub := filepath.Join(other.dir, "cosign.pub")
	releaseTag := host + "/ohmlab-controller:" + testVersion(t)
	tagged := func(tag string) string { return host + "/ohmlab-controller:" + tag }
	const (
		noSignature = ".attestors[0].entries[0].keys: sigstore bundle verification failed: no matching signatures found"
		// No attestation of the policy's type that the key signed.
		noAttestation = "image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: sigstore bundle verification failed"
		// The key's attestation, whose conditions do not hold.
		conditions = "attestation checks failed for "
	)
	tests := []struct {
		name   string
		policy string
		kind   string // Pod or Deployment
		image  string
		admit  bool
		reason string // in Kyverno's output when it refuses
		// outside is what Kyverno asks for beyond loopback.
		outside []string
	}{
		{name: "the release, signed and attested by make sign", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: releaseTag, admit: true},
		{name: "the release in a Deployment", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Deployment", image: releaseTag, admit: true},
		{name: "an unsigned image", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: tagged("unsigned"), reason: noSignature},
		{name: "an unsigned image in a Deployment", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Deployment", image: tagged("unsigned"), reason: noSignature},
		{name: "an image signed and attested with another key", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: tagged("other-key"), reason: noSignature},
		{name: "the release, against the policy with another key", policy: forRegistry(t, offlinePolicy, host, otherPub), kind: "Pod", image: releaseTag, reason: noSignature},
		{name: "signed with the release key, not attested", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: tagged("signed-only"), reason: noAttestation},
		{name: "signed with the release key, not attested, in a Deployment", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Deployment", image: tagged("signed-only"), reason: noAttestation},
		{name: "signed and attested with the release key, another predicate type", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: tagged("another-predicate"), reason: noAttestation},
		{name: "signed and attested with the release key, another builder", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: tagged("toolchain-builder"), reason: conditions},
		{name: "signed and attested with the release key, built from a fork", policy: forRegistry(t, offlinePolicy, host, releasePub), kind: "Pod", image: tagged("fork"), reason: conditions},
		{name: "the release, against the transparency log's policy, offline", policy: forRegistry(t, tlogPolicy, host, releasePub), kind: "Pod", image: releaseTag,
			reason: "failed to get trusted material", outside: []string{"tuf-repo-cdn.sigstore.dev:443"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kyvernoApply(t, kyverno, proxy.URL, tt.policy, tt.kind, tt.image)
			asked := outside.take()
			switch {
			case tt.admit:
				// Two passes: the signature and attestation checks, and the
				// checks of the workload as they left it (verifyDigest: its
				// image names a digest, so mutateDigest rewrote the tag;
				// required: the image was verified). The CLI prints no
				// resource that only verifyImages changed.
				if got.exitCode != 0 || got.summary != "pass: 2, fail: 0, warn: 0, error: 0, skip: 0" {
					t.Errorf("kyverno apply refused the image: exit code %d, %q", got.exitCode, got.summary)
				}
			default:
				// Two failures: the signature or attestation check, and
				// required's check that every image was verified.
				if got.exitCode == 0 || got.summary != "pass: 0, fail: 2, warn: 0, error: 0, skip: 0" {
					t.Errorf("kyverno apply did not refuse the image: exit code %d, %q", got.exitCode, got.summary)
				}
				if !strings.Contains(got.output, tt.reason) {
					t.Errorf("kyverno's output does not say %q", tt.reason)
				}
			}
			if !slices.Equal(asked, tt.outside) {
				t.Errorf("kyverno asked beyond loopback for %v, want %v", asked, tt.outside)
			}
		})
	}
}
