package main

import (
	"encoding/json"
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/internal/validate"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// yaml11Booleans are the plain scalars that YAML 1.1 reads as booleans and
// YAML 1.2 as text. kubectl, Helm and Argo CD read YAML 1.1 (sigs.k8s.io/yaml),
// so `country: NO` reaches Vault as false.
var yaml11Booleans = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// booleanValues warns of the unquoted leaves of spec.data in d that YAML
// 1.1 turns into booleans, by object ("namespace/name", as validate.ID
// names it) and with their line. The analysis sees only the boolean: the
// text it was is in the YAML alone. The value named is one of
// yaml11Booleans, never anything else of the document.
func booleanValues(d document) map[string][]validate.Problem {
	var root yamlv3.Node
	if yamlv3.Unmarshal(d.text, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	out := map[string][]validate.Problem{}
	var object func(n *yamlv3.Node, depth int)
	object = func(n *yamlv3.Node, depth int) {
		if n.Kind != yamlv3.MappingNode || depth > maxListDepth {
			return
		}
		if items := child(n, "items"); items != nil && items.Kind == yamlv3.SequenceNode {
			for _, it := range items.Content {
				object(it, depth+1)
			}
			return
		}
		data := child(child(n, "spec"), "data")
		if data == nil {
			return
		}
		meta := child(n, "metadata")
		id := scalar(child(meta, "name"))
		if ns := scalar(child(meta, "namespace")); ns != "" {
			id = ns + "/" + id
		}
		out[id] = append(out[id], booleanLeaves(d, data, "")...)
	}
	object(root.Content[0], 0)
	return out
}

// booleanLeaves walks the mapping n of spec.data at the key path prefix.
func booleanLeaves(d document, n *yamlv3.Node, prefix string) []validate.Problem {
	if n.Kind != yamlv3.MappingNode {
		return nil
	}
	var out []validate.Problem
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := templating.PrintableKey(k.Value)
		if prefix != "" {
			path = prefix + "." + path
		}
		switch {
		case v.Kind == yamlv3.MappingNode:
			out = append(out, booleanLeaves(d, v, path)...)
		case v.Kind == yamlv3.ScalarNode && v.Style == 0 && (v.Tag == "!!int" || v.Tag == "!!float") && !keptAsWritten(v.Value):
			// Neither the text nor the number is printed: a number may be
			// a secret (a PIN) somebody typed.
			out = append(out, validate.Problem{Key: "spec.data." + path, Message: fmt.Sprintf(
				"line %d: this unquoted number is not kept as written: kubectl, Helm and Argo CD (YAML 1.1) send Vault another spelling or another number (a leading 0 is octal, 0x hexadecimal, an exponent is expanded, trailing zeros go, an integer beyond 64 bits is rounded): quote it if you meant the text",
				d.line+v.Line-1)})
		case v.Kind == yamlv3.ScalarNode && v.Style == 0 && v.Tag == "!!str":
			if b, ok := yaml11Booleans[v.Value]; ok {
				out = append(out, validate.Problem{Key: "spec.data." + path, Message: fmt.Sprintf(
					"line %d: the unquoted %s is the boolean %t for kubectl, Helm and Argo CD (YAML 1.1), and Vault gets %t: quote it (%q) if you meant the text",
					d.line+v.Line-1, v.Value, b, b, v.Value)})
			}
		}
	}
	return out
}

// child is the value of key in the mapping n, nil when there is none.
func child(n *yamlv3.Node, key string) *yamlv3.Node {
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yamlv3.Node) string {
	if n == nil || n.Kind != yamlv3.ScalarNode {
		return ""
	}
	return strings.TrimSpace(n.Value)
}

// keptAsWritten reports whether the plain number text reaches Vault as it
// is written, through kubectl's path: sigs.k8s.io/yaml (YAML 1.1), then the
// API machinery's JSON, which keeps an integer that fits in 64 bits and
// makes anything else a float64.
func keptAsWritten(text string) bool {
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return true // not a number for YAML 1.1: the analysis sees what it is
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return true
	}
	out, err := json.Marshal(v)
	return err != nil || string(out) == text
}
