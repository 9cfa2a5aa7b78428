package s3rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// Bucket policies: the AWS policy language as S3 bucket policies use it,
// parsed, validated and evaluated here: "*" as an action, resource
// patterns such as arn:aws:s3:::*, condition keys such as
// s3:x-amz-server-side-encryption or s3:ExistingObjectTag/<key>, and Deny
// with NotPrincipal included.
//
// Supported: Version, Id, Statement (one or a list), Sid, Effect,
// Principal ("*", AWS: "*", access keys, canonical IDs, user ARNs;
// CanonicalUser; Service principals, which match no request), NotPrincipal
// (with Deny), Action and NotAction, Resource and NotResource, Condition
// with the String, Numeric, Date, Bool, IpAddress, Null and Arn operators,
// their IfExists forms and ForAnyValue/ForAllValues qualifiers, over the
// keys in conditionKeys. Anything else is refused with MalformedPolicy,
// never accepted and ignored.

// BucketPolicy is a parsed bucket policy.
type BucketPolicy struct {
	statements []policyStatement
}

type policyStatement struct {
	sid          string
	allow        bool
	principals   principalMatch
	notPrincipal bool
	actions      []string // lower case patterns ("s3:get*")
	notAction    bool
	resources    []string // ARN patterns
	notResource  bool
	conditions   []policyCondition
}

// principalMatch is whom a Principal element names: anyone, access keys,
// or (a trust policy's) IAM ARNs and account IDs.
type principalMatch struct {
	anyone bool
	keys   map[string]bool
	arns   map[string]bool
}

func (p principalMatch) matches(r PolicyRequest) bool {
	if p.anyone || r.Principal != "" && p.keys[r.Principal] {
		return true
	}
	for _, a := range r.PrincipalARNs {
		if p.arns[a] {
			return true
		}
	}
	return false
}

type policyCondition struct {
	operator string // base operator, e.g. "stringlike"
	ifExists bool
	set      string // "", "forallvalues" or "foranyvalue"
	key      string // lower case
	values   []string
}

// policyError is S3's answer to a policy it refuses.
func policyError(format string, args ...any) error {
	return s3err.MalformedPolicy.With(fmt.Sprintf(format, args...))
}

// stringOrList is a JSON string or list of strings.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

type rawStatement struct {
	Sid          string                                `json:"Sid"`
	Effect       string                                `json:"Effect"`
	Principal    json.RawMessage                       `json:"Principal"`
	NotPrincipal json.RawMessage                       `json:"NotPrincipal"`
	Action       stringOrList                          `json:"Action"`
	NotAction    stringOrList                          `json:"NotAction"`
	Resource     stringOrList                          `json:"Resource"`
	NotResource  stringOrList                          `json:"NotResource"`
	Condition    map[string]map[string]json.RawMessage `json:"Condition"`
}

// ParseBucketPolicy reads and checks a bucket's policy document, as
// PutBucketPolicy does: a principal that names no one is refused.
func ParseBucketPolicy(doc []byte, bucket string, ids Identities) (*BucketPolicy, error) {
	return ParseStoredPolicy(doc, bucket, ids, true)
}

// ParseStoredPolicy reads a policy; strict refuses principals that name no
// one, otherwise (a stored policy, whose users may have gone since) they
// match no request.
func ParseStoredPolicy(doc []byte, bucket string, ids Identities, strict bool) (*BucketPolicy, error) {
	return parsePolicy(doc, policyKind{bucket: bucket, ids: ids, strict: strict})
}

// ParseIdentityPolicy reads and checks an identity policy (an IAM user's
// inline policy): no Principal (it is whoever holds the policy), Version
// 2012-10-17, unique Sids, S3 actions on S3 resources and IAM actions on
// IAM resources. Its Decide ignores PolicyRequest.Principal.
func ParseIdentityPolicy(doc []byte) (*BucketPolicy, error) {
	return parsePolicy(doc, policyKind{identity: true})
}

// ParseTrustPolicy reads and checks a role's trust policy: who may assume
// it (Principal: IAM ARNs, account IDs, OIDC providers as Federated) by
// which STS actions, on what conditions; no Resource.
func ParseTrustPolicy(doc []byte) (*BucketPolicy, error) {
	return parsePolicy(doc, policyKind{trust: true})
}

// policyKind says which kind of policy a document must be.
type policyKind struct {
	// trust: a role's trust policy instead.
	trust bool
	// A bucket policy: its bucket, who its principals may name, and
	// whether naming no one is refused.
	bucket string
	ids    Identities
	strict bool
	// identity: an identity policy instead.
	identity bool
}

