package templating

import (
	"strings"
	"testing"
)

// secret is a value that must never appear in a message.
const secret = "Sup3rS3cretValue"

// typedArg is the argument of a malformed template of a known kind, which
// its problem shows as typed.
const typedArg = "Typ3dArgument"

func assertNoSecret(t *testing.T, what, msg string) {
	t.Helper()
	if strings.Contains(strings.ToLower(msg), strings.ToLower(secret)) {
		t.Errorf("%s contains a value: %q", what, msg)
	}
}

// sshPEM is s where an OpenSSH private key's base64 would be.
func sshPEM(s string) string {
	return "-----BEGIN OPENSSH PRIVATE KEY-----\n" + s + "\n-----END OPENSSH PRIVATE KEY-----\n"
}

func TestNoValueInProblems(t *testing.T) {
	type m = map[string]any
	long := secret + strings.Repeat("x", 72)
	objects := []Object{
		{Namespace: "ns", Name: "a", Path: "m/a", Data: m{
			"plain":    secret,
			"long":     long,
			"hashLong": "<bcrypt:long>",
			"badRand":  "<random:" + typedArg + ">",
			"badHex":   "<hex:" + typedArg + ">",
			"badUUID":  "<uuid:" + typedArg + ">",
			"badAge":   "<age:" + typedArg + ">",
			"badSSH":   "<SSH:" + typedArg + ">",
			"badBc":    "<bcrypt:" + typedArg + "..x>",
			"badRef":   "<ref:" + typedArg + ">",
			"unknown":  "<" + secret + ">",
			"unknown2": "<" + secret + ":" + secret + ">",
			"dot.key":  secret,
			"":         secret,
			"list":     []any{secret},
			"other":    map[string]string{"k": secret},
			"pub":      "<age:public>",
			"sshPub":   "<ssh:public>",
			"nested":   m{"x.y": m{"z": "<random:" + typedArg + ">"}},
			"rotated":  secret,
		}, Rotate: &Rotate{Keys: []string{"rotated", "plain"}}},
		{Namespace: "ns", Name: "a", Path: "m/a", Data: m{"k": "<ref:m/b#k>", "v": secret}},
		{Namespace: "ns", Name: "b", Path: "m/b", Data: m{"k": "<ref:m/a#k>", "v": secret}},
	}
	var problems []Problem
	for _, o := range objects {
		problems = append(problems, Analyse(o).Problems...)
	}
	problems = append(problems, AnalyseSet(objects)...)
	if len(problems) < 20 {
		t.Fatalf("only %d problems: the test does not exercise them all", len(problems))
	}
	reasons := map[string]bool{}
	echoed := map[string]bool{}
	for _, p := range problems {
		reasons[p.Reason] = true
		assertNoSecret(t, "problem", p.String())
		assertNoSecret(t, "problem object", p.Object)
		if strings.Contains(p.Message, typedArg) {
			echoed[p.Key] = true
		}
	}
	// A template of a known kind is shown as typed, whatever its case: it
	// is a template, not a value (the unknown kinds above are not).
	for _, k := range []string{"badRand", "badHex", "badUUID", "badAge", "badSSH", "badBc", "badRef", "nested.x.y.z"} {
		if !echoed[k] {
			t.Errorf("the problem of %s does not show the template as typed", k)
		}
	}
	for _, r := range []string{ReasonInvalidSpec, ReasonInvalidRotation, ReasonRefCycle, ReasonDuplicatePath, ReasonDuplicateName} {
		if !reasons[r] {
			t.Errorf("no %s problem exercised", r)
		}
	}
}

func TestNoValueInErrors(t *testing.T) {
	type m = map[string]any
	g := fillGenerator()
	var errs []error
	add := func(err error) {
		if err == nil {
			t.Errorf("expected an error")
			return
		}
		errs = append(errs, err)
	}
	for _, s := range []string{"<random:" + secret + ">", "<" + secret + ">", "<ref:" + secret + ">", "<bcrypt:" + secret + "..>", "<age:" + secret + ">", "<ssh:" + secret + ">", "<uuid:" + secret + ">", "<hex:" + secret + ">"} {
		_, err := ParseLeaf(s)
		add(err)
	}
	_, err := AgePublic(secret)
	add(err)
	_, err = AgePublic("AGE-SECRET-KEY-1" + strings.ToUpper(secret))
	add(err)
	_, err = SSHPublic(secret)
	add(err)
	_, err = SSHPublic(sshPEM(secret))
	add(err)
	_, err = g.Bcrypt(strings.Repeat(secret, 5))
	add(err)
	fill := func(data, current m) {
		a := Analyse(Object{Path: own, Data: data})
		if a.Problems != nil {
			t.Fatalf("analysis: %v", a.Problems)
		}
		res, err := g.Fill(t.Context(), a, FillInput{Current: current})
		if err != nil || len(res.Held) == 0 {
			t.Errorf("Fill held nothing back (error %v)", err)
			return
		}
		for _, h := range res.Held {
			add(h.Err)
		}
	}
	fill(m{"pw": "", "h": "<bcrypt:pw>"}, m{"pw": strings.Repeat(secret, 5)})
	fill(m{"s": "<age:secret>", "p": "<age:public>"}, m{"s": "AGE-SECRET-KEY-1" + secret})
	fill(m{"s": "<ssh:private>", "p": "<ssh:public>"}, m{"s": sshPEM(secret)})
	fill(m{"admin": m{"user": "x"}}, m{"admin": secret})
	fill(m{"admin": "x"}, m{"admin.k": secret})
	fill(m{"pw": "", "h": "<bcrypt:pw>"}, nil)
	fill(m{"x": "<ref:m/o#k>"}, m{"x": secret})
	for _, err := range errs {
		assertNoSecret(t, "error", err.Error())
	}
}
