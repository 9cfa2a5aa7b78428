package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	kc "github.com/strata-storage/strata/internal/keycloak"
)

// The suite's web identity tests name their issuer
// http://localhost:8080/auth/realms/REALM (Keycloak's address and path
// before version 17), and read a client's and a user's tokens from the
// [webidentity] section of their configuration.
const (
	keycloakAddr  = "localhost:8080"
	keycloakRealm = "strata"
	// keycloakClient's tokens carry no session tags; keycloakUsers' carry
	// the tags the suite's ABAC tests look for.
	keycloakClient = "s3-tests"
	keycloakUsers  = "s3-tests-users"
	keycloakUser   = "tester"
	// keycloakAudience is the client ID both clients' tokens are made
	// for: the one the server is told to accept for the issuer.
	keycloakAudience = keycloakClient
)

// keycloakIssuer is the issuer the tokens name.
var keycloakIssuer = "http://" + keycloakAddr + "/auth/realms/" + keycloakRealm

// keycloak is a running Keycloak with the suite's realm.
type keycloak struct {
	*kc.Server
	// section is the suite's [webidentity] configuration.
	section string
}

// startKeycloak starts Keycloak from dir (its distribution, unpacked) on
// localhost:8080, makes a realm with two clients and a user, and fetches
// the tokens the suite uses. Its output goes to logPath.
func startKeycloak(ctx context.Context, dir, logPath string) (*keycloak, error) {
	srv, err := kc.Start(ctx, dir, keycloakAddr, logPath)
	if err != nil {
		return nil, fmt.Errorf("%w (the suite's web identity tests need Keycloak there)", err)
	}
	k := &keycloak{Server: srv}
	if err := k.setUp(ctx); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("keycloak (log: %s): %w", logPath, err)
	}
	return k, nil
}

// setUp makes the realm, its clients and user, and the tokens.
func (k *keycloak) setUp(ctx context.Context) error {
	secret, password := kc.RandomText(), kc.RandomText()
	audience := map[string]any{"name": "audience", "protocol": "openid-connect", "protocolMapper": "oidc-audience-mapper",
		"config": map[string]string{"included.client.audience": keycloakAudience, "access.token.claim": "true"}}
	// The user's tokens carry session tags as AWS reads them: a
	// multi-valued attribute is a list.
	tags := map[string]any{"name": "session tags", "protocol": "openid-connect", "protocolMapper": "oidc-hardcoded-claim-mapper",
		"config": map[string]string{
			"claim.name":         `https://aws\.amazon\.com/tags`, // dots escaped: not nested claims
			"claim.value":        `{"principal_tags":{"Department":["Engineering","Marketing"]}}`,
			"jsonType.label":     "JSON",
			"access.token.claim": "true",
		}}
	client := func(id string, serviceAccount bool, mappers ...any) map[string]any {
		return map[string]any{"clientId": id, "enabled": true, "publicClient": false, "secret": secret,
			"standardFlowEnabled": false, "serviceAccountsEnabled": serviceAccount, "directAccessGrantsEnabled": !serviceAccount,
			"protocolMappers": mappers}
	}
	steps := []struct {
		path string
		body any
	}{
		// Tokens outlive the suite's run.
		{"", map[string]any{"realm": keycloakRealm, "enabled": true, "accessTokenLifespan": 4 * 3600,
			"ssoSessionIdleTimeout": 4 * 3600, "ssoSessionMaxLifespan": 4 * 3600}},
		{"/" + keycloakRealm + "/clients", client(keycloakClient, true, audience)},
		{"/" + keycloakRealm + "/clients", client(keycloakUsers, false, audience, tags)},
		{"/" + keycloakRealm + "/users", map[string]any{"username": keycloakUser, "enabled": true,
			"email": keycloakUser + "@example.com", "emailVerified": true, "firstName": "S3", "lastName": "Tests",
			"credentials": []any{map[string]any{"type": "password", "value": password, "temporary": false}}}},
	}
	for _, s := range steps {
		if err := k.Admin(ctx, s.path, s.body); err != nil {
			return err
		}
	}
	clientToken, err := k.Token(ctx, keycloakRealm, url.Values{"grant_type": {"client_credentials"}, "client_id": {keycloakClient},
		"client_secret": {secret}})
	if err != nil {
		return fmt.Errorf("the client's token: %w", err)
	}
	userToken, err := k.Token(ctx, keycloakRealm, url.Values{"grant_type": {"password"}, "client_id": {keycloakUsers},
		"client_secret": {secret}, "username": {keycloakUser}, "password": {password}, "scope": {"openid"}})
	if err != nil {
		return fmt.Errorf("the user's token: %w", err)
	}
	var claims struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		AZP string `json:"azp"`
	}
	if err := kc.Claims(clientToken.AccessToken, &claims); err != nil {
		return err
	}
	if claims.Iss != keycloakIssuer {
		return fmt.Errorf("its tokens name issuer %q, not %q", claims.Iss, keycloakIssuer)
	}
	// An http issuer has no certificate to take a thumbprint of; the
	// suite registers whatever the section says.
	thumb := sha1.Sum([]byte(keycloakIssuer))
	k.section = fmt.Sprintf("\n[webidentity]\ntoken = %s\naud = %s\nsub = %s\nazp = %s\nuser_token = %s\nthumbprint = %s\nKC_REALM = %s\n",
		clientToken.AccessToken, keycloakAudience, claims.Sub, claims.AZP, userToken.AccessToken, strings.ToUpper(hex.EncodeToString(thumb[:])), keycloakRealm)
	return nil
}