func parsePolicy(doc []byte, kind policyKind) (*BucketPolicy, error) {
	var raw struct {
		Version   string          `json:"Version"`
		ID        string          `json:"Id"`
		Statement json.RawMessage `json:"Statement"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, policyError("This policy contains invalid Json")
	}
	switch {
	case kind.identity && raw.Version != "2012-10-17":
		return nil, policyError("The policy must contain a valid version string (2012-10-17)")
	case raw.Version != "" && raw.Version != "2012-10-17" && raw.Version != "2008-10-17":
		return nil, policyError("The policy must contain a valid version string")
	}
	var stmts []json.RawMessage
	switch s := bytes.TrimSpace(raw.Statement); {
	case len(s) == 0 || string(s) == "null":
		return nil, policyError("Missing required field Statement")
	case s[0] == '[':
		if err := json.Unmarshal(s, &stmts); err != nil {
			return nil, policyError("This policy contains invalid Json")
		}
	default:
		stmts = []json.RawMessage{s}
	}
	if len(stmts) == 0 {
		return nil, policyError("Could not parse the policy: Statement is empty!")
	}
	p := &BucketPolicy{}
	sids := map[string]bool{}
	for _, s := range stmts {
		var r rawStatement
		d := json.NewDecoder(bytes.NewReader(s))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil {
			return nil, policyError("This policy contains invalid Json")
		}
		if (kind.identity || kind.trust) && r.Sid != "" {
			if sids[r.Sid] {
				return nil, policyError("Statement IDs (SID) in a single policy must be unique")
			}
			sids[r.Sid] = true
		}
		st, err := parseStatement(r, kind)
		if err != nil {
			return nil, err
		}
		p.statements = append(p.statements, st)
	}
	return p, nil
}

func parseStatement(r rawStatement, kind policyKind) (policyStatement, error) {
	st := policyStatement{sid: r.Sid}
	switch r.Effect {
	case "Allow":
		st.allow = true
	case "Deny":
	default:
		return st, policyError("Invalid effect: %s", r.Effect)
	}
	var err error
	switch {
	case kind.identity && (len(r.Principal) > 0 || len(r.NotPrincipal) > 0):
		return st, policyError("Policy document should not specify a principal")
	case kind.identity:
		st.principals = principalMatch{anyone: true}
	case kind.trust:
		if len(r.Principal) == 0 || len(r.NotPrincipal) > 0 {
			return st, policyError("A trust policy's statements need a Principal (and no NotPrincipal)")
		}
		st.principals, err = parseTrustPrincipal(r.Principal)
	case len(r.Principal) > 0 && len(r.NotPrincipal) > 0 || len(r.Principal) == 0 && len(r.NotPrincipal) == 0:
		return st, policyError("Statement must have exactly one of Principal or NotPrincipal")
	case len(r.NotPrincipal) > 0:
		if st.allow {
			return st, policyError("NotPrincipal is only supported with Effect Deny")
		}
		st.notPrincipal = true
		st.principals, err = parsePrincipal(r.NotPrincipal, kind.ids, kind.strict)
	default:
		st.principals, err = parsePrincipal(r.Principal, kind.ids, kind.strict)
	}
	if err != nil {
		return st, err
	}
	if (len(r.Action) > 0) == (len(r.NotAction) > 0) {
		return st, policyError("Statement must have exactly one of Action or NotAction")
	}
	st.notAction = len(r.NotAction) > 0
	for _, a := range append(r.Action, r.NotAction...) {
		pattern, ok := actionPattern(a)
		if kind.trust {
			pattern, ok = iamActionPattern(a)
			ok = ok && strings.HasPrefix(pattern, "sts:")
		} else if !ok && kind.identity {
			pattern, ok = iamActionPattern(a)
		}
		if !ok {
			return st, policyError("Policy has invalid action")
		}
		st.actions = append(st.actions, pattern)
	}
	switch {
	case kind.trust && (len(r.Resource) > 0 || len(r.NotResource) > 0):
		return st, policyError("A trust policy names no Resource: the role is its resource")
	case !kind.trust && (len(r.Resource) > 0) == (len(r.NotResource) > 0):
		return st, policyError("Statement must have exactly one of Resource or NotResource")
	}
	st.notResource = len(r.NotResource) > 0
	for _, res := range append(r.Resource, r.NotResource...) {
		if kind.identity && !identityResource(res) || !kind.identity && !resourceOfBucket(res, kind.bucket) {
			return st, policyError("Policy has invalid resource")
		}
		st.resources = append(st.resources, res)
	}
	for op, keys := range r.Condition {
		for key, v := range keys {
			c, err := parseCondition(op, key, v)
			if err != nil {
				return st, err
			}
			st.conditions = append(st.conditions, c)
		}
	}
	return st, nil
}

// parsePrincipal reads a Principal (or NotPrincipal) element.
func parsePrincipal(raw json.RawMessage, ids Identities, strict bool) (principalMatch, error) {
	var star string
	if json.Unmarshal(raw, &star) == nil {
		if star != "*" {
			return principalMatch{}, policyError("Invalid principal in policy")
		}
		return principalMatch{anyone: true}, nil
	}
	var named map[string]stringOrList
	if err := json.Unmarshal(raw, &named); err != nil || len(named) == 0 {
		return principalMatch{}, policyError("Invalid principal in policy")
	}
	p := principalMatch{keys: map[string]bool{}, arns: map[string]bool{}}
	for kind, names := range named {
		for _, n := range names {
			switch kind {
			case "AWS":
				if n == "*" {
					p.anyone = true
					continue
				}
				if access, ok := principalAccess(n, ids); ok {
					p.keys[access] = true
					continue
				}
				if ids.KnownPrincipal(n) {
					// An IAM principal: an account, a directory user or
					// role, matched by the request's ARNs.
					p.arns[n] = true
					continue
				}
				if otherAccount(n) {
					// Another AWS account (a policy written for AWS that
					// grants across accounts): no request here is made
					// by it.
					continue
				}
				if strict {
					return principalMatch{}, policyError("Invalid principal in policy")
				}
			case "CanonicalUser":
				access, ok := ids.AccessOf(n)
				if !ok && strict {
					return principalMatch{}, policyError("Invalid principal in policy")
				}
				p.keys[access] = ok
			case "Service":
				// A service principal (log delivery and the like): no request
				// is ever made as one here.
			default:
				return principalMatch{}, policyError("Invalid principal in policy")
			}
		}
	}
	return p, nil
}

// parseTrustPrincipal reads a trust policy's Principal: "*", or AWS
// principals (user and role ARNs, account root ARNs, account IDs) and
// Federated ones (OIDC providers' ARNs), kept as written.
func parseTrustPrincipal(raw json.RawMessage) (principalMatch, error) {
	var star string
	if json.Unmarshal(raw, &star) == nil {
		if star != "*" {
			return principalMatch{}, policyError("Invalid principal in policy")
		}
		return principalMatch{anyone: true, arns: map[string]bool{}}, nil
	}
	var named map[string]stringOrList
	if err := json.Unmarshal(raw, &named); err != nil || len(named) == 0 {
		return principalMatch{}, policyError("Invalid principal in policy")
	}
	p := principalMatch{arns: map[string]bool{}}
	for kind, names := range named {
		for _, n := range names {
			switch {
			case kind == "AWS" && n == "*":
				p.anyone = true
			case kind == "AWS" && (strings.HasPrefix(n, "arn:aws:iam::") || strings.HasPrefix(n, "arn:aws:sts::") || ValidAccountID(n)),
				kind == "Federated" && n != "",
				kind == "Service" && n != "":
				p.arns[n] = true
			default:
				return principalMatch{}, policyError("Invalid principal in policy: %s", n)
			}
		}
	}
	return p, nil
}

// ValidAccountID reports an IAM account ID as Strata takes them: 1 to 64
// letters and digits (AWS's are 12 digits, Ceph's "RGW" and 17 digits).
func ValidAccountID(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, c := range n {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// otherAccount reports whether a principal names an AWS account as a
// whole (arn:aws:iam::<account>:root, or a 12-digit account ID).
func otherAccount(n string) bool {
	if rest, ok := strings.CutPrefix(n, "arn:aws:iam::"); ok {
		return strings.HasSuffix(rest, ":root") && len(rest) > len(":root")
	}
	if len(n) != 12 {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// principalAccess resolves an AWS principal: an access key, a canonical
// ID, or an IAM user ARN naming either (arn:aws:iam::<account>:user/<name>).
func principalAccess(n string, ids Identities) (string, bool) {
	if rest, ok := strings.CutPrefix(n, "arn:aws:iam::"); ok {
		_, user, ok := strings.Cut(rest, ":user/")
		if !ok {
			return "", false
		}
		n = user
	}
	if _, _, ok := ids.Identity(n); ok {
		return n, true
	}
	return ids.AccessOf(n)
}

// actionPattern checks an action ("*", "s3:*", "s3:Get*", "s3:GetObject")
// and returns it in lower case; one that names no S3 action is invalid.
func actionPattern(a string) (string, bool) {
	l := strings.ToLower(a)
	if l == "*" {
		return "s3:*", true
	}
	if !strings.HasPrefix(l, "s3:") {
		return "", false
	}
	for _, known := range Actions {
		if wildcardMatch(l, strings.ToLower(string(known))) {
			return l, true
		}
	}
	return "", false
}

// iamActionPattern checks an IAM or STS action of an identity policy
// ("iam:*", "iam:Get*", "iam:CreateUser", "sts:AssumeRole") and returns it
// in lower case.
func iamActionPattern(a string) (string, bool) {
	l := strings.ToLower(a)
	service, name, ok := strings.Cut(l, ":")
	if !ok || service != "iam" && service != "sts" || name == "" {
		return "", false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && c != '*' && c != '?' {
			return "", false
		}
	}
	return l, true
}

// identityResource reports whether an identity policy's resource is one
// it can name: "*", an S3 bucket or object pattern, or an IAM entity's
// ARN (arn:aws:iam::<account>:user/..., the account possibly empty).
func identityResource(res string) bool {
	return res == "*" || strings.HasPrefix(res, "arn:aws:s3:::") && len(res) > len("arn:aws:s3:::") ||
		strings.HasPrefix(res, "arn:aws:iam::") || strings.HasPrefix(res, "arn:aws:sts::")
}

// resourceOfBucket reports whether a resource pattern can name the bucket
// or its objects ("*" and patterns with wildcards included).
func resourceOfBucket(res, bucket string) bool {
	if res == "*" {
		return true
	}
	rest, ok := strings.CutPrefix(res, "arn:aws:s3:::")
	if !ok {
		return false
	}
	b, _, _ := strings.Cut(rest, "/")
	return wildcardMatch(b, bucket) || strings.Contains(b, "*") && wildcardMatch(rest, bucket+"/x")
}

// wildcardMatch matches s against a pattern where * is any run of
// characters and ? any one character.
func wildcardMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if wildcardMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

// Decision is what a policy says of a request.
type Decision int

// Decisions.
const (
	NoMatch Decision = iota
	Allow
	Deny
)

// PolicyRequest is one action on one resource, as a policy judges it.
type PolicyRequest struct {
	Principal string // access key; "" for an anonymous request
	// PrincipalARNs name the caller for a trust policy: its own ARN, its
	// account's root ARN and ID, or a web identity's provider.
	PrincipalARNs []string
	Action        Action
	Resource      string // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
	Context       ConditionContext
}

// Decide evaluates the policy: an explicit Deny wins, then an Allow.
func (p *BucketPolicy) Decide(r PolicyRequest) Decision {
	d := NoMatch
	action := strings.ToLower(string(r.Action))
	for _, st := range p.statements {
		if !st.applies(r, action) {
			continue
		}
		if !st.allow {
			return Deny
		}
		d = Allow
	}
	return d
}

func (st policyStatement) applies(r PolicyRequest, action string) bool {
	if st.principals.matches(r) == st.notPrincipal {
		return false
	}
	matched := false
	for _, a := range st.actions {
		matched = matched || wildcardMatch(a, action)
	}
	if matched == st.notAction {
		return false
	}
	matched = len(st.resources) == 0 && !st.notResource // a trust policy's: the role
	for _, res := range st.resources {
		matched = matched || res == "*" || wildcardMatch(res, r.Resource)
	}
	if matched == st.notResource {
		return false
	}
	for _, c := range st.conditions {
		if !c.holds(r.Context) {
			return false
		}
	}
	return true
}

// Public reports whether the policy grants the public anything: an Allow
// to anyone not narrowed to source addresses.
func (p *BucketPolicy) Public() bool {
	for _, st := range p.statements {
		if !st.allow || !st.principals.anyone {
			continue
		}
		narrowed := false
		for _, c := range st.conditions {
			narrowed = narrowed || c.key == "aws:sourceip" && c.operator == "ipaddress"
		}
		if !narrowed {
			return true
		}
	}
	return false
}

// Resource is the ARN of a bucket ("" key) or an object, as policies name
// it.
func Resource(bucket, key string) string {
	if key == "" {
		return "arn:aws:s3:::" + bucket
	}
	return "arn:aws:s3:::" + bucket + "/" + key
}
