package templating

import "testing"

func TestLooksLikeSecret(t *testing.T) {
	tests := []struct {
		name, value string
		want        bool
	}{
		// Secrets pasted into spec.data.
		{"random letters and digits, 20", "q7RzK2mX9vLp4TnW8bYc", true},
		{"random letters and digits, 32", "Xy3kP9qLm2Vn7RtB5wZc8HjD4fGs6AeU", true},
		{"base64 of 24 bytes", "oK3+9vQ/xL2mR8tZ1bN7wA5cE4hJ6yUp", true},
		{"a token of 36 random characters", "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d", true},
		{"a password with symbols", "Tr0ub4dor&3-x!Kq9#Lm2$Vz", true},
		{"a PEM private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", true},
		{"an age secret key", "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ", true},

		// What plain values are: the samples' and the product document's
		// (config/samples, "VaultSeed"), and names, addresses, identifiers.
		{"empty", "", false},
		{"a user name", "admin", false},
		{"a client id", "grafana-core", false},
		{"a git remote", "git@git.example.com:platform/production.git", false},
		{"a URL", "https://keycloak.example.com/realms/master?x=Ab1Cd2Ef3Gh4Ij5Kl6", false},
		{"a host name", "keycloak.production.svc.cluster.local", false},
		{"a namespace", "vault-operator-system", false},
		{"camelCase words and a year", "KeycloakRealm2024ProductionClient", false},
		{"dashed words and digits", "typed-by-hand-value-1234", false},
		{"leetspeak words", "s3cr3t-typed-by-hand", false},
		{"a UUID", "8f14e45f-ceea-467f-a0e6-8c4f3b1e2a6d", false},
		{"a commit", "6660089c1a2b3c4d5e6f708192a3b4c5d6e7f809", false},
		{"a digest", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", false},
		{"an LDAP name", "CN=admin,OU=platform,O=example,DC=org", false},
		{"a sentence", "Welcome to Grafana, the 2024 Edition!", false},
		{"short random", "Sup3rS3cretValue", false},
		{"a repeated pattern", "aB1aB1aB1aB1aB1aB1aB1aB1", false},
		{"a date and time", "2026-10-12T07:20:00Z", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LooksLikeSecret(tt.value); got != tt.want {
				t.Errorf("LooksLikeSecret = %v, want %v", got, tt.want)
			}
		})
	}
}
