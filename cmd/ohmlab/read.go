package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/crdschema"
	"github.com/ohmlab/ohmlab-controller/internal/validate"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// stdinName is the argument, and the file name in reports, of standard input.
const stdinName = "-"

// object is one VaultSeed read from the input.
type object struct {
	// File is the file it was read from ("-" for standard input) and Line
	// the first line of its YAML document.
	File string
	Line int
	Seed *ohmlabv1alpha1.VaultSeed
	// Problems are what made the document unfit for the analysis (a field
	// of the wrong type, no name, an unknown version); an object with such
	// problems is reported with them alone and left out of the analysis.
	Problems []validate.Problem
	// Schema are what the API server's validation of the CRD's schema and
	// rules refuses in the document (internal/crdschema), each on its field
	// path; check reports those the other problems do not already name.
	Schema []validate.Problem
	// Warnings are what reading its document found legal but surprising:
	// a key given twice, of which kubectl keeps only the last; an unquoted
	// value that YAML 1.1 makes a boolean.
	Warnings []validate.Problem
}

// readInputs reads every argument: "-" is standard input, a directory is
// walked for .yaml, .yml and .json files (as kubectl apply -f and Argo CD
// read a directory), any other argument is one file. The
// error, for unreadable input or invalid YAML, names the file (and line).
func readInputs(args []string, stdin io.Reader) ([]object, error) {
	var out []object
	for _, arg := range args {
		if arg == stdinName {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			if len(bytes.TrimSpace(data)) == 0 {
				// What a failed `helm template … |` leaves: passing it
				// would pass a check that checked nothing.
				return nil, errors.New("standard input is empty: did the command before the pipe fail? (set -o pipefail)")
			}
			objs, err := readStream(stdinName, data)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
			continue
		}
		files, err := yamlFiles(arg)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if f == arg && len(bytes.TrimSpace(data)) == 0 && isRegular(f) {
				// A file named on the command line, as `helm template … >
				// out.yaml` leaves it when it fails. An empty file found in
				// a directory, or /dev/null, is only nothing to check.
				return nil, fmt.Errorf("%s is empty: did the command that wrote it fail?", f)
			}
			objs, err := readStream(f, data)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

func isRegular(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// yamlFiles returns arg itself when it is a file, or the .yaml, .yml and
// .json files under it (and links to files), in lexical order, when it is a
// directory.
func yamlFiles(arg string) ([]string, error) {
	info, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{arg}, nil
	}
	var files []string
	err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" && ext != ".json" {
			return nil
		}
		switch {
		case d.Type().IsRegular():
			files = append(files, p)
		case d.Type()&fs.ModeSymlink != 0:
			// A link to a file is read as the file (a dangling one is an
			// error, not a silent skip); a link to a directory is not
			// walked.
			target, err := os.Stat(p)
			if err != nil {
				return err
			}
			if target.Mode().IsRegular() {
				files = append(files, p)
			}
		}
		return nil
	})
	return files, err
}

