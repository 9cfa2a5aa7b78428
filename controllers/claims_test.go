package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/s3rules"
)

// TestClaimNames: generated bucket and principal names are valid, within
// their limits, and distinct for distinct claims that share a long prefix.
func TestClaimNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	seen := map[string]bool{}
	for _, c := range []struct{ ns, name string }{{"team-a", "data"}, {long, "x"}, {long, "y"}, {"ns", "dotted.name.v1"}, {"n", strings.Repeat("b.", 100) + "c"}} {
		bc := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}}
		b := bucketNameOf(bc)
		if !s3rules.ValidBucketName(b) || seen[b] {
			t.Errorf("claim %s/%s: bucket name %q (valid %v, seen %v)", c.ns, c.name, b, s3rules.ValidBucketName(b), seen[b])
		}
		seen[b] = true
		p := principalName(&v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}})
		if len(p) > 64 || len(p) == 0 || strings.ContainsAny(p, "/ ") {
			t.Errorf("access %s/%s: principal name %q", c.ns, c.name, p)
		}
	}
	if got := bucketNameOf(&v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data"}}); got != "team-a-data" {
		t.Errorf("a short name is kept readable: %q", got)
	}
}

// TestAccessPolicies: a role's policy names the claimed buckets and their
// objects only; a policy document is taken only when what it allows stays
// inside the claimed buckets and S3.
func TestAccessPolicies(t *testing.T) {
	var doc policyDocument
	if err := json.Unmarshal([]byte(rolePolicy(v1.AccessRead, []string{"b1", "b2"})), &doc); err != nil {
		t.Fatal(err)
	}
	st := doc.Statement[0]
	if st.Effect != "Allow" || strings.Join(st.Resource, " ") != "arn:aws:s3:::b1 arn:aws:s3:::b1/* arn:aws:s3:::b2 arn:aws:s3:::b2/*" {
		t.Errorf("read role: %+v", st)
	}
	for _, a := range st.Action {
		if strings.HasPrefix(a, "s3:Put") || strings.HasPrefix(a, "s3:Delete") || a == "s3:ListAllMyBuckets" {
			t.Errorf("a read role allows %s", a)
		}
	}
	for _, c := range []struct {
		doc, refusal string
	}{
		{`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject"],"Resource":"arn:aws:s3:::b1/*"}]}`, ""},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::b1","arn:aws:s3:::b1/logs/*"]}}`, ""},
		{`{"Statement":[{"Effect":"Deny","Action":"*","Resource":"*"},{"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b1"}]}`, ""},
		{`{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::*"}]}`, "not one of the claimed buckets"},
		{`{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::b10/*"}]}`, "not one of the claimed buckets"},
		{`{"Statement":[{"Effect":"Allow","Action":"iam:CreateUser","Resource":"arn:aws:s3:::b1"}]}`, "not an S3 action"},
		{`{"Statement":[{"Effect":"Allow","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::b1"}]}`, "NotAction is not allowed"},
		{`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","NotResource":"arn:aws:s3:::b1"}]}`, "NotResource is not allowed"},
		{`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b1"}]}`, "Principal is not allowed"},
		{`{"Statement":[]}`, "no statement"},
		{`not json`, "not a JSON policy document"},
	} {
		err := checkAccessPolicy(c.doc, []string{"b1", "b2"})
		switch {
		case c.refusal == "" && err != nil:
			t.Errorf("%s: refused: %v", c.doc, err)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
			t.Errorf("%s: %v, want %q", c.doc, err, c.refusal)
		}
	}
}

// TestTrustPolicy: a role trusts one ServiceAccount's tokens for the
// tenant's audience from the cluster's issuer.
func TestTrustPolicy(t *testing.T) {
	doc := trustPolicy("arn:aws:iam:::oidc-provider/kubernetes.default.svc", "https://kubernetes.default.svc", "sts.strata.dev/store/media", "app", "reader")
	for _, want := range []string{`"Federated":"arn:aws:iam:::oidc-provider/kubernetes.default.svc"`, `"kubernetes.default.svc:sub":"system:serviceaccount:app:reader"`,
		`"kubernetes.default.svc:aud":"sts.strata.dev/store/media"`, `"Action":"sts:AssumeRoleWithWebIdentity"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("trust policy %s lacks %s", doc, want)
		}
	}
}

// TestClaimNotifications: a claim's rules name the Tenant's targets, which
// become their ARNs; IDs default to TARGET-N; a target the Tenant does
// not have is refused naming those it has; no spec keeps nothing.
func TestClaimNotifications(t *testing.T) {
	tenant := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "store", Name: "media"}}
	tenant.Spec.Notifications.Targets = []v1.NotificationTargetSpec{{Name: "hook", Type: "webhook"}, {Name: "jobs", Type: "nats"}}
	claim := &v1.BucketClaim{}
	if n, err := claimNotifications(claim, tenant); n != nil || err != nil {
		t.Fatalf("no spec: %+v %v", n, err)
	}
	claim.Spec.Notifications = &v1.BucketNotifications{}
	if n, err := claimNotifications(claim, tenant); err != nil || n == nil || len(n.Rules) != 0 {
		t.Fatalf("no rules (clears the configuration): %+v %v", n, err)
	}
	claim.Spec.Notifications.Rules = []v1.BucketNotificationRule{
		{Target: "jobs", Events: []string{"s3:ObjectCreated:*"}, Prefix: "in/"},
		{ID: "gone", Target: "hook", Events: []string{"s3:ObjectRemoved:*"}, Suffix: ".jpg"}}
	n, err := claimNotifications(claim, tenant)
	if err != nil || len(n.Rules) != 2 {
		t.Fatalf("rules: %+v %v", n, err)
	}
	if r := n.Rules[0]; r.ID != "jobs-1" || r.ARN != "arn:strata:sqs:us-east-1:jobs:nats" || r.Prefix != "in/" || r.Events[0] != "s3:ObjectCreated:*" {
		t.Fatalf("first rule: %+v", r)
	}
	if r := n.Rules[1]; r.ID != "gone" || r.ARN != "arn:strata:sqs:us-east-1:hook:webhook" || r.Suffix != ".jpg" {
		t.Fatalf("second rule: %+v", r)
	}
	claim.Spec.Notifications.Rules[1].Target = "kafka"
	if _, err := claimNotifications(claim, tenant); err == nil || !strings.Contains(err.Error(), `rules[1].target: Tenant store/media has no notification target "kafka" (its spec.notifications.targets: hook, jobs)`) {
		t.Fatalf("an unknown target: %v", err)
	}
}

// TestClaimEventsAreTheEngines: the event names the CRDs admit in a
// bucket's notification rules are the ones the engine takes.
func TestClaimEventsAreTheEngines(t *testing.T) {
	for _, crd := range []string{"storage.strata.dev_bucketclaims.yaml", "storage.strata.dev_tenants.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", crd))
		if err != nil {
			t.Fatal(err)
		}
		doc := string(raw)
		_, rest, ok := strings.Cut(doc, "events are the S3 event names the rule sends")
		if !ok {
			t.Fatalf("%s: no notification rule's events", crd)
		}
		_, rest, _ = strings.Cut(rest, "enum:\n")
		block, _, _ := strings.Cut(rest, "type: string")
		var admitted []string
		for _, line := range strings.Split(block, "\n") {
			if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
				admitted = append(admitted, name)
			}
		}
		if want := notify.EventNames(); !slices.Equal(admitted, want) {
			t.Errorf("%s admits %q, the engine takes %q", crd, admitted, want)
		}
	}
}
