package main

import (
	"crypto/rand"
	"log/slog"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/config"
)

// people sets up the people of the tokens file's people: section: sign-in
// to the pages with OIDC when SLUICE_OIDC_ISSUER is set, and their
// personal tokens (which keep working if OIDC is turned off later); nil
// without a tokens file. The provider is discovered at the first sign-in,
// so the API starts while it is unreachable.
func people(cfg *config.Config, log *slog.Logger) (*api.People, error) {
	if cfg.APITokensFile == "" {
		return nil, nil
	}
	t, err := api.LoadTokens(cfg.APITokensFile)
	if err != nil {
		return nil, err
	}
	p := &api.People{Grants: t.People(), SessionKey: []byte(cfg.SessionKey)}
	if cfg.OIDCIssuer == "" {
		return p, nil
	}
	if len(p.SessionKey) == 0 {
		p.SessionKey = make([]byte, 32)
		_, _ = rand.Read(p.SessionKey)
		log.Warn("session_key_generated", "effect", "sessions end when this API restarts and do not carry to other replicas",
			"advice", "set SLUICE_SESSION_KEY (the same long random string on every API replica)")
	}
	p.OIDC = api.NewOIDC(api.OIDCConfig{
		Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret,
		RedirectURL: cfg.OIDCCallback(), Name: cfg.OIDCName, Scopes: cfg.OIDCScopes,
	})
	log.Info("oidc_sign_in_on", "issuer", cfg.OIDCIssuer, "redirect_url", cfg.OIDCCallback(),
		"user_claim", t.People().UserClaim, "groups_claim", t.People().GroupsClaim)
	return p, nil
}