// readStream reads a multi-document YAML stream and returns its VaultSeeds,
// also those in the items of a List or a VaultSeedList. Other objects, and
// empty documents, are skipped; a document that is a list or a single value
// is an error, as for kubectl apply (the objects of a list would pass
// unchecked). A stream that starts with '{' is
// read as kubectl apply -f reads it (readJSON). A syntax error is returned
// as "<file>:<line>: ...".
func readStream(file string, data []byte) ([]object, error) {
	if utilyaml.IsJSONBuffer(data) {
		return readJSON(file, data)
	}
	var out []object
	for _, d := range splitDocuments(data) {
		j, err := yaml.YAMLToJSON(d.text)
		if err != nil {
			return nil, syntaxError(file, d.line, err)
		}
		if out, err = appendDocument(out, file, d, j); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readJSON reads data with apimachinery's YAMLOrJSONDecoder, kubectl
// apply -f's: JSON objects one after another (Python's surrogate-pair
// escapes included), or YAML when the first is not JSON. The warnings read
// from the text (duplicate keys, YAML 1.1 values) are given for a stream of
// one document.
func readJSON(file string, data []byte) ([]object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var docs []json.RawMessage
	for {
		var j json.RawMessage
		err := dec.Decode(&j)
		if errors.Is(err, io.EOF) {
			break
		}
		var syntax utilyaml.JSONSyntaxError
		if errors.As(err, &syntax) {
			return nil, fmt.Errorf("%s:%d: invalid JSON: %s", file, 1+bytes.Count(data[:min(int(syntax.Offset), len(data))], []byte("\n")), syntax.Err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: invalid JSON or YAML: %w", file, err)
		}
		docs = append(docs, j)
	}
	var out []object
	for _, j := range docs {
		d := document{line: 1}
		if len(docs) == 1 {
			d.text = data
		}
		var err error
		if out, err = appendDocument(out, file, d, j); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendDocument appends the VaultSeeds of the JSON j of document d, with
// the warnings of its text.
func appendDocument(out []object, file string, d document, j []byte) ([]object, error) {
	switch t := bytes.TrimSpace(j); {
	case len(t) == 0 || t[0] == '{' || string(t) == "null": // an object, or an empty document
	case t[0] == '[':
		return nil, fmt.Errorf("%s:%d: the document is a list, not an object: kubectl apply refuses it (several objects go in the items of a List)", file, d.line)
	default:
		return nil, fmt.Errorf("%s:%d: the document is a single value, not an object: kubectl apply refuses it", file, d.line)
	}
	first := len(out)
	out = appendObjects(out, file, d.line, j, "", 0)
	if d.text == nil {
		return out, nil
	}
	dups, booleans := duplicateKeys(d), booleanValues(d)
	for i := first; i < len(out); i++ {
		out[i].Warnings = append(out[i].Warnings, dups...)
		out[i].Warnings = append(out[i].Warnings, booleans[validate.ID(out[i].Seed)]...)
	}
	return out, nil
}

var duplicateKey = regexp.MustCompile(`line (\d+): key (".*") already set in map`)

// duplicateKeys warns of the keys given twice in one mapping of d. kubectl
// and the API server take the document without a word and keep the last
// value, so a value written above it is silently dropped; the strict YAML
// decoder of the same library names each one with its line.
func duplicateKeys(d document) []validate.Problem {
	_, err := yaml.YAMLToJSONStrict(d.text)
	if err == nil {
		return nil
	}
	var out []validate.Problem
	for _, m := range duplicateKey.FindAllStringSubmatch(err.Error(), -1) {
		n, convErr := strconv.Atoi(m[1])
		if convErr != nil {
			continue
		}
		out = append(out, validate.Problem{Message: fmt.Sprintf(
			"line %d: key %s is given twice in its mapping: kubectl applies only the last one", d.line+n-1, m[2])})
	}
	return out
}

// document is one YAML document of a stream and the line it starts on.
type document struct {
	text []byte
	line int
}

// splitDocuments cuts a stream at the lines that start a document: "---"
// alone, or followed by a space and a comment or content. A separator line
// that carries content stays the first line of its document; other
// separator lines are left out. Each document keeps the line it starts on,
// so that a line number within it maps to one of the stream.
func splitDocuments(data []byte) []document {
	var docs []document
	start, startLine, line := 0, 1, 1
	for i := 0; i < len(data); line++ {
		next := len(data)
		if end := bytes.IndexByte(data[i:], '\n'); end >= 0 {
			next = i + end + 1
		}
		if sep, content := separator(data[i:next]); sep {
			if i > start {
				docs = append(docs, document{text: data[start:i], line: startLine})
			}
			start, startLine = next, line+1
			if content {
				start, startLine = i, line
			}
		}
		i = next
	}
	if start < len(data) {
		docs = append(docs, document{text: data[start:], line: startLine})
	}
	return docs
}

// separator reports whether l is a document separator line, and whether it
// carries content after "---" besides blanks and a comment.
func separator(l []byte) (sep, content bool) {
	rest, ok := bytes.CutPrefix(l, []byte("---"))
	if !ok || (len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' && rest[0] != '\r') {
		return false, false
	}
	rest = bytes.TrimSpace(rest)
	return true, len(rest) > 0 && rest[0] != '#'
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError names the file and the line of a YAML error, counted from the
// start of the file.
func syntaxError(file string, docLine int, err error) error {
	msg := err.Error()
	line := docLine
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			line = docLine + n - 1
			msg = "yaml: " + msg[len(m[0]):]
		}
	}
	return fmt.Errorf("%s:%d: invalid YAML: %s", file, line, msg)
}

// maxListDepth bounds Lists nested in Lists.
const maxListDepth = 8

// appendObjects appends the VaultSeeds of one JSON document: the document
// itself, or the items of a List. implicitKind is the kind of items
// without one (VaultSeed in a VaultSeedList).
func appendObjects(out []object, file string, line int, j []byte, implicitKind string, depth int) []object {
	var m map[string]json.RawMessage
	if json.Unmarshal(j, &m) != nil {
		return out // null (an empty document), a scalar or a list: not an object
	}
	apiVersion, kind := jsonString(m["apiVersion"]), jsonString(m["kind"])
	if kind == "" && apiVersion == "" {
		kind, apiVersion = implicitKind, ohmlabv1alpha1.GroupVersion.String()
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case kind == "List" || (group == ohmlabv1alpha1.GroupVersion.Group && kind == "VaultSeedList"):
		var items []json.RawMessage
		if depth >= maxListDepth || json.Unmarshal(m["items"], &items) != nil {
			return out
		}
		itemKind := ""
		if kind == "VaultSeedList" {
			itemKind = "VaultSeed"
		}
		for _, it := range items {
			out = appendObjects(out, file, line, it, itemKind, depth+1)
		}
		return out
	case group == ohmlabv1alpha1.GroupVersion.Group && kind == "VaultSeed":
		return append(out, decodeSeed(file, line, apiVersion, j))
	case kind != "" && (group == ohmlabv1alpha1.GroupVersion.Group || strings.EqualFold(kind, "VaultSeed")):
		// A misspelled kind or group would be skipped silently, and the
		// objects it was meant to check would pass unchecked.
		o := decodeSeed(file, line, apiVersion, j)
		o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: "kind",
			Message: fmt.Sprintf("%s %s is not a kind ohmlab knows: use %s VaultSeed", apiVersion, kind, ohmlabv1alpha1.GroupVersion)})
		return append(out, o)
	}
	return out
}

func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// decodeSeed decodes one VaultSeed document. What kubectl apply would
// refuse (a field the kind does not have, matched case-sensitively as the
// API server does, or a field of the wrong type), a missing name and an
// unknown version are problems of the object.
func decodeSeed(file string, line int, apiVersion string, j []byte) object {
	o := object{File: file, Line: line, Seed: &ohmlabv1alpha1.VaultSeed{}}
	strictErrs, _ := kjson.UnmarshalStrict(j, &ohmlabv1alpha1.VaultSeed{}, kjson.DisallowUnknownFields)
	for _, err := range strictErrs {
		var fe kjson.FieldError
		if errors.As(err, &fe) {
			o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: fe.FieldPath(),
				Message: "is not a field of VaultSeed (field names are case-sensitive): kubectl apply refuses it"})
		}
	}
	err := json.Unmarshal(j, o.Seed)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: typeErr.Field,
			Message: fmt.Sprintf("must be %s, not a JSON %s", jsonKind(typeErr.Type), typeErr.Value)})
	case err != nil: // a timestamp of metadata that does not parse: decoding stopped there
		o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: "metadata",
			Message: "cannot be read as a VaultSeed: " + err.Error()})
		var id struct {
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		_ = kjson.UnmarshalCaseSensitivePreserveInts(j, &id)
		o.Seed.Name, o.Seed.Namespace = id.Metadata.Name, id.Metadata.Namespace
	}
	if apiVersion != ohmlabv1alpha1.GroupVersion.String() {
		o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: "apiVersion",
			Message: fmt.Sprintf("%s is not a version this ohmlab knows: use %s", apiVersion, ohmlabv1alpha1.GroupVersion)})
	} else {
		o.Schema = schemaProblems(j)
	}
	if o.Seed.Name == "" {
		o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: validate.KeyName,
			Message: "is empty: kubectl apply needs a name"})
	} else {
		o.Problems = append(o.Problems, metadataProblems(o.Seed.ObjectMeta)...)
	}
	switch {
	case len(j) > maxStoredObject:
		o.Problems = append(o.Problems, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: validate.KeyData, Message: fmt.Sprintf(
			"the object is %d KiB of JSON, more than the 1.5 MiB an API server's etcd stores by default: kubectl apply fails, "+
				"server-side too; split its keys over several objects", (len(j)+1023)/1024)})
	case len(j) > maxClientSideApply:
		o.Warnings = append(o.Warnings, validate.Problem{Message: fmt.Sprintf("the object is %d KiB of JSON, more than the 256 KiB "+
			"that client-side kubectl apply (and Argo CD's default sync) keeps of it in the annotation kubectl.kubernetes.io/last-applied-configuration: "+
			"kubectl apply refuses it; apply it server-side (kubectl apply --server-side, Argo CD's ServerSideApply=true), or split its keys over several objects",
			(len(j)+1023)/1024)})
	case len(j)+annotationBytes(o.Seed.Annotations) > maxClientSideApply:
		o.Warnings = append(o.Warnings, validate.Problem{Key: "metadata.annotations", Message: fmt.Sprintf("are %d KiB and the object %d KiB of JSON: "+
			"client-side kubectl apply (and Argo CD's default sync) adds a copy of the object in the annotation kubectl.kubernetes.io/last-applied-configuration, "+
			"which takes the annotations over the API server's 256 KiB, so kubectl apply refuses it; apply it server-side (kubectl apply --server-side, Argo CD's ServerSideApply=true), or shorten them",
			(annotationBytes(o.Seed.Annotations)+1023)/1024, (len(j)+1023)/1024)})
	}
	return o
}

