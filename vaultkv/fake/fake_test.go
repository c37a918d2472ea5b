package fake

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

const path = "ohmlab/platforms/core/keycloak/admin"

// ignoreCreated leaves created_time out of a comparison: TestCreatedTime
// checks it.
var ignoreCreated = cmpopts.IgnoreFields(vaultkv.Secret{}, "Created")

func TestVersionsAndCAS(t *testing.T) {
	ctx := context.Background()
	f := New()

	s, err := f.Read(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&vaultkv.Secret{}, s); diff != "" {
		t.Fatalf("absent (-want +got):\n%s", diff)
	}

	steps := []struct {
		name    string
		data    map[string]any
		cas     int
		want    int
		wantErr error
	}{
		{name: "create-only", data: map[string]any{"a": "1"}, cas: 0, want: 1},
		{name: "create-only again", data: map[string]any{"a": "2"}, cas: 0, wantErr: vaultkv.ErrCASMismatch},
		{name: "update", data: map[string]any{"a": "2", "n": 3, "t": map[string]any{"x": []string{"y"}}}, cas: 1, want: 2},
		{name: "stale", data: map[string]any{"a": "3"}, cas: 1, wantErr: vaultkv.ErrCASMismatch},
	}
	for _, st := range steps {
		got, err := f.Write(ctx, path, st.data, st.cas)
		if !errors.Is(err, st.wantErr) || got.Version != st.want {
			t.Fatalf("%s: Write = %d, %v; want %d, %v", st.name, got.Version, err, st.want, st.wantErr)
		}
	}

	s, err = f.Read(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	want := &vaultkv.Secret{Exists: true, Version: 2, Data: map[string]any{
		"a": "2", "n": json.Number("3"), "t": map[string]any{"x": []any{"y"}},
	}}
	if diff := cmp.Diff(want, s, ignoreCreated); diff != "" {
		t.Fatalf("read (-want +got):\n%s", diff)
	}
	s.Data["a"] = "changed by the caller"
	if s, _ := f.Read(ctx, path); s.Data["a"] != "2" {
		t.Fatalf("a read shares the stored tree: %v", s.Data)
	}
}

func TestSoftDeleteAndMark(t *testing.T) {
	ctx := context.Background()
	f := New()
	if f.SoftDelete(path) {
		t.Fatal("SoftDelete of an absent path = true")
	}
	if err := f.Mark(ctx, path, map[string]string{"owner": "someone-else"}); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Read(ctx, path); s.Exists {
		t.Fatalf("metadata without a version reads as %+v, want absent", s)
	}
	if _, err := f.Write(ctx, path, map[string]any{"a": "1"}, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Mark(ctx, path, map[string]string{"ohmlab.fr/owner": "ns/name"}); err != nil {
		t.Fatal(err)
	}
	if !f.SoftDelete(path) {
		t.Fatal("SoftDelete = false")
	}
	s, err := f.Read(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	want := &vaultkv.Secret{Exists: true, Version: 1, Deleted: true,
		CustomMetadata: map[string]string{"owner": "someone-else", "ohmlab.fr/owner": "ns/name"}}
	if diff := cmp.Diff(want, s, ignoreCreated); diff != "" {
		t.Fatalf("read (-want +got):\n%s", diff)
	}
	if _, err := f.Write(ctx, path, map[string]any{"a": "2"}, 0); !errors.Is(err, vaultkv.ErrCASMismatch) {
		t.Fatalf("cas=0 on a deleted version: %v, want CAS mismatch", err)
	}
	if v, err := f.Write(ctx, path, map[string]any{"a": "2"}, 1); v.Version != 2 || err != nil {
		t.Fatalf("cas=1 on a deleted version: %d, %v", v.Version, err)
	}
	if err := f.Delete(ctx, path); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Read(ctx, path); s.Exists || s.CustomMetadata != nil {
		t.Fatalf("after Delete: %+v", s)
	}
}

func TestReadNew(t *testing.T) {
	ctx := context.Background()
	f := New()
	if err := f.Mark(ctx, "ohmlab/premarked", map[string]string{"team": "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, "ohmlab/written", map[string]any{"a": "1"}, 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       *vaultkv.Secret
		reads      int
	}{
		{"no metadata", "ohmlab/fresh", &vaultkv.Secret{NoMetadata: true}, 1},
		{"metadata without a version", "ohmlab/premarked", &vaultkv.Secret{CustomMetadata: map[string]string{"team": "x"}}, 1},
		{"a version: read as Read", "ohmlab/written", &vaultkv.Secret{Exists: true, Version: 1, Data: map[string]any{"a": "1"}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.Calls(vaultkv.OpRead)
			got, err := f.ReadNew(ctx, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreCreated); diff != "" {
				t.Errorf("ReadNew (-want +got):\n%s", diff)
			}
			if n := f.Calls(vaultkv.OpRead) - before; n != tt.reads {
				t.Errorf("%d reads, want %d", n, tt.reads)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	f := New()
	tests := []struct {
		name string
		call func() error
	}{
		{"read without mount", func() error { _, err := f.Read(ctx, "nomount"); return err }},
		{"write without path", func() error { _, err := f.Write(ctx, "ohmlab/", nil, 0); return err }},
		{"mark over the key limit", func() error {
			return f.Mark(ctx, path, map[string]string{strings.Repeat("k", 129): "v"})
		}},
		{"mark an empty value", func() error { return f.Mark(ctx, path, map[string]string{"k": ""}) }},
		{"delete without mount", func() error { return f.Delete(ctx, "/x") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, vaultkv.ErrInvalid) {
				t.Fatalf("got %v, want invalid", err)
			}
		})
	}
}

func TestFailNextAndCalls(t *testing.T) {
	ctx := context.Background()
	f := New()
	f.FailNext(vaultkv.OpWrite, vaultkv.ErrUnavailable)
	f.FailNext(vaultkv.OpWrite, &vaultkv.Error{Op: vaultkv.OpWrite, Path: path, Class: vaultkv.ClassForbidden, Reason: "permission denied"})
	f.FailNext(vaultkv.OpRead, vaultkv.ErrForbidden)

	_, err1 := f.Write(ctx, path, map[string]any{"a": "1"}, 0)
	_, err2 := f.Write(ctx, path, map[string]any{"a": "1"}, 0)
	v, err3 := f.Write(ctx, path, map[string]any{"a": "1"}, 0)
	got := []string{vaultkv.ClassOf(err1), vaultkv.ClassOf(err2), vaultkv.ClassOf(err3)}
	if diff := cmp.Diff([]string{"unavailable", "forbidden", "ok"}, got); diff != "" || v.Version != 1 {
		t.Fatalf("classes (-want +got):\n%s version %d", diff, v.Version)
	}
	if _, err := f.Read(ctx, path); !errors.Is(err, vaultkv.ErrForbidden) {
		t.Fatalf("read: %v", err)
	}
	if _, err := f.Read(ctx, path); err != nil {
		t.Fatalf("second read: %v", err)
	}
	calls := map[string]int{}
	for _, op := range []string{vaultkv.OpRead, vaultkv.OpWrite, vaultkv.OpMark, vaultkv.OpDelete} {
		calls[op] = f.Calls(op)
	}
	if diff := cmp.Diff(map[string]int{"read": 2, "write": 3, "mark": 0, "delete": 0}, calls); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
}

// TestCreatedTime: each version carries the created_time of its write, and
// a path deleted with its metadata or restored from a snapshot numbers its
// next write as an earlier one, with another created_time.
func TestCreatedTime(t *testing.T) {
	ctx := context.Background()
	f := New()
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	f.SetClock(func() time.Time { now = now.Add(time.Second); return now })
	w1, err := f.Write(ctx, path, map[string]any{"a": "1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Read(ctx, path)
	if err != nil || !s.Created.Equal(w1.Created) || w1.Version != 1 {
		t.Fatalf("Read = %+v, %v; the write answered %+v", s, err, w1)
	}
	snap := f.Snapshot()
	if _, err := f.Write(ctx, path, map[string]any{"a": "2"}, 1); err != nil {
		t.Fatal(err)
	}
	f.Restore(snap)
	again, err := f.Write(ctx, path, map[string]any{"a": "3"}, 1)
	if err != nil || again.Version != 2 {
		t.Fatalf("after a restore: Write = %+v, %v; want version 2 again", again, err)
	}
	if err := f.Delete(ctx, path); err != nil {
		t.Fatal(err)
	}
	anew, err := f.Write(ctx, path, map[string]any{"a": "4"}, 0)
	if err != nil || anew.Version != 1 || anew.Created.Equal(w1.Created) {
		t.Fatalf("a new life: Write = %+v, %v; want version 1 created after %s", anew, err, w1.Created)
	}
	v1, err := f.ReadVersion(ctx, path, 1)
	if err != nil || !v1.Created.Equal(anew.Created) {
		t.Fatalf("ReadVersion(1) = %+v, %v; want the new life's version 1", v1, err)
	}
}

// The fake has no password policy: every name is NotFound, in Vault's words.
func TestGeneratePasswordNotFound(t *testing.T) {
	f := New()
	p, err := f.GeneratePassword(context.Background(), "app-db")
	var e *vaultkv.Error
	if p != "" || !errors.Is(err, vaultkv.ErrNotFound) || !errors.As(err, &e) || e.Op != vaultkv.OpGenerate {
		t.Fatalf("GeneratePassword = %q, %v; want ErrNotFound of op %s", p, err, vaultkv.OpGenerate)
	}
	if n := f.Calls(vaultkv.OpGenerate); n != 1 {
		t.Errorf("%d calls counted, want 1", n)
	}
}
