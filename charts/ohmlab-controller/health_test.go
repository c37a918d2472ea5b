package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// healthStatus is what an Argo CD health script returns.
type healthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// healthTests is the format of Argo CD's resource_customizations/<group>/<kind>/health_test.yaml.
type healthTests struct {
	Tests []struct {
		HealthStatus healthStatus `json:"healthStatus"`
		InputPath    string       `json:"inputPath"`
	} `json:"tests"`
}

// TestArgoCDHealth runs argocd/health.lua against every case of argocd/health_test.yaml, the
// way Argo CD runs a resource customization: the object as the global obj, the returned table
// read as {status, message}, with only the base, table, string and math libraries.
func TestArgoCDHealth(t *testing.T) {
	dir := filepath.Join(charttest.ChartDir(), "argocd")
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases healthTests
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases.Tests) < 10 {
		t.Fatalf("only %d cases", len(cases.Tests))
	}
	seen := map[string]bool{}
	for _, tc := range cases.Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			input, err := os.ReadFile(filepath.Join(dir, tc.InputPath))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(input, &obj); err != nil {
				t.Fatal(err)
			}
			got, err := runHealth(string(script), obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.HealthStatus, got); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
			seen[got.Status] = true
		})
	}
	for _, s := range []string{"Healthy", "Progressing", "Degraded"} {
		if !seen[s] {
			t.Errorf("no case returns %s", s)
		}
	}
}

func runHealth(script string, obj map[string]any) (healthStatus, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return healthStatus{}, err
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return healthStatus{}, fmt.Errorf("the script returned %s, not a table", L.Get(-1).Type())
	}
	return healthStatus{
		Status:  lua.LVAsString(ret.RawGetString("status")),
		Message: lua.LVAsString(ret.RawGetString("message")),
	}, nil
}

// toLua converts a decoded JSON value as Argo CD does: objects and arrays become tables
// (arrays 1-based), numbers numbers, null nil.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
}
