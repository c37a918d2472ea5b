package main

import (
	"encoding/json"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// The daemons ignore a key they do not know: these tests read the rendered
// files back as the daemons' own parsers see them (TOML tables, YAML/JSON
// keys), so that a wrong tag or table fails here rather than silently on
// the node.

func TestContainerdConfigSetsWhatTheNodeNeeds(t *testing.T) {
	b, err := ContainerdConfig(Layout{Dir: "/state"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if _, err := toml.Decode(string(b), &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	cri := got["plugins"].(map[string]any)["io.containerd.grpc.v1.cri"].(map[string]any)
	runc := cri["containerd"].(map[string]any)["runtimes"].(map[string]any)["runc"].(map[string]any)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"version", got["version"], int64(2)},
		{"grpc.address", got["grpc"].(map[string]any)["address"], "/state/run/containerd.sock"},
		{"cri.sandbox_image", cri["sandbox_image"], PauseImage},
		{"cri.restrict_oom_score_adj", cri["restrict_oom_score_adj"], true},
		{"cri.cni.conf_dir", cri["cni"].(map[string]any)["conf_dir"], "/state/config/cni"},
		{"runc.runtime_type", runc["runtime_type"], "io.containerd.runc.v2"},
		{"runc.options.SystemdCgroup", runc["options"].(map[string]any)["SystemdCgroup"], false},
	} {
		if !cmp.Equal(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestKubeletConfigSetsWhatTheNodeNeeds(t *testing.T) {
	b, err := KubeletConfig(Layout{Dir: "/state"}, KubeletFiles{ClientCAFile: "/ca.crt", TLSCertFile: "/k.crt", TLSPrivateKeyFile: "/k.key"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"kind":                        "KubeletConfiguration",
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"failCgroupV1":                false,
		"cgroupDriver":                "cgroupfs",
		"containerRuntimeEndpoint":    "unix:///state/run/containerd.sock",
		"imageGCHighThresholdPercent": float64(100),
		"oomScoreAdj":                 float64(0),
	} {
		if !cmp.Equal(got[key], want) {
			t.Errorf("%s = %#v, want %#v", key, got[key], want)
		}
	}
}

func TestCNIConfListIsABridgeOverThePodCIDR(t *testing.T) {
	b, err := CNIConfList(Layout{Dir: "/state"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Plugins []struct {
			Type      string `json:"type"`
			IsGateway bool   `json:"isGateway"`
			IPAM      struct {
				Type    string                `json:"type"`
				DataDir string                `json:"dataDir"`
				Ranges  [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plugins) != 2 || got.Plugins[0].Type != "bridge" || got.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins: %s", b)
	}
	br := got.Plugins[0]
	if !br.IsGateway || br.IPAM.Type != "host-local" || br.IPAM.DataDir != "/state/cni-ipam" || br.IPAM.Ranges[0][0]["subnet"] != PodCIDR.String() {
		t.Errorf("bridge: %s", b)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/run/netns/cni-1", "/run/netns/cni-1"},
		{`/a\040b`, "/a b"},
		{`/tab\011x\134y`, "/tab\tx\\y"},
		{`/trailing\04`, `/trailing\04`},
	} {
		if got := unescapeMountPath(c.in); got != c.want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
