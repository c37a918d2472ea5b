package vaultkv

// TokenForTest returns the client's current Vault token, so that tests can
// check it appears in no error or log line.
func (c *Client) TokenForTest() string { return c.api.Token() }

// Classify is classify, so that tests can class Vault's own answer to a
// request the client would not send.
var Classify = classify
