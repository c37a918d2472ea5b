package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/internal/validate"
	"github.com/ohmlab/ohmlab-controller/templating"
	"k8s.io/apimachinery/pkg/util/validation"
)

// finding is one problem or warning of one object, as --output json prints
// it.
type finding struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	validate.Problem
	// id is validate.ID of the object.
	id string
}

// report is what --output json prints.
type report struct {
	// Valid is true when no object has a problem.
	Valid bool `json:"valid"`
	// Objects is the number of VaultSeeds read.
	Objects  int       `json:"objects"`
	Problems []finding `json:"problems"`
	Warnings []finding `json:"warnings"`
}

// runValidate is `ohmlab validate`. Flags may come before, between or after
// the inputs; "--" ends them.
func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ohmlab validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	output := fs.String("output", "text", "output format: text (one line per problem) or json")
	values := fs.String("values", "", "the controller chart's values file (or the controller's configuration file): objects in its targets.vault.tenants namespaces are checked against their tenant scope")
	namespace := fs.String("namespace", "", "the namespace of objects that name none, as kubectl apply -n gives them (helm template of an application's chart usually leaves it out)")
	var inputs []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitValid
			}
			return exitUsage
		}
		left := fs.Args()
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			inputs = append(inputs, left...)
			break
		}
		if len(left) == 0 {
			break
		}
		inputs, rest = append(inputs, left[0]), left[1:]
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "ohmlab validate: --output must be text or json\n%s", usage)
		return exitUsage
	}
	if len(inputs) == 0 {
		fmt.Fprintf(stderr, "ohmlab validate: name the input: - for standard input, or files and directories\n%s", usage)
		return exitUsage
	}
	var tenants tenancy.Config
	if *values != "" {
		var err error
		if tenants, err = readTenants(*values); err != nil {
			fmt.Fprintln(stderr, templating.PrintableKey("ohmlab validate: "+err.Error()))
			return exitUsage
		}
	}
	objs, err := readInputs(inputs, stdin)
	if err != nil {
		fmt.Fprintln(stderr, templating.PrintableKey("ohmlab validate: "+err.Error()))
		return exitUsage
	}
	if err := inNamespace(objs, *namespace, tenants); err != nil {
		fmt.Fprintln(stderr, templating.PrintableKey("ohmlab validate: "+err.Error()))
		return exitUsage
	}
	rep, _ := check(objs, tenants)
	if err := printVerdict(rep, *output, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "ohmlab validate: %v\n", err)
		return exitUsage
	}
	if !rep.Valid {
		return exitInvalid
	}
	return exitValid
}

// inNamespace gives the objects that name no namespace the one of
// --namespace, a DNS label. With tenant namespaces configured, an object
// left without a namespace gets a warning: its tenant scope cannot be
// checked, and a green check must not hide that.
func inNamespace(objs []object, namespace string, tenants tenancy.Config) error {
	if namespace != "" {
		if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
			return fmt.Errorf("--namespace %q is not a namespace name: %s", namespace, strings.Join(msgs, "; "))
		}
	}
	for i := range objs {
		o := &objs[i]
		if o.Seed == nil || o.Seed.Namespace != "" {
			continue
		}
		o.Seed.Namespace = namespace
		if namespace == "" && tenants.Enabled {
			o.Warnings = append(o.Warnings, validate.Problem{Key: "metadata.namespace", Message: "the object names no namespace, so its tenant scope (targets.vault.tenants of --values) is not checked: pass --namespace, the namespace it is applied to"})
		}
	}
	return nil
}

// check gives every object read its verdict, in input order: the problems
// found reading it, or else the verdict of internal/validate on all the
// readable objects together (the webhook's verdict on each of them), with
// the scope of the objects in tenants' namespaces (validate.WithScope); and
// for each, what the API server refuses for the CRD's schema and rules
// (internal/crdschema), on the fields the others leave unnamed.
//
// It returns the readable objects analysed, in input order: each object is
// analysed once, for the verdict and for a plan.
func check(objs []object, tenants tenancy.Config) (report, []seeds.Analysed) {
	rep := report{Objects: len(objs), Problems: []finding{}, Warnings: []finding{}}
	var readable []int
	var analysed []seeds.Analysed
	for i, o := range objs {
		if len(o.Problems) == 0 {
			readable = append(readable, i)
			analysed = append(analysed, seeds.Analyse(o.Seed))
		}
	}
	verdicts := make([]validate.Verdict, len(objs))
	for i, v := range validate.Set(analysed) {
		verdicts[readable[i]] = validate.WithScope(v, tenants, analysed[i])
	}
	for i, o := range objs {
		rep.Problems = append(rep.Problems, findings(o, o.Problems)...)
		rep.Problems = append(rep.Problems, findings(o, verdicts[i].Problems)...)
		rep.Problems = append(rep.Problems, findings(o, schemaOnly(o.Schema, o.Problems, verdicts[i].Problems))...)
		rep.Warnings = append(rep.Warnings, findings(o, o.Warnings)...)
		rep.Warnings = append(rep.Warnings, findings(o, verdicts[i].Warnings)...)
	}
	rep.Valid = len(rep.Problems) == 0
	return rep, analysed
}

// printVerdict prints the verdict as validate does: in JSON on standard
// output, or one line per problem on standard output and one per warning
// on standard error.
func printVerdict(rep report, output string, stdout, stderr io.Writer) error {
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, f := range rep.Problems {
		fmt.Fprintln(stdout, f)
	}
	for _, f := range rep.Warnings {
		fmt.Fprintln(stderr, templating.PrintableKey(fmt.Sprintf("%s:%s: warning: %s", f.File, f.id, f.Problem)))
	}
	if rep.Objects == 0 {
		fmt.Fprintln(stderr, "ohmlab validate: no VaultSeed found")
	}
	return nil
}

// schemaOnly returns the problems of the CRD's schema on fields that no
// other problem names: where the webhook's verdict already refuses a field
// (a bad spec.path, a token Vault refuses), the CRD's rule says the same in
// the API server's words, and one refusal per field is enough.
func schemaOnly(schema []validate.Problem, others ...[]validate.Problem) []validate.Problem {
	named := map[string]bool{}
	for _, ps := range others {
		for _, p := range ps {
			named[p.Key] = true
		}
	}
	var out []validate.Problem
	for _, p := range schema {
		if !named[p.Key] {
			out = append(out, p)
		}
	}
	return out
}

func findings(o object, ps []validate.Problem) []finding {
	out := make([]finding, len(ps))
	for i, p := range ps {
		out[i] = finding{File: o.File, Line: o.Line, Namespace: o.Seed.Namespace, Name: o.Seed.Name, Problem: p, id: validate.ID(o.Seed)}
	}
	return out
}

// String is "<file>:<namespace>/<name>: <key path>: <message>", printable
// (templating.PrintableKey): the API server's messages quote what they
// refuse, a file name or a field may hold any character.
func (f finding) String() string {
	return templating.PrintableKey(f.File + ":" + f.id + ": " + f.Problem.String())
}
