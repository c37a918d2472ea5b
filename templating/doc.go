// Package templating is the template language of VaultSeed's spec.data: it
// parses leaves, analyses one object and a set of objects, and generates and
// derives values from an injected randomness source (private keys and
// bcrypt salts: crypto/rand, see [Generator]), and asks Vault's password
// policies through an injected function (Generator.VaultPassword).
//
// It is pure: no Kubernetes, no Vault, and it imports nothing else of this
// module, so the reconciler, the admission webhook and the `ohmlab validate`
// CLI give one input one verdict.
//
// Source of truth: the product document, sections "Templates" and "What the
// controller does with a path". In short:
//
//   - A leaf of spec.data is a plain value (string, number, boolean) or a
//     string that is exactly one template: <random:N>, <hex:N>,
//     <password:N>, <password:N:classes>, <vault-password:policy>, <uuid>,
//     <age:secret>, <age:public>, <ssh:private>, <ssh:public>,
//     <bcrypt:key.path> or <ref:mount/path#key.path> ([ParseLeaf]); or a
//     composed value, text holding <ref:mount/path#key.path>s, "<<" for a
//     literal '<' (compose.go).
//   - The two keys of a key pair (age, ssh) always belong together: their
//     rules are written once, over the table in keypair.go.
//   - [Analyse] finds every problem of one object at once; [AnalyseSet] finds
//     the problems between objects (duplicate paths and names, reference
//     cycles).
//   - [Generator.Fill] computes, in dependency order, the values a path needs
//     ("Seed once": existing keys are never overwritten, references and
//     composed values follow their sources, a bcrypt hash is rewritten only
//     when it stops matching).
//
// No value ever appears in an error or a [Problem]: messages name keys,
// paths, kinds and lengths of templates, never what a key holds. A plain
// leaf may be a secret somebody typed.
package templating
