package vaultkv

import (
	"context"
	"errors"
	"fmt"

	vaultapi "github.com/hashicorp/vault/api"
)

// OpGenerate names GeneratePassword in errors and in the metrics'
// operation label.
const OpGenerate = "generate"

// GeneratePassword asks Vault's password policy named policy for a new
// password: GET sys/policies/password/<policy>/generate, which needs read
// on that path (the chart's vault/policy.hcl grants it for every policy
// name). A policy that does not exist is ClassNotFound; a refusal
// ClassForbidden. A name that is not one path segment (empty, ".", "..",
// or holding '/', '?', '#', '%' or white space) is refused before sending
// (ClassInvalid): vault/api would clean it into another path. The
// password is in no error or log line.
func (c *Client) GeneratePassword(ctx context.Context, policy string) (string, error) {
	path := "sys/policies/password/" + policy + "/generate"
	if err := checkPolicyName(policy); err != nil {
		return "", c.refuse(OpGenerate, path, err)
	}
	var password string
	err := c.do(ctx, OpGenerate, path, func(ctx context.Context) error {
		return c.request(ctx, OpGenerate, path, func(ctx context.Context) error {
			resp, err := c.api.Logical().ReadRawWithContext(ctx, path)
			if resp != nil {
				defer resp.Body.Close()
			}
			if err != nil {
				return err
			}
			s, err := vaultapi.ParseSecret(resp.Body)
			if err != nil {
				return fmt.Errorf("decoding Vault's answer: %w", err)
			}
			if s != nil {
				password, _ = s.Data["password"].(string)
			}
			if password == "" {
				return errors.New("Vault's answer has no password")
			}
			return nil
		})
	})
	if err != nil {
		return "", err
	}
	return password, nil
}

// checkPolicyName refuses a policy name that is not one plain segment of
// a request path.
func checkPolicyName(p string) error {
	if p == "" || p == "." || p == ".." {
		return errors.New("the password policy name is empty, \".\" or \"..\"")
	}
	for _, c := range []byte(p) {
		if c <= ' ' || c >= 0x7f || c == '/' || c == '?' || c == '#' || c == '%' {
			return errors.New("the password policy name holds a character that is not one plain path segment's")
		}
	}
	return nil
}
