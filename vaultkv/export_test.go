package vaultkv

// TokenForTest returns the client's current Vault token, so that tests can
// check it appears in no error or log line.
func (c *Client) TokenForTest() string { return c.api.Token() }