// metadataProblems checks metadata as the API server does when a namespaced
// custom resource is created (apiextensions-apiserver's validator): the name a
// DNS subdomain, the namespace a DNS label, then the labels, annotations,
// owner references and finalizers. An empty namespace is not one: kubectl
// and Argo CD fill it in; nor is a negative generation, which the API
// server replaces. The messages are the API server's; none holds an
// annotation's value.
func metadataProblems(m metav1.ObjectMeta) []validate.Problem {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
	m.Generation = 0 // the API server sets it on create, before it validates
	var out []validate.Problem
	for _, e := range apivalidation.ValidateObjectMeta(&m, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")) {
		out = append(out, validate.Problem{Reason: templating.ReasonInvalidSpec, Key: e.Field,
			Message: e.ErrorBody() + ": kubectl apply refuses it"})
	}
	return out
}

// schemaProblems are the API server's refusals of the VaultSeed JSON j for
// the CRD's schema and rules, as its Invalid status lists them: the field
// path, and the message it gives. j decodes as the API server decodes it.
func schemaProblems(j []byte) []validate.Problem {
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &obj); err != nil {
		return nil // the decoding problems name it
	}
	errs, err := crdschema.Validate(context.Background(), ohmlabv1alpha1.GroupVersion.Version, obj)
	if err != nil {
		// The embedded CRD is the build's: a failure is a bug, said in full.
		return []validate.Problem{{Reason: templating.ReasonInvalidSpec, Message: "cannot check the CRD's schema: " + err.Error()}}
	}
	out := make([]validate.Problem, 0, len(errs))
	for _, e := range errs {
		if e.Field == "" || e.Field == "<nil>" {
			// The API server's note that it left the CEL rules unchecked
			// after a blocking error: ohmlab validate checks what they
			// check in the webhook's words all the same.
			continue
		}
		reason := templating.ReasonInvalidSpec
		if strings.HasPrefix(e.Field, "spec.rotate") {
			reason = templating.ReasonInvalidRotation
		}
		out = append(out, validate.Problem{Reason: reason, Key: e.Field, Message: e.ErrorBody() + ": kubectl apply refuses it"})
	}
	return out
}

// annotationBytes counts annotations as the API server's limit does. The
// annotation client-side kubectl apply adds holds the whole object, its
// annotations included, beside them.
func annotationBytes(a map[string]string) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(v)
	}
	return n
}

// maxStoredObject is etcd's default request limit (--max-request-bytes,
// 1.5 MiB): the API server cannot store a larger object.
const maxStoredObject = 1536 << 10

// maxClientSideApply is the most bytes of annotations an object may have
// (the API server's limit, apimachinery's TotalAnnotationSizeLimitB), which
// client-side kubectl apply fills with the object's JSON.
const maxClientSideApply = 256 << 10

// jsonKind names, with its article, the JSON kind a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a map"
}
