package api

import (
	"context"
	"net/http"
)

// ListPersonalTokens lists the caller's personal tokens (never their
// values).
func (c *Client) ListPersonalTokens(ctx context.Context) ([]PersonalToken, error) {
	var ts []PersonalToken
	return ts, c.do(ctx, http.MethodGet, "/api/v1/tokens", nil, &ts)
}

// RevokePersonalToken revokes one of the caller's personal tokens.
func (c *Client) RevokePersonalToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/tokens/"+seg(id)+"/revoke", nil, nil)
}
