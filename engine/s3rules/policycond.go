package s3rules

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Conditions of bucket policy statements: operators and keys.

// ConditionContext gives the values a request has for a condition key
// (lower case), and whether it has the key at all.
type ConditionContext func(key string) (values []string, present bool)

// conditionKeys are the keys a policy may name (lower case); keys with a
// trailing "/" take a tag key after it. A key a request does not carry is
// absent, as in AWS (aws:SourceVpc, for one, never is present here).
var conditionKeys = map[string]bool{
	"aws:sourceip": true, "aws:securetransport": true, "aws:currenttime": true, "aws:epochtime": true,
	"aws:useragent": true, "aws:referer": true, "aws:username": true, "aws:userid": true, "aws:principalarn": true,
	"aws:principaltype": true, "aws:principalaccount": true, "sts:authentication": true, "aws:sourcevpc": true, "aws:sourcevpce": true,
	"aws:multifactorauthpresent": true, "aws:multifactorauthage": true, "aws:requestedregion": true,
	"aws:sourcearn": true, "aws:sourceaccount": true, "aws:sourceorgid": true, "aws:resourceaccount": true,
	"s3:prefix": true, "s3:delimiter": true, "s3:max-keys": true, "s3:versionid": true,
	"s3:x-amz-acl": true, "s3:x-amz-grant-read": true, "s3:x-amz-grant-write": true, "s3:x-amz-grant-read-acp": true,
	"s3:x-amz-grant-write-acp": true, "s3:x-amz-grant-full-control": true, "s3:x-amz-copy-source": true,
	"s3:x-amz-metadata-directive": true, "s3:x-amz-server-side-encryption": true,
	"s3:x-amz-server-side-encryption-aws-kms-key-id": true, "s3:x-amz-server-side-encryption-customer-algorithm": true,
	"s3:x-amz-storage-class": true, "s3:x-amz-content-sha256": true, "s3:signatureversion": true, "s3:authtype": true,
	"s3:object-lock-mode": true, "s3:object-lock-retain-until-date": true, "s3:object-lock-legal-hold": true,
	"s3:requestobjecttagkeys": true, "s3:locationconstraint": true, "s3:x-amz-object-ownership": true,
	"s3:existingobjecttag/": true, "s3:requestobjecttag/": true, "aws:principaltag/": true,
	// A web identity token's session tags, to a trust policy.
	"aws:requesttag/": true, "aws:tagkeys": true,
}

// providerKeys are the keys of a web identity's provider, named
// PROVIDER:KEY (oidc.example.com/id/1:sub); app_id is Ceph's name for aud.
var providerKeys = map[string]bool{"sub": true, "aud": true, "azp": true, "amr": true, "app_id": true}

func knownConditionKey(key string) bool {
	if strings.HasSuffix(key, "/") {
		return false // a tag key's prefix without the tag's name
	}
	if conditionKeys[key] {
		return true
	}
	if i := strings.IndexByte(key, '/'); i > 0 && i < len(key)-1 && conditionKeys[key[:i+1]] {
		return true
	}
	if i := strings.LastIndexByte(key, ':'); i > 0 && providerKeys[key[i+1:]] {
		return true
	}
	return false
}

// conditionOperators are the base operators (lower case) and whether each
// is a negated one (true when the request value matches none).
var conditionOperators = map[string]bool{
	"stringequals": false, "stringnotequals": true, "stringequalsignorecase": false, "stringnotequalsignorecase": true,
	"stringlike": false, "stringnotlike": true,
	"numericequals": false, "numericnotequals": true, "numericlessthan": false, "numericlessthanequals": false,
	"numericgreaterthan": false, "numericgreaterthanequals": false,
	"dateequals": false, "datenotequals": true, "datelessthan": false, "datelessthanequals": false,
	"dategreaterthan": false, "dategreaterthanequals": false,
	"bool": false, "ipaddress": false, "notipaddress": true, "null": false,
	"arnequals": false, "arnlike": false, "arnnotequals": true, "arnnotlike": true,
}

