// Package buildinfo holds the version and source revision stamped into the
// binaries at build time (-ldflags -X, see the Makefile).
package buildinfo

var (
	// Version is the release version, or "dev".
	Version = "dev"
	// Revision is the source revision (git commit) the binary was built from.
	Revision = "unknown"
)
