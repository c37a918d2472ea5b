package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// toolBin returns the path of a test binary make tools builds.
func toolBin(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(repoRoot(t), "bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run make tools)", bin, err)
	}
	return bin
}

// cosignEnv isolates cosign from the machine: its own HOME (no TUF cache,
// no registry credentials) and the throwaway key's password.
func cosignEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "COSIGN_PASSWORD=throwaway", "TUF_ROOT="+filepath.Join(home, "tuf"))
}

type cosignRun struct {
	t    *testing.T
	bin  string
	env  []string
	dir  string
	host string
}

func (c cosignRun) run(args ...string) (string, error) {
	cmd := exec.Command(c.bin, args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	c.t.Logf("$ cosign %s\n%s%s", strings.Join(args, " "), stderr.String(), truncate(stdout.String(), 400))
	if err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "...\n"
}

// offlineSigner returns cosign with a new throwaway key pair (cosign.key,
// cosign.pub in its dir) and the COSIGN_FLAGS that sign offline: a signing
// config with no transparency log nor timestamp authority (cosign v3's way
// to say --tlog-upload=false), an empty trusted root (no TUF fetch), a
// plain HTTP registry on loopback.
func offlineSigner(t *testing.T, bin, host string) (cosignRun, string) {
	t.Helper()
	home := t.TempDir()
	c := cosignRun{t: t, bin: bin, env: cosignEnv(home), dir: home, host: host}
	if _, err := c.run("generate-key-pair"); err != nil {
		t.Fatalf("generate-key-pair: %v", err)
	}
	if _, err := c.run("signing-config", "create", "--out", "signing-config.json"); err != nil {
		t.Fatalf("signing-config create: %v", err)
	}
	if _, err := c.run("trusted-root", "create", "--out", "trusted-root.json"); err != nil {
		t.Fatalf("trusted-root create: %v", err)
	}
	return c, "--signing-config=" + filepath.Join(home, "signing-config.json") +
		" --trusted-root=" + filepath.Join(home, "trusted-root.json") + " --allow-http-registry"
}

// makeSign runs make sign: c's key signs the digest of dist that make
// image-push pushed to host, and attests dist's provenance.
func makeSign(t *testing.T, c cosignRun, host, dist, flags string) {
	t.Helper()
	// -o: make sign's prerequisite bin/cosign is the tool toolBin found
	// (bin/ may be shared), never rebuilt here when a checkout's
	// test/tools/kyverno/go.mod is newer than it.
	sign := exec.Command("make", "--no-print-directory", "-C", repoRoot(t), "-o", filepath.Join(repoRoot(t), "bin", "cosign"), "sign",
		"REGISTRY="+host, "DIST="+dist, "COSIGN_KEY="+filepath.Join(c.dir, "cosign.key"), "COSIGN_FLAGS="+flags)
	sign.Env = c.env
	signOut, err := sign.CombinedOutput()
	t.Logf("$ make sign\n%s", signOut)
	if err != nil {
		t.Fatalf("make sign: %v", err)
	}
}

// TestSignAndVerify pushes the built index to an in-process registry on
// loopback (referrers API on), runs `make sign` with a throwaway key, and
// checks that cosign verify and cosign verify-attestation --type
// slsaprovenance1 accept the image and its provenance, and refuse both once
// the image behind the tag was changed after signing.
func TestSignAndVerify(t *testing.T) {
	res, out := buildOnce(t)
	bin := toolBin(t, "cosign")
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/ohmlab-controller:" + testVersion(t)

	push := exec.Command("make", "--no-print-directory", "-s", "-C", repoRoot(t), "image-push", "REGISTRY="+host, "DIST="+out, "INSECURE=1")
	pushOut, err := push.CombinedOutput()
	t.Logf("$ make image-push\n%s", pushOut)
	if err != nil {
		t.Fatalf("make image-push: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(pushOut)), "\n")
	digestRef := lines[len(lines)-1]
	if want := host + "/ohmlab-controller@" + res.Digest.String(); digestRef != want {
		t.Errorf("push returned %s, want %s", digestRef, want)
	}

	c, flags := offlineSigner(t, bin, host)
	makeSign(t, c, host, out, flags)

	// cosign v3 stores both as Sigstore bundles among the index's OCI 1.1
	// referrers (what the README's Kyverno policy, type SigstoreBundle, reads).
	signed, err := name.NewDigest(digestRef, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	referrers, err := remote.Referrers(signed)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// The in-process registry lists the config's media type as the
	// artifact type: read each manifest's own.
	var bundles []string
	for _, d := range rm.Manifests {
		got, err := remote.Get(signed.Context().Digest(d.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			ArtifactType string `json:"artifactType"`
		}
		if err := json.Unmarshal(got.Manifest, &m); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.ArtifactType, "application/vnd.dev.sigstore.bundle") {
			bundles = append(bundles, d.Annotations["dev.sigstore.bundle.predicateType"])
		}
	}
	sort.Strings(bundles)
	if want := []string{"https://sigstore.dev/cosign/sign/v1", "https://slsa.dev/provenance/v1"}; !slices.Equal(bundles, want) {
		t.Errorf("Sigstore bundles among the referrers: %v, want %v", bundles, want)
	}

	pub := filepath.Join(c.dir, "cosign.pub")
	verify := func(target string) error {
		_, err := c.run("verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", target)
		return err
	}
	verifyAttestation := func(target string) (string, error) {
		return c.run("verify-attestation", "--key", pub, "--type", "slsaprovenance1", "--insecure-ignore-tlog", "--allow-http-registry", target)
	}
	for _, target := range []string{ref, digestRef} {
		if err := verify(target); err != nil {
			t.Errorf("cosign verify %s: %v", target, err)
		}
		att, err := verifyAttestation(target)
		if err != nil {
			t.Errorf("cosign verify-attestation %s: %v", target, err)
			continue
		}
		checkStatement(t, att, res.Digest)
	}

	// Another key is refused: only this signature is admitted.
	otherHome := t.TempDir()
	other := cosignRun{t: t, bin: bin, env: cosignEnv(otherHome), dir: otherHome, host: host}
	if _, err := other.run("generate-key-pair"); err != nil {
		t.Fatalf("generate-key-pair: %v", err)
	}
	if _, err := c.run("verify", "--key", filepath.Join(otherHome, "cosign.pub"), "--insecure-ignore-tlog", "--allow-http-registry", digestRef); err == nil {
		t.Error("cosign verify accepted the signature with another public key")
	}

	// Change the image after signing: the amd64 image gets another
	// controller binary, the tag now points at another index.
	tampered := tamper(t, res.Index, "#!/bin/sh\necho pwned\n")
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, tampered); err != nil {
		t.Fatal(err)
	}
	d, _ := tampered.Digest()
	tamperedRef := host + "/ohmlab-controller@" + d.String()
	// An attacker also copies the signature and the attestation onto the
	// changed index (same bundles, new subject): they still name the old
	// digest, so cosign refuses them.
	copyReferrers(t, signed, tampered)
	const wrongDigest = "provided artifact digest does not match any digest in statement"
	for _, target := range []string{ref, tamperedRef} {
		if err := verify(target); err == nil || !strings.Contains(err.Error(), wrongDigest) {
			t.Errorf("cosign verify %s of an image changed after signing: %v, want %q", target, err, wrongDigest)
		}
		if _, err := verifyAttestation(target); err == nil || !strings.Contains(err.Error(), wrongDigest) {
			t.Errorf("cosign verify-attestation %s of an image changed after signing: %v, want %q", target, err, wrongDigest)
		}
	}
}

// checkStatement decodes the attestations cosign verified (one DSSE
// envelope a line) and checks one is our provenance about the digest.
func checkStatement(t *testing.T, out string, digest v1.Hash) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	var found bool
	for sc.Scan() {
		var env struct {
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil || env.Payload == "" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatalf("payload: %v", err)
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
			Predicate provenance `json:"predicate"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("statement: %v", err)
		}
		if st.PredicateType != "https://slsa.dev/provenance/v1" {
			t.Errorf("predicate type %s", st.PredicateType)
			continue
		}
		if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != digest.Hex {
			t.Errorf("subject %v, want sha256 %s", st.Subject, digest.Hex)
		}
		if got := st.Predicate.BuildDefinition.ExternalParameters.Source.Digest["gitCommit"]; got != testRevision {
			t.Errorf("attested source commit %q", got)
		}
		found = true
	}
	if !found {
		t.Errorf("no SLSA v1 provenance statement in cosign's output:\n%s", truncate(out, 2000))
	}
}

// tamper returns the index with the amd64 image's controller replaced by
// the script, the rest unchanged.
func tamper(t *testing.T, idx v1.ImageIndex, script string) v1.ImageIndex {
	t.Helper()
	evil, err := layerFromEntries([]entry{{name: "ohmlab-controller", mode: 0o755, data: []byte(script)}})
	if err != nil {
		t.Fatal(err)
	}
	out := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range allPlatforms {
		img, err := PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		if p.Architecture == "amd64" {
			if img, err = mutate.AppendLayers(img, evil); err != nil {
				t.Fatal(err)
			}
		}
		pl := p
		out = mutate.AppendManifests(out, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pl}})
	}
	return out
}

// rawManifest is a manifest pushed as bytes.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// copyReferrers pushes a copy of every referrer of from (cosign's bundles)
// whose subject is to instead; the bundles' blobs are already in the
// repository.
func copyReferrers(t *testing.T, from name.Digest, to v1.ImageIndex) {
	t.Helper()
	toDigest, err := to.Digest()
	if err != nil {
		t.Fatal(err)
	}
	toSize, err := to.Size()
	if err != nil {
		t.Fatal(err)
	}
	referrers, err := remote.Referrers(from)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rm.Manifests {
		got, err := remote.Get(from.Context().Digest(d.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(got.Manifest, &m); err != nil {
			t.Fatal(err)
		}
		m["subject"] = v1.Descriptor{MediaType: types.OCIImageIndex, Digest: toDigest, Size: toSize}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := v1.SHA256(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Put(from.Context().Digest(h.String()), rawManifest{raw: raw, mt: got.MediaType}); err != nil {
			t.Fatal(err)
		}
	}
	copied, err := remote.Referrers(from.Context().Digest(toDigest.String()))
	if err != nil {
		t.Fatal(err)
	}
	if cm, err := copied.IndexManifest(); err != nil || len(cm.Manifests) != len(rm.Manifests) {
		t.Fatalf("the changed index has %v referrers (%v), want %d", cm, err, len(rm.Manifests))
	}
}
