package vaultseed

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func keys(prefix string, n int) []types.NamespacedName {
	out := make([]types.NamespacedName, n)
	for i := range out {
		out[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("%s%d", prefix, i)}
	}
	return out
}

// TestBrakeHolds: the brake holds when more than the share of the known
// paths, and at least the minimum, vanished.
func TestBrakeHolds(t *testing.T) {
	for _, tc := range []struct {
		name            string
		brake           Brake
		vanished, known int
		want            bool
	}{
		{"default: 20 of 30", Brake{}, 20, 30, true},
		{"default: one of 30", Brake{}, 1, 30, false},
		{"default: exactly half is not more than half", Brake{}, 15, 30, false},
		{"default: all 4 of a small target are fewer than the minimum", Brake{}, 4, 4, false},
		{"default: 5 of 5", Brake{}, 5, 5, true},
		{"default: 5 of 10 is not more than half", Brake{}, 5, 10, false},
		{"a lower share", Brake{Share: 0.1, Min: 2}, 2, 10, true},
		{"a minimum of one: one path of one", Brake{Min: 1}, 1, 1, true},
		{"more vanished than the survey knew (objects written since)", Brake{}, 6, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.brake.withDefaults().holds(tc.vanished, tc.known); got != tc.want {
				t.Errorf("holds(%d, %d) = %v, want %v", tc.vanished, tc.known, got, tc.want)
			}
		})
	}
}

// TestBrakeReleases: a release lets through the paths whose every recorded
// write is older than it.
func TestBrakeReleases(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(times ...string) []ohmlabv1alpha1.ManagedKey {
		var out []ohmlabv1alpha1.ManagedKey
		for i, ts := range times {
			out = append(out, ohmlabv1alpha1.ManagedKey{Key: fmt.Sprint("k", i), Version: 1, CreatedTime: ts})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		release time.Time
		managed []ohmlabv1alpha1.ManagedKey
		want    bool
	}{
		{"no release", time.Time{}, rec("2026-02-01T00:00:00Z"), false},
		{"written before the release", at, rec("2026-02-01T00:00:00Z", "2026-03-01T11:59:59.5Z"), true},
		{"one key written after the release: created anew since, held again", at, rec("2026-02-01T00:00:00Z", "2026-03-01T12:00:01Z"), false},
		{"written at the release itself", at, rec("2026-03-01T12:00:00Z"), false},
		{"records of the first release, without a time", at, rec(""), true},
		{"status.version only, no managed keys", at, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Brake{ReleasedAt: tc.release}).releases(tc.managed); got != tc.want {
				t.Errorf("releases = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVanishedPathsOverThePeriod: the counter of vanished paths over a
// sliding period, on a fake clock: a path not counted yet owes a survey,
// which replaces the count; sightings older than the period are dropped; a
// path seen again is taken out; every change is published.
func TestVanishedPathsOverThePeriod(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	type published struct {
		N     int
		Holds bool
	}
	var last published
	v := newVanishedPaths(Brake{}, 10*time.Minute, clock.now, func(n int, holds bool) { last = published{n, holds} })
	gone, alone := keys("gone", 20), types.NamespacedName{Namespace: "ns", Name: "alone"}
	check := func(step string, due map[types.NamespacedName]bool, want published) {
		t.Helper()
		for k, wantDue := range due {
			if got := v.surveyDue(k); got != wantDue {
				t.Errorf("%s: surveyDue(%s) = %v, want %v", step, k.Name, got, wantDue)
			}
		}
		holds, n, _ := v.holds()
		if diff := cmp.Diff(want, published{n, holds}); diff != "" {
			t.Errorf("%s: holds (-want +got):\n%s", step, diff)
		}
		if last != want {
			t.Errorf("%s: published %+v, want %+v", step, last, want)
		}
	}
	check("a process just started: nothing counted, every vanished path owes a survey", map[types.NamespacedName]bool{gone[0]: true, alone: true}, published{0, false})

	v.surveyedNow(30, []types.NamespacedName{alone})
	check("one path of 30 vanished alone", map[types.NamespacedName]bool{alone: false, gone[0]: true}, published{1, false})
	v.back(alone)
	check("created anew", map[types.NamespacedName]bool{alone: true}, published{0, false})

	clock.advance(time.Minute)
	v.surveyedNow(30, gone)
	check("20 of 30 vanished: the first of them surveyed, the others are counted", map[types.NamespacedName]bool{gone[0]: false, gone[19]: false, alone: true}, published{20, true})

	clock.advance(5 * time.Minute)
	for _, k := range gone[:6] {
		v.back(k)
	}
	check("six restored by hand since", map[types.NamespacedName]bool{gone[0]: true, gone[6]: false}, published{14, false})

	v.saw(gone[0])
	check("one of them vanished again, seen by its own reconcile", map[types.NamespacedName]bool{gone[0]: false}, published{15, false})
	v.saw(gone[1])
	check("and another: more than half", nil, published{16, true})

	clock.advance(5 * time.Minute)
	check("one period after the survey: its count dropped", map[types.NamespacedName]bool{gone[6]: true, gone[0]: false}, published{2, false})

	clock.advance(5 * time.Minute)
	check("one period after the last sightings", map[types.NamespacedName]bool{gone[0]: true}, published{0, false})

	v.surveyedNow(30, gone[:3])
	check("a survey replaces the count", map[types.NamespacedName]bool{gone[3]: true}, published{3, false})
}

// TestVanishedPathsAfterARestart: a process that starts against a Vault
// that lost data knows nothing, and its first vanished path surveys: the
// brake holds before the first write, however the objects' first
// reconciles are spread over the period.
func TestVanishedPathsAfterARestart(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	v := newVanishedPaths(Brake{}, 10*time.Minute, clock.now, nil)
	gone := keys("gone", 20)
	if !v.surveyDue(gone[0]) {
		t.Fatal("a started process owes a survey before its first vanished path is written")
	}
	v.surveyedNow(30, gone)
	for i, k := range gone {
		clock.advance(25 * time.Second)
		if v.surveyDue(k) {
			t.Errorf("reconcile %d: surveys again for a path counted %s ago", i, time.Duration(i+1)*25*time.Second)
		}
		v.saw(k)
		if holds, n, known := v.holds(); !holds {
			t.Fatalf("reconcile %d: the brake let a vanished path through (%d of %d)", i, n, known)
		}
	}
}
