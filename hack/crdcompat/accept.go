package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// acceptedFile is the allow-list make verify passes (-accepted).
const acceptedFile = "hack/crdcompat/accepted.yaml"

// Acceptance is one deliberate tightening, named as Compare reports it,
// with the reason it is safe or needed.
type Acceptance struct {
	CRD     string `json:"crd"`
	Version string `json:"version"`
	Path    string `json:"path"`
	// Change is the Change's Problem, word for word.
	Change string `json:"change"`
	// Why says why no stored object breaks the tightening, or why it must
	// be refused all the same, and where the users are told.
	Why string `json:"why"`
}

func (a Acceptance) String() string {
	return Change{CRD: a.CRD, Version: a.Version, Path: a.Path}.where() + a.Change
}

// loadAccepted reads an allow-list: a YAML list of Acceptance, unknown
// fields refused. An empty or absent file accepts nothing.
func loadAccepted(file string) ([]Acceptance, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Acceptance
	if err := yaml.UnmarshalStrict(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// Accept returns the changes that no entry of accepted accepts (every break,
// and each tightening not listed) and the problems of the list itself: an
// entry without a reason or a field, one given twice, one naming a break
// (a break is never accepted), and one naming no change at all, so that
// the list cannot outlive its tightenings (the release that ships one
// makes config/crd/released hold it, and its entry must go).
func Accept(changes []Change, accepted []Acceptance) (refused []Change, problems []string) {
	used := make([]bool, len(accepted))
	seen := map[Acceptance]bool{}
	for i, a := range accepted {
		key := a
		key.Why = ""
		switch {
		case strings.TrimSpace(a.Why) == "":
			problems = append(problems, fmt.Sprintf("%s: accepted without a reason: say in why: why no stored object breaks it, or why it must", a))
			used[i] = true
		case a.CRD == "" || a.Version == "" || a.Path == "" || a.Change == "":
			problems = append(problems, fmt.Sprintf("entry %d: crd, version, path and change must all be set, as crdcompat reports the change", i+1))
			used[i] = true
		case seen[key]:
			problems = append(problems, fmt.Sprintf("%s: accepted twice", a))
			used[i] = true
		}
		seen[key] = true
	}
	for _, c := range changes {
		i := -1
		for j, a := range accepted {
			if a.CRD == c.CRD && a.Version == c.Version && a.Path == c.Path && a.Change == c.Problem {
				i = j
				break
			}
		}
		switch {
		case i < 0:
			refused = append(refused, c)
		case !c.Tightening:
			used[i] = true
			refused = append(refused, c)
			problems = append(problems, fmt.Sprintf("%s: a break, not a tightening: no list accepts it", accepted[i]))
		default:
			used[i] = true
		}
	}
	for i, a := range accepted {
		if !used[i] {
			problems = append(problems, fmt.Sprintf("%s: accepted, but not a tightening of the current CRDs against the released ones: remove the entry", a))
		}
	}
	return refused, problems
}
