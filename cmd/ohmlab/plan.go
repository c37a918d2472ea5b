package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// Exit codes of `ohmlab plan`, in the manner of terraform plan
// -detailed-exitcode.
const (
	planInSync  = 0 // a real run changes nothing and every object would be Ready
	planError   = 1 // invalid objects, unreadable input or bad usage
	planChanges = 2 // some object would change, wait or stall
	planNoVault = 3 // Vault could not be read, for some object or at all
)

const planUsage = `Usage:
  ohmlab plan [--output text|json] [--token-file FILE] [--allow-delete] [--timeout D] -|FILE|DIR...

Reads VaultSeed objects as "ohmlab validate" does ("-" is standard input, for
example a rendered chart), gives them validate's verdict, then reads each
object's path and its references' sources from Vault and runs the
controller's planner, as its observe-only mode does. It only reads: no
write, no metadata change. It prints one line per object with changes, in
the form of the Drifted condition:

  <namespace>/<name> <path>: 1 adopt, 1 create-field (webhook)

An object that holds some keys back while a real run still writes the others
says why after its changes, as its Drifted condition does:

  <namespace>/<name> <path>: 1 create-field (b); the rest waits: RefPending: ...

then the objects that would wait (RefPending) or stall (OwnedByAnother,
PathDeleted, InvalidSpec, Forbidden...) and write nothing, with their reason,
then the objects whose path or sources Vault refused to read or failed to
read (a policy that does not cover them), with the reason a reconcile would
report and Vault's error:

  <namespace>/<name> <path>: cannot be read: Forbidden: vaultkv: read ...

and a total line, where an object that writes and waits (or stalls) counts
in both. Values never appear, not even those of plain keys.

An object with prune: true and no status.managedKeys (a rendered chart) plans
no prune, and standard error says so: plan the live objects
(kubectl get vaultseeds -A -o yaml | ohmlab plan -) to see what a real run
prunes.

Objects that reference each other's paths are planned in dependency order:
a copy is planned against what its source's plan would write, as the
controller converges ("; after <namespace>/<name>").

Vault is named by the environment: VAULT_ADDR, VAULT_TOKEN (or --token-file),
VAULT_CACERT. The token needs read on <mount>/data/<path> of every path and
source; nothing more.

Exit codes: 0 nothing to change, 2 changes (or objects that would wait or
stall), 1 invalid objects or bad usage, 3 Vault could not be read: some
objects could not be planned (each listed, and on standard error with
Vault's reason), or Vault does not answer (refused connection, sealed,
timeout: the first failed read on standard error, and no plan).

Flags:
`

// planReport is what --output json prints.
type planReport struct {
	// Validation is the report of ohmlab validate --output json.
	Validation json.RawMessage `json:"validation"`
	Objects    []planObject    `json:"objects"`
	Total      planTotal       `json:"total"`
}

type planObject struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Path      string `json:"path"`
	// State is changes, in-sync, waits, stalls or unreadable (Vault
	// refused or failed a read: nothing is planned).
	State string `json:"state"`
	// Reason and Message are the Drifted condition's; for an unreadable
	// object the reason a reconcile reports (Forbidden, BackendError) and
	// Vault's error.
	Reason  string       `json:"reason"`
	Message string       `json:"message"`
	Actions []planAction `json:"actions"`
	// Writes sums what a real run would still write for an object that
	// waits or stalls on some keys.
	Writes string   `json:"writes,omitempty"`
	After  []string `json:"after,omitempty"`
	// Changes says whether a real run writes to the path (Actions), also
	// for an object that waits or stalls on other keys.
	Changes bool `json:"changes"`
	// Held is why a real run waits or stalls (state waits or stalls),
	// whether or not it still writes other keys: its reason (RefPending,
	// InvalidSpec, OwnedByAnother...) and message.
	Held *planHeld `json:"held,omitempty"`
}

type planHeld struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type planAction struct {
	Action string `json:"action"`
	Key    string `json:"key,omitempty"`
}

type planTotal struct {
	Objects int `json:"objects"`
	Changes int `json:"changes"`
	Waits   int `json:"waits"`
	Stalls  int `json:"stalls"`
	InSync  int `json:"inSync"`
	// Unreadable counts the objects that could not be planned.
	Unreadable int            `json:"unreadable"`
	Actions    map[string]int `json:"actions"`
}

// States of planObject.
const (
	stateChanges    = "changes"
	stateInSync     = "in-sync"
	stateWaits      = "waits"
	stateStalls     = "stalls"
	stateUnreadable = "unreadable"
)

// planFlags are the flags of `ohmlab plan`.
type planFlags struct {
	output, tokenFile string
	allowDelete       bool
	timeout           time.Duration
}