// parseCondition reads one operator/key/value of a Condition block.
func parseCondition(op, key string, raw json.RawMessage) (policyCondition, error) {
	// Condition keys are case-insensitive; the tag name after the '/' of
	// s3:ExistingObjectTag/<name> is not (S3 tag keys are case-sensitive).
	c := policyCondition{key: strings.ToLower(key)}
	if i := strings.IndexByte(key, '/'); i >= 0 {
		c.key = strings.ToLower(key[:i+1]) + key[i+1:]
	}
	name := op
	if q, rest, ok := strings.Cut(op, ":"); ok {
		switch strings.ToLower(q) {
		case "forallvalues", "foranyvalue":
			c.set, name = strings.ToLower(q), rest
		default:
			return c, policyError("Invalid Condition type : %s", op)
		}
	}
	base := strings.ToLower(name)
	if b, ok := strings.CutSuffix(base, "ifexists"); ok && b != "null" {
		c.ifExists, base = true, b
	}
	if _, ok := conditionOperators[base]; !ok {
		return c, policyError("Invalid Condition type : %s", op)
	}
	c.operator = base
	if !knownConditionKey(c.key) {
		return c, policyError("Policy has an invalid condition key")
	}
	vals, err := conditionValues(raw)
	if err != nil || len(vals) == 0 {
		return c, policyError("Invalid Condition value for key %s", key)
	}
	for _, v := range vals {
		if !c.validValue(v) {
			return c, policyError("Invalid Condition value %q for %s", v, op)
		}
	}
	c.values = vals
	return c, nil
}

// conditionValues reads a condition value: a string, number or boolean, or
// a list of them.
func conditionValues(raw json.RawMessage) ([]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		list = []json.RawMessage{raw}
	}
	out := make([]string, 0, len(list))
	for _, r := range list {
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case float64:
			out = append(out, strings.TrimSpace(string(r)))
		case bool:
			out = append(out, strconv.FormatBool(x))
		default:
			return nil, policyError("condition values are strings, numbers or booleans")
		}
	}
	return out, nil
}

func (c policyCondition) validValue(v string) bool {
	switch {
	case c.operator == "null" || c.operator == "bool":
		_, err := strconv.ParseBool(v)
		return err == nil
	case strings.HasPrefix(c.operator, "numeric"):
		_, err := strconv.ParseFloat(v, 64)
		return err == nil
	case strings.HasPrefix(c.operator, "date"):
		_, ok := parsePolicyDate(v)
		return ok
	case strings.HasSuffix(c.operator, "ipaddress"):
		_, ok := parsePrefix(v)
		return ok
	}
	return true
}

// holds evaluates the condition against a request.
func (c policyCondition) holds(ctx ConditionContext) bool {
	vals, present := ctx(c.key)
	if c.operator == "null" {
		want, _ := strconv.ParseBool(c.values[0])
		return !present == want
	}
	negated := conditionOperators[c.operator]
	if !present || len(vals) == 0 {
		// A key the request lacks: a negated operator, IfExists and
		// ForAllValues (over no values) hold; the others do not.
		return c.ifExists || negated || c.set == "forallvalues"
	}
	matchesAny := func(v string) bool {
		for _, want := range c.values {
			if c.match(v, want) {
				return true
			}
		}
		return false
	}
	if c.set == "forallvalues" {
		for _, v := range vals {
			if matchesAny(v) == negated {
				return false
			}
		}
		return true
	}
	for _, v := range vals {
		if matchesAny(v) {
			return !negated
		}
	}
	return negated
}

// match compares one request value with one condition value, as the
// operator's positive form does.
func (c policyCondition) match(got, want string) bool {
	switch c.operator {
	case "stringequals", "stringnotequals":
		return got == want
	case "stringequalsignorecase", "stringnotequalsignorecase", "bool":
		return strings.EqualFold(got, want)
	case "stringlike", "stringnotlike", "arnlike", "arnnotlike":
		return wildcardMatch(want, got)
	case "arnequals", "arnnotequals":
		return got == want
	case "ipaddress", "notipaddress":
		p, ok1 := parsePrefix(want)
		ip, err := netip.ParseAddr(got)
		return ok1 && err == nil && p.Contains(ip)
	}
	if strings.HasPrefix(c.operator, "numeric") {
		g, err1 := strconv.ParseFloat(got, 64)
		w, err2 := strconv.ParseFloat(want, 64)
		return err1 == nil && err2 == nil && compares(c.operator[len("numeric"):], cmpFloat(g, w))
	}
	if strings.HasPrefix(c.operator, "date") {
		g, ok1 := parsePolicyDate(got)
		w, ok2 := parsePolicyDate(want)
		return ok1 && ok2 && compares(c.operator[len("date"):], g.Compare(w))
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compares tells whether a comparison's result satisfies an operator
// suffix (equals, notequals: its positive form, lessthan, ...).
func compares(suffix string, cmp int) bool {
	switch suffix {
	case "equals", "notequals":
		return cmp == 0
	case "lessthan":
		return cmp < 0
	case "lessthanequals":
		return cmp <= 0
	case "greaterthan":
		return cmp > 0
	case "greaterthanequals":
		return cmp >= 0
	}
	return false
}

func parsePolicyDate(v string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, true
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(s, 0), true
	}
	return time.Time{}, false
}

func parsePrefix(v string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}
