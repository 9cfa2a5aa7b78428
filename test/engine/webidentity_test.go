package engine

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// oidcIssuer is an OpenID Connect issuer over HTTPS publishing its
// discovery document and keys as the Kubernetes API server does, and
// minting ServiceAccount tokens as it would.
type oidcIssuer struct {
	srv *httptest.Server
	key *ecdsa.PrivateKey
}

func newOIDCIssuer(t *testing.T) *oidcIssuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &oidcIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/openid/v1/jwks"})
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// caFile writes the issuer's certificate where the servers read extra CAs.
func (is *oidcIssuer) caFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "issuer-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// token is a projected ServiceAccount token of namespace/name for aud.
func (is *oidcIssuer) token(t *testing.T, namespace, name, aud string, exp time.Time) string {
	k8s := map[string]any{"kubernetes.io": map[string]any{"namespace": namespace,
		"serviceaccount": map[string]string{"name": name, "uid": "sa-uid"}, "pod": map[string]string{"name": name + "-pod", "uid": "pod-uid"}}}
	return is.sign(t, "system:serviceaccount:"+namespace+":"+name, aud, exp, k8s)
}

// sign mints a token of subject for aud with extra claims.
func (is *oidcIssuer) sign(t *testing.T, subject, aud string, exp time.Time, extra map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.Claims{Issuer: is.srv.URL, Subject: subject, Audience: jwt.Audience{aud},
		Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}
	raw, err := jwt.Signed(signer).Claims(claims).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestWebIdentityAcrossNodes: a workload with a ServiceAccount token and
// no key at all gets credentials through AssumeRoleWithWebIdentity (the
// AWS SDK's own web identity provider, reading the token from a file as
// in a pod) and reads and writes the bucket its role allows, on every
// node. The trust policy admits one ServiceAccount: another namespace's
// token is refused, as are a token for another audience and an expired
// one; the session's namespace is a principal tag policies can test.
func TestWebIdentityAcrossNodes(t *testing.T) {
	t.Parallel()
	is := newOIDCIssuer(t)
	cli := newAWSIAM(t)
	n1, n2, n3, _ := iamCluster(t, "STRATA_OIDC_CA_FILE="+is.caFile(t))

	const aud = "sts.strata.dev/tenants/t1"
	provider := strings.TrimPrefix(is.srv.URL, "https://")
	var created struct{ OpenIDConnectProviderArn string }
	cli.must(n1, rootUser, rootPassword, &created, "iam", "create-open-id-connect-provider", "--url", is.srv.URL, "--client-id-list", aud)
	if created.OpenIDConnectProviderArn != "arn:aws:iam:::oidc-provider/"+provider {
		t.Fatalf("provider ARN %q", created.OpenIDConnectProviderArn)
	}
	trust := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":%q},
		"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{%q:"system:serviceaccount:apps:uploader",%q:%q}}}]}`,
		created.OpenIDConnectProviderArn, provider+":sub", provider+":aud", aud)
	cli.must(n2, rootUser, rootPassword, nil, "iam", "create-role", "--role-name", "uploader", "--assume-role-policy-document", trust)
	cli.must(n2, rootUser, rootPassword, nil, "iam", "put-role-policy", "--role-name", "uploader", "--policy-name", "data", "--policy-document",
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::apps-data","arn:aws:s3:::apps-data/*"],
		"Condition":{"StringEquals":{"aws:PrincipalTag/kubernetes-namespace":"apps"}}}]}`)
	mustCreateBucket(t, n1.aws(), "apps-data")
	mustCreateBucket(t, n1.aws(), "other-team")

	// As in a pod: the token in a file, the role in the environment, the
	// SDK's web identity provider.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(is.token(t, "apps", "uploader", aud, time.Now().Add(time.Hour))), 0o600); err != nil {
		t.Fatal(err)
	}
	stsOn := func(n *server) *sts.Client {
		return sts.New(sts.Options{BaseEndpoint: aws.String(n.url()), Region: "us-east-1", RetryMaxAttempts: 1})
	}
	provided := stscreds.NewWebIdentityRoleProvider(stsOn(n3), "arn:aws:iam:::role/uploader", stscreds.IdentityTokenFile(tokenFile),
		func(o *stscreds.WebIdentityRoleOptions) { o.RoleSessionName = "pod-1" })
	creds := aws.NewCredentialsCache(provided)
	for _, n := range []*server{n1, n2, n3} {
		// The role's policy reaches every node within a second or so.
		cl := s3.New(s3.Options{BaseEndpoint: aws.String(n.url()), Region: "us-east-1", Credentials: creds, UsePathStyle: true, RetryMaxAttempts: 1})
		waitFor(t, "the role's policy on "+n.addr, 10*time.Second, func() bool {
			_, err := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("apps-data")})
			return err == nil
		})
	}
	for _, n := range []*server{n1, n2, n3} {
		cl := s3.New(s3.Options{BaseEndpoint: aws.String(n.url()), Region: "us-east-1", Credentials: creds, UsePathStyle: true, RetryMaxAttempts: 1})
		put(t, cl, "apps-data", "from-"+n.addr, []byte("written with no key"))
		if b := get(t, cl, "apps-data", "from-"+n.addr); string(b) != "written with no key" {
			t.Errorf("read back %q", b)
		}
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("other-team"), Key: aws.String("x"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
			t.Errorf("another team's bucket: %v, want AccessDenied", err)
		}
	}
	got, err := creds.Retrieve(ctx)
	if err != nil || !strings.HasPrefix(got.AccessKeyID, "ASIA") || got.SessionToken == "" {
		t.Errorf("credentials %+v, %v", got, err)
	}

	refused := func(token, code string) {
		t.Helper()
		_, err := stsOn(n1).AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
			RoleArn: aws.String("arn:aws:iam:::role/uploader"), RoleSessionName: aws.String("x1"), WebIdentityToken: aws.String(token)})
		if errCode(err) != code {
			t.Errorf("AssumeRoleWithWebIdentity: %v, want %s", err, code)
		}
	}
	refused(is.token(t, "other", "uploader", aud, time.Now().Add(time.Hour)), "AccessDenied")
	refused(is.token(t, "apps", "uploader", "https://kubernetes.default.svc", time.Now().Add(time.Hour)), "InvalidIdentityToken")
	refused(is.token(t, "apps", "uploader", aud, time.Now().Add(-5*time.Minute)), "ExpiredTokenException")
	refused("not.a.token", "InvalidIdentityToken")
}

// TestWebIdentityTenantAudiencesAndSessionTags: an account's provider that
// lists no client IDs accepts the audiences the tenant names for its
// issuer (STRATA_OIDC_AUDIENCES, from the Tenant's
// spec.webIdentity.providers) and no other; a provider of an issuer the
// tenant names nothing for accepts no token. A token's session tags (AWS's
// https://aws.amazon.com/tags claim, multi-valued as an identity
// provider's attributes are) need sts:TagSession in the trust policy, are
// aws:RequestTag and aws:TagKeys to it, and aws:PrincipalTag to the
// session's policies.
func TestWebIdentityTenantAudiencesAndSessionTags(t *testing.T) {
	t.Parallel()
	is, other := newOIDCIssuer(t), newOIDCIssuer(t)
	cli := newAWSIAM(t)
	audiences, err := json.Marshal(map[string][]string{is.srv.URL: {"s3-app"}})
	if err != nil {
		t.Fatal(err)
	}
	cas := filepath.Join(t.TempDir(), "cas.pem")
	var bundle []byte
	for _, i := range []*oidcIssuer{is, other} {
		bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.srv.Certificate().Raw})...)
	}
	if err := os.WriteFile(cas, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{drives: 4, env: []string{"STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-1"),
		"STRATA_OIDC_CA_FILE=" + cas, "STRATA_OIDC_AUDIENCES=" + string(audiences)}})
	mustCreateBucket(t, s.aws(), "tagged")

	role := func(name, provider, trustCondition, action, policyCondition string) string {
		trust := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam:::oidc-provider/%s"},
			"Action":%s,"Condition":%s}]}`, strings.TrimPrefix(provider, "https://"), action, trustCondition)
		cli.must(s, rootUser, rootPassword, nil, "iam", "create-role", "--role-name", name, "--assume-role-policy-document", trust)
		cli.must(s, rootUser, rootPassword, nil, "iam", "put-role-policy", "--role-name", name, "--policy-name", "data", "--policy-document",
			`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::tagged","arn:aws:s3:::tagged/*"],"Condition":`+policyCondition+`}]}`)
		return "arn:aws:iam:::role/" + name
	}
	for _, i := range []*oidcIssuer{is, other} { // no --client-id-list
		cli.must(s, rootUser, rootPassword, nil, "iam", "create-open-id-connect-provider", "--url", i.srv.URL, "--thumbprint-list", strings.Repeat("a", 40))
	}
	issuerName := strings.TrimPrefix(is.srv.URL, "https://")
	tags := map[string]any{"https://aws.amazon.com/tags": map[string]any{"principal_tags": map[string]any{"Department": []string{"Engineering", "Marketing"}}}}
	hour := time.Now().Add(time.Hour)
	stsClient := sts.New(sts.Options{BaseEndpoint: aws.String(s.url()), Region: "us-east-1", RetryMaxAttempts: 1})
	assume := func(roleARN, token, want string) *sts.AssumeRoleWithWebIdentityOutput {
		t.Helper()
		out, err := stsClient.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{RoleArn: aws.String(roleARN),
			RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(token)})
		if errCode(err) != want {
			t.Fatalf("AssumeRoleWithWebIdentity %s: %v, want %q", roleARN, err, want)
		}
		return out
	}
	canWrite := func(out *sts.AssumeRoleWithWebIdentityOutput) bool {
		t.Helper()
		c := out.Credentials
		cl := s3.New(s3.Options{BaseEndpoint: aws.String(s.url()), Region: "us-east-1", UsePathStyle: true, RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(*c.AccessKeyId, *c.SecretAccessKey, *c.SessionToken)})
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("tagged"), Key: aws.String("k"), Body: strings.NewReader("v")})
		if err != nil && errCode(err) != "AccessDenied" {
			t.Fatalf("PutObject: %v", err)
		}
		return err == nil
	}

	// Audiences: the tenant's for the issuer, and nothing for another.
	app := role("app", is.srv.URL, fmt.Sprintf(`{"StringEquals":{%q:"s3-app"}}`, issuerName+":aud"), `"sts:AssumeRoleWithWebIdentity"`, `{}`)
	if !canWrite(assume(app, is.sign(t, "svc-1", "s3-app", hour, nil), "")) {
		t.Error("a session of the tenant's audience cannot write")
	}
	assume(app, is.sign(t, "svc-1", "another-service", hour, nil), "InvalidIdentityToken")
	elsewhere := role("elsewhere", other.srv.URL, `{}`, `"sts:AssumeRoleWithWebIdentity"`, `{}`)
	assume(elsewhere, other.sign(t, "svc-1", "s3-app", hour, nil), "InvalidIdentityToken")

	// Session tags.
	tagged := is.sign(t, "user-1", "s3-app", hour, tags)
	assume(app, tagged, "AccessDenied") // no sts:TagSession in the trust
	both := `["sts:AssumeRoleWithWebIdentity","sts:TagSession"]`
	n := 0
	for name, c := range map[string]struct {
		trust, policy string
		assumeCode    string
		writes        bool
	}{
		"request tag":                  {`{"StringEquals":{"aws:RequestTag/Department":"Engineering"}}`, `{}`, "", true},
		"request tag absent":           {`{"StringEquals":{"aws:RequestTag/Team":"Engineering"}}`, `{}`, "AccessDenied", false},
		"tag keys":                     {`{"StringEquals":{"aws:TagKeys":"Department"}}`, `{}`, "", true},
		"principal tag":                {`{}`, `{"StringEquals":{"aws:PrincipalTag/Department":"Marketing"}}`, "", true},
		"all values within":            {`{}`, `{"ForAllValues:StringEquals":{"aws:PrincipalTag/Department":["Engineering","Marketing"]}}`, "", true},
		"a value outside (denied)":     {`{}`, `{"ForAllValues:StringEquals":{"aws:PrincipalTag/Department":["Engineering"]}}`, "", false},
		"another principal tag denied": {`{}`, `{"StringEquals":{"aws:PrincipalTag/Department":"Sales"}}`, "", false},
	} {
		n++
		arn := role(fmt.Sprintf("tagged-%d", n), is.srv.URL, c.trust, both, c.policy)
		out := assume(arn, tagged, c.assumeCode)
		if c.assumeCode == "" && canWrite(out) != c.writes {
			t.Errorf("%s: writes %v, want %v", name, !c.writes, c.writes)
		}
	}
}
