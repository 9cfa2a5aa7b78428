package main

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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

// keycloak is a running Keycloak.
type keycloak struct {
	cmd  *exec.Cmd
	done chan struct{}
	// section is the suite's [webidentity] configuration.
	section string
}

// startKeycloak starts Keycloak from dir (its distribution, unpacked) in
// development mode with an in-memory database on localhost:8080, makes a
// realm with two clients and a user, and fetches the tokens the suite
// uses. Its output goes to logPath.
func startKeycloak(ctx context.Context, dir, logPath string) (*keycloak, error) {
	if l, err := net.Listen("tcp", "127.0.0.1:8080"); err != nil {
		return nil, fmt.Errorf("keycloak: 127.0.0.1:8080 is taken (the suite's web identity tests need Keycloak there): %w", err)
	} else {
		l.Close()
	}
	admin := randomText()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(dir, "bin", "kc.sh"), "start-dev", "--db=dev-mem",
		"--http-host=127.0.0.1", "--http-port=8080", "--http-relative-path=/auth",
		"--hostname=http://"+keycloakAddr+"/auth")
	cmd.Env = append(os.Environ(), "KC_BOOTSTRAP_ADMIN_USERNAME=admin", "KC_BOOTSTRAP_ADMIN_PASSWORD="+admin,
		"JAVA_OPTS_KC_HEAP=-Xms64m -Xmx512m")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A group of its own (kc.sh starts java as its child) that dies with
	// the runner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("keycloak: %w", err)
	}
	kc := &keycloak{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(kc.done) }()
	if err := kc.setUp(ctx, admin); err != nil {
		kc.stop()
		return nil, fmt.Errorf("keycloak (log: %s): %w", logPath, err)
	}
	return kc, nil
}

// stop ends Keycloak's process group.
func (kc *keycloak) stop() {
	_ = syscall.Kill(-kc.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-kc.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-kc.cmd.Process.Pid, syscall.SIGKILL)
		<-kc.done
	}
}

// setUp waits for Keycloak, then makes the realm, its clients and user,
// and the tokens.
func (kc *keycloak) setUp(ctx context.Context, adminPassword string) error {
	base := "http://" + keycloakAddr + "/auth"
	deadline := time.Now().Add(3 * time.Minute) // its start builds the server first
	for {
		resp, err := http.Get(base + "/realms/master/.well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-kc.done:
			return fmt.Errorf("exited while starting")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after 3 minutes")
		}
	}
	var adminToken struct {
		AccessToken string `json:"access_token"`
	}
	if err := form(ctx, base+"/realms/master/protocol/openid-connect/token", url.Values{
		"grant_type": {"password"}, "client_id": {"admin-cli"}, "username": {"admin"}, "password": {adminPassword},
	}, &adminToken); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	post := func(path string, body any) error {
		return adminPost(ctx, base+"/admin/realms"+path, adminToken.AccessToken, body)
	}
	secret, password := randomText(), randomText()
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
		if err := post(s.path, s.body); err != nil {
			return err
		}
	}
	tokenURL := base + "/realms/" + keycloakRealm + "/protocol/openid-connect/token"
	var clientToken, userToken struct {
		AccessToken string `json:"access_token"`
	}
	if err := form(ctx, tokenURL, url.Values{"grant_type": {"client_credentials"}, "client_id": {keycloakClient},
		"client_secret": {secret}}, &clientToken); err != nil {
		return fmt.Errorf("the client's token: %w", err)
	}
	if err := form(ctx, tokenURL, url.Values{"grant_type": {"password"}, "client_id": {keycloakUsers},
		"client_secret": {secret}, "username": {keycloakUser}, "password": {password}, "scope": {"openid"}}, &userToken); err != nil {
		return fmt.Errorf("the user's token: %w", err)
	}
	var claims struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		AZP string `json:"azp"`
	}
	if err := tokenClaims(clientToken.AccessToken, &claims); err != nil {
		return err
	}
	if claims.Iss != keycloakIssuer {
		return fmt.Errorf("its tokens name issuer %q, not %q", claims.Iss, keycloakIssuer)
	}
	// An http issuer has no certificate to take a thumbprint of; the
	// suite registers whatever the section says.
	thumb := sha1.Sum([]byte(keycloakIssuer))
	kc.section = fmt.Sprintf("\n[webidentity]\ntoken = %s\naud = %s\nsub = %s\nazp = %s\nuser_token = %s\nthumbprint = %s\nKC_REALM = %s\n",
		clientToken.AccessToken, keycloakAudience, claims.Sub, claims.AZP, userToken.AccessToken, strings.ToUpper(hex.EncodeToString(thumb[:])), keycloakRealm)
	return nil
}

// form posts a form and decodes the JSON answer into out.
func form(ctx context.Context, u string, v url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(v.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(req, out)
}

// adminPost posts JSON to Keycloak's admin API.
func adminPost(ctx context.Context, u, token string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(string(data)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return do(req, nil)
}

func do(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %.300s", req.Method, req.URL.Path, resp.Status, body)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// tokenClaims decodes a JWT's payload, unverified (the token is our own
// issuer's, just fetched).
func tokenClaims(token string, out any) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("a token of %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(payload, out)
}

func randomText() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
