// Package buildinfo holds the version and source revision stamped into the
// binaries at build time (-ldflags -X: the Makefile and hack/image read them
// from the VERSION file and git), and links in what the distroless image
// does not carry as files: the CA roots and the time zone database.
package buildinfo

import (
	// CA roots for Vault's TLS when the system has none (the image ships no
	// /etc/ssl): used by crypto/x509 only when it finds no system roots.
	_ "golang.org/x/crypto/x509roots/fallback"
	// Time zone data for time.LoadLocation, the image has no /usr/share/zoneinfo.
	_ "time/tzdata"
)

var (
	// Version is the release version (the VERSION file), or "dev".
	Version = "dev"
	// Revision is the source revision (git commit) the binary was built from.
	Revision = "unknown"
)
