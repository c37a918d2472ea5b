package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	tests := []struct {
		name string
		wd   string // relative to the repository
	}{
		{name: "a package of the main module", wd: "test/repo"},
		{name: "the repository itself", wd: "."},
		{name: "a module of its own inside the repository", wd: "test/tools/k8s"},
	}
	want, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(filepath.Join(want, tt.wd))
			got, err := Root()
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("Root() = %s, want %s", got, want)
			}
		})
	}
}

func TestRootOutsideTheRepository(t *testing.T) {
	dir := t.TempDir()
	// A go.mod of another module is not the repository's.
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if got, err := Root(); err == nil {
		t.Fatalf("Root() = %s outside the repository, want an error", got)
	}
}