// parsePlanFlags parses args. done is set when the command is over (help
// printed, or a bad flag), with its exit code.
func parsePlanFlags(args []string, stdout, stderr io.Writer) (f planFlags, inputs []string, done bool, code int) {
	fs := flag.NewFlagSet("ohmlab plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.output, "output", "text", "output format: text or json")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the Vault token (instead of VAULT_TOKEN)")
	fs.BoolVar(&f.allowDelete, "allow-delete", false, "the target's targets.vault.allowDelete (without it deletionPolicy Delete stalls)")
	fs.DurationVar(&f.timeout, "timeout", vaultkv.DefaultTimeout, "timeout of each Vault request")
	// --help prints the whole usage on standard output; a bad flag gets
	// flag's own error on standard error.
	fs.Usage = func() {}
	inputs, err := parseInterleaved(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, planUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return f, nil, true, planInSync
	case err != nil:
		fmt.Fprintln(stderr, "ohmlab plan: see ohmlab plan --help")
		return f, nil, true, planError
	}
	return f, inputs, false, 0
}

// runPlan is `ohmlab plan`.
func runPlan(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags, inputs, done, code := parsePlanFlags(args, stdout, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ohmlab plan: "+format+"\n", a...)
		return planError
	}
	if flags.output != "text" && flags.output != "json" {
		return fail("--output must be text or json")
	}
	if len(inputs) == 0 {
		return fail("name the input: - for standard input, or files and directories")
	}
	objs, err := readInputs(inputs, stdin)
	if err != nil {
		return fail("%v", err)
	}
	// validate's verdict, printed as validate prints it: plan refuses
	// exactly what validate refuses, with its lines.
	verdict, analysed := check(objs, tenancy.Config{})
	var validation bytes.Buffer
	if err := printVerdict(verdict, flags.output, &validation, stderr); err != nil {
		return fail("%v", err)
	}
	if !verdict.Valid {
		_, _ = stdout.Write(validation.Bytes())
		return planError
	}
	var previews []planner.Preview
	if len(objs) > 0 { // no object, nothing to read: Vault is not needed
		kv, err := planClient(flags.tokenFile, flags.timeout)
		if err != nil {
			return fail("%v", err)
		}
		warnRenderedPrune(objs, stderr)
		previews, err = planner.PreviewSeeds(context.Background(), kv, analysed, planner.PreviewOptions{AllowDelete: flags.allowDelete})
		if err != nil {
			// Vault does not answer: no other object could be read.
			fmt.Fprintf(stderr, "ohmlab plan: Vault could not be read: %v\n", err)
			return planNoVault
		}
		for _, p := range previews {
			if p.Unreadable {
				fmt.Fprintf(stderr, "ohmlab plan: Vault could not be read: %s/%s %s: %s\n", p.Namespace, p.Name, p.Path, p.Drifted.Message)
			}
		}
	}
	rep := reportOf(previews, validation.Bytes())
	if flags.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail("%v", err)
		}
	} else {
		printPlan(stdout, rep)
	}
	if rep.Total.Unreadable > 0 {
		return planNoVault
	}
	if rep.Total.InSync < rep.Total.Objects {
		return planChanges
	}
	return planInSync
}

// warnRenderedPrune says, for each object with prune and no
// status.managedKeys, that no prune is planned: a rendered chart has no
// status, so the keys the controller wrote cannot be told, while the live
// object may prune some.
func warnRenderedPrune(objs []object, stderr io.Writer) {
	for _, o := range objs {
		if o.Seed.Spec.Prune && len(o.Seed.Status.ManagedKeys) == 0 {
			fmt.Fprintf(stderr, "ohmlab plan: %s/%s: prune: true, but the input has no status.managedKeys: no prune is planned; to see what a real run prunes, plan the live objects (kubectl get vaultseeds -A -o yaml | ohmlab plan -)\n", o.Seed.Namespace, o.Seed.Name)
		}
	}
}

// reportOf is the report of the previews, with validate's verdict.
func reportOf(previews []planner.Preview, validation []byte) planReport {
	rep := planReport{Validation: json.RawMessage(validation), Objects: make([]planObject, len(previews)),
		Total: planTotal{Objects: len(previews), Actions: map[string]int{}}}
	for i, p := range previews {
		rep.Objects[i] = planObjectOf(p)
		// An object that would still write around keys it holds back
		// counts with the changes and with the waits or stalls.
		if p.Changes() {
			rep.Total.Changes++
		}
		switch rep.Objects[i].State {
		case stateWaits:
			rep.Total.Waits++
		case stateStalls:
			rep.Total.Stalls++
		case stateInSync:
			rep.Total.InSync++
		case stateUnreadable:
			rep.Total.Unreadable++
		}
		for _, a := range p.Actions {
			rep.Total.Actions[a.Name]++
		}
	}
	return rep
}

