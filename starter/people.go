package main

import (
	"crypto/rand"
	"log/slog"

	"github.com/sluice-ci/sluice/api"
	"github.com/sluice-ci/sluice/config"
)

// people sets up sign-in to the pages with OIDC (SLUICE_OIDC_ISSUER), with
// the grants of the tokens file's people: section; nil when OIDC is off.
// The provider is discovered at the first sign-in, so the API starts
// while it is unreachable.
func people(cfg *config.Config, log *slog.Logger) (*api.People, error) {
	if cfg.OIDCIssuer == "" || cfg.APITokensFile == "" {
		return nil, nil
	}
	t, err := api.LoadTokens(cfg.APITokensFile)
	if err != nil {
		return nil, err
	}
	key := []byte(cfg.SessionKey)
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		log.Warn("session_key_generated", "effect", "sessions end when this API restarts and do not carry to other replicas",
			"advice", "set SLUICE_SESSION_KEY (the same long random string on every API replica)")
	}
	oidc := api.NewOIDC(api.OIDCConfig{
		Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret,
		RedirectURL: cfg.OIDCCallback(), Name: cfg.OIDCName,
	})
	log.Info("oidc_sign_in_on", "issuer", cfg.OIDCIssuer, "redirect_url", cfg.OIDCCallback(),
		"user_claim", t.People().UserClaim, "groups_claim", t.People().GroupsClaim)
	return &api.People{Grants: t.People(), OIDC: oidc, SessionKey: key}, nil
}
