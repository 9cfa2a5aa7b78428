// Package keycloak runs a real Keycloak (its distribution as
// hack/keycloak.sh unpacks it, on the JDK) for the tests that need an
// OpenID Connect issuer: the conformance suite's web identity tests and
// the console's single sign-on. It starts Keycloak in development mode
// with an in-memory database and speaks its admin API to make realms,
// clients and users.
package keycloak

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
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

// Server is a running Keycloak.
type Server struct {
	cmd  *exec.Cmd
	done chan struct{}
	// Base is where it answers: http://ADDR/auth (the path Keycloak
	// served under before version 17, which the conformance suite names).
	Base       string
	adminToken string
}

// Start runs Keycloak from dir on addr (host:port, free) with its output
// in logPath, waits until it answers and signs in to its admin API.
func Start(ctx context.Context, dir, addr, logPath string) (*Server, error) {
	if l, err := net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("keycloak: %s is taken: %w", addr, err)
	} else {
		l.Close()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	admin := RandomText()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// Tokens name the issuer as clients reach it: addr as given.
	s := &Server{Base: "http://" + addr + "/auth", done: make(chan struct{})}
	bind := host
	if bind == "localhost" {
		bind = "127.0.0.1"
	}
	s.cmd = exec.Command(filepath.Join(dir, "bin", "kc.sh"), "start-dev", "--db=dev-mem",
		"--http-host="+bind, "--http-port="+port, "--http-relative-path=/auth", "--hostname="+s.Base)
	s.cmd.Env = append(os.Environ(), "KC_BOOTSTRAP_ADMIN_USERNAME=admin", "KC_BOOTSTRAP_ADMIN_PASSWORD="+admin,
		"JAVA_OPTS_KC_HEAP=-Xms64m -Xmx512m")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// A group of its own (kc.sh starts java as its child) that dies with
	// the process that started it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("keycloak: %w", err)
	}
	go func() { _ = s.cmd.Wait(); logFile.Close(); close(s.done) }()
	if err := s.signIn(ctx, admin); err != nil {
		s.Stop()
		return nil, fmt.Errorf("keycloak (log: %s): %w", logPath, err)
	}
	return s, nil
}

// Stop ends Keycloak's process group.
func (s *Server) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// signIn waits for Keycloak to answer (its first start builds the server,
// minutes on two cores), then takes an admin token.
func (s *Server) signIn(ctx context.Context, password string) error {
	deadline := time.Now().Add(4 * time.Minute)
	for {
		resp, err := http.Get(s.Base + "/realms/master/.well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-s.done:
			return errors.New("exited while starting")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			return errors.New("not answering after 4 minutes")
		}
	}
	tok, err := s.Token(ctx, "master", url.Values{"grant_type": {"password"}, "client_id": {"admin-cli"},
		"username": {"admin"}, "password": {password}})
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	s.adminToken = tok.AccessToken
	return nil
}

// Issuer is the issuer URL of realm's tokens.
func (s *Server) Issuer(realm string) string { return s.Base + "/realms/" + realm }

// Admin posts body as JSON to the admin API at /admin/realms+path: ""
// makes a realm, /REALM/clients a client, /REALM/users a user.
func (s *Server) Admin(ctx context.Context, path string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Base+"/admin/realms"+path, strings.NewReader(string(data)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.adminToken)
	return do(req, nil)
}

// AdminGet reads the admin API at /admin/realms+path into out
// (/REALM/users?username=NAME&exact=true finds a user).
func (s *Server) AdminGet(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+"/admin/realms"+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.adminToken)
	return do(req, out)
}

// Tokens are a token endpoint's answer.
type Tokens struct {
	AccessToken string `json:"access_token"`
	IDToken     string `json:"id_token"`
}

// Token asks realm's token endpoint for tokens with the form v.
func (s *Server) Token(ctx context.Context, realm string, v url.Values) (Tokens, error) {
	var t Tokens
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Issuer(realm)+"/protocol/openid-connect/token", strings.NewReader(v.Encode()))
	if err != nil {
		return t, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return t, do(req, &t)
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

// Claims decodes a JWT's payload, unverified (for a token just fetched
// from the issuer).
func Claims(token string, out any) error {
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

// RandomText is a random password or secret.
func RandomText() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