// parseInterleaved parses flags that may come before, between or after the
// inputs, as ohmlab validate does; "--" ends them.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var inputs []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		left := fs.Args()
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			return append(inputs, left...), nil
		}
		if len(left) == 0 {
			return inputs, nil
		}
		inputs, rest = append(inputs, left[0]), left[1:]
	}
}

// planClient is a Vault client from the environment, as the vault CLI
// reads it: VAULT_ADDR, VAULT_TOKEN or tokenFile, VAULT_CACERT.
func planClient(tokenFile string, timeout time.Duration) (*vaultkv.Client, error) {
	addr := os.Getenv("VAULT_ADDR")
	if addr == "" {
		return nil, errors.New("VAULT_ADDR is not set")
	}
	auth := vaultkv.AuthConfig{Method: vaultkv.MethodToken, TokenFile: tokenFile}
	if tokenFile != "" {
		// Read here, so that a missing or empty file is a usage error
		// (exit 1), not a Vault that could not be read (exit 3).
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("--token-file: %s is empty", tokenFile)
		}
	}
	if tokenFile == "" {
		if auth.Token = os.Getenv("VAULT_TOKEN"); auth.Token == "" {
			return nil, errors.New("no Vault token: set VAULT_TOKEN or pass --token-file")
		}
	}
	return vaultkv.New(vaultkv.Config{Address: addr, CAFile: os.Getenv("VAULT_CACERT"), Timeout: timeout, Auth: auth})
}

func planObjectOf(p planner.Preview) planObject {
	o := planObject{Namespace: p.Namespace, Name: p.Name, Path: p.Path, Reason: p.Drifted.Reason, Message: p.Drifted.Message,
		Actions: make([]planAction, len(p.Actions)), After: p.After, Changes: p.Changes()}
	for i, a := range p.Actions {
		o.Actions[i] = planAction{Action: a.Name, Key: a.Key}
	}
	switch {
	case p.Unreadable:
		o.State = stateUnreadable
	case p.Stalled:
		o.State = stateStalls
	case p.Waits:
		o.State = stateWaits
	case p.Changes():
		o.State = stateChanges
	default:
		o.State = stateInSync
	}
	if o.State != stateChanges {
		o.Writes = p.Writes
	}
	if o.State == stateWaits || o.State == stateStalls {
		o.Held = &planHeld{Reason: p.Reason, Message: p.Message}
	}
	return o
}

// printPlan prints the objects with changes, in the words of their Drifted
// condition, then those that would wait or stall and write nothing, then the
// total line.
func printPlan(w io.Writer, rep planReport) {
	for _, o := range rep.Objects {
		if len(o.Actions) == 0 {
			continue
		}
		line := fmt.Sprintf("%s/%s %s: %s", o.Namespace, o.Name, o.Path, o.Message)
		if len(o.After) > 0 {
			line += "; after " + strings.Join(o.After, ", ")
		}
		fmt.Fprintln(w, line)
	}
	for _, o := range rep.Objects {
		if len(o.Actions) > 0 {
			continue
		}
		switch o.State {
		case stateWaits:
			fmt.Fprintf(w, "%s/%s %s: would wait: %s: %s\n", o.Namespace, o.Name, o.Path, o.Reason, o.Message)
		case stateStalls:
			fmt.Fprintf(w, "%s/%s %s: would stall: %s: %s\n", o.Namespace, o.Name, o.Path, o.Reason, o.Message)
		}
	}
	for _, o := range rep.Objects {
		if o.State == stateUnreadable {
			fmt.Fprintf(w, "%s/%s %s: cannot be read: %s: %s\n", o.Namespace, o.Name, o.Path, o.Reason, o.Message)
		}
	}
	t := rep.Total
	noun := "objects"
	if t.Objects == 1 {
		noun = "object"
	}
	line := fmt.Sprintf("Plan: %d %s: %d with changes", t.Objects, noun, t.Changes)
	if n := len(t.Actions); n > 0 {
		line += " (" + actionTotals(t.Actions) + ")"
	}
	line = fmt.Sprintf("%s, %d would wait, %d would stall, %d in sync", line, t.Waits, t.Stalls, t.InSync)
	if t.Unreadable > 0 {
		// Only then: the line of a plan that read everything is unchanged.
		line += fmt.Sprintf(", %d could not be read", t.Unreadable)
	}
	fmt.Fprintln(w, line+".")
}

// actionTotals lists the action counts in the planner's order.
func actionTotals(counts map[string]int) string {
	var parts []string
	for _, name := range planner.ActionOrder() {
		if n := counts[name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, name))
		}
	}
	return strings.Join(parts, ", ")
}
