package s3rules

import (
	"encoding/xml"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// CORS: a bucket's configuration (kept as the XML document its PUT sent,
// once checked) and the matching of a browser's request against it.

// CORSConfiguration is S3's CORS document.
type CORSConfiguration struct {
	XMLName xml.Name   `xml:"CORSConfiguration"`
	XMLNS   string     `xml:"xmlns,attr,omitempty"`
	Rules   []CORSRule `xml:"CORSRule"`
}

// CORSRule is one rule.
type CORSRule struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds"`
}

// headerToken is what a header name may be (RFC 7230's token), with *.
var headerToken = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

var corsMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPut: true, http.MethodPost: true, http.MethodDelete: true}

// ParseCORS reads and checks a PutBucketCors document.
func ParseCORS(body []byte) (*CORSConfiguration, error) {
	var c CORSConfiguration
	if err := xml.Unmarshal(body, &c); err != nil || len(c.Rules) == 0 {
		return nil, s3err.MalformedXML
	}
	if len(c.Rules) > 100 {
		return nil, s3err.MalformedXML.With("A CORS configuration holds at most 100 rules.")
	}
	for _, r := range c.Rules {
		if len(r.AllowedOrigins) == 0 || len(r.AllowedMethods) == 0 {
			return nil, s3err.MalformedXML
		}
		for _, o := range r.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return nil, s3err.InvalidRequest.Withf("AllowedOrigin %q can not have more than one wildcard.", o)
			}
		}
		for _, m := range r.AllowedMethods {
			if !corsMethods[m] {
				return nil, s3err.InvalidRequest.Withf("Found unsupported HTTP method in CORS config. Unsupported method is %s", m)
			}
		}
		for _, h := range append(append([]string(nil), r.AllowedHeaders...), r.ExposeHeaders...) {
			if h != "" && !headerToken.MatchString(h) {
				return nil, s3err.InvalidRequest.Withf("AllowedHeader %q contains invalid character.", h)
			}
		}
	}
	return &c, nil
}

// StoredCORS reads a stored configuration (nil when unreadable).
func StoredCORS(doc []byte) *CORSConfiguration {
	if len(doc) == 0 {
		return nil
	}
	var c CORSConfiguration
	if xml.Unmarshal(doc, &c) != nil {
		return nil
	}
	return &c
}

// CORSAnswer is what a matched rule adds to an answer.
type CORSAnswer struct {
	AllowOrigin      string
	AllowMethods     string
	AllowHeaders     string
	ExposeHeaders    string
	AllowCredentials bool // sent only for a named origin, never with "*"
	MaxAge           *int
}

// Headers sets the answer's headers on h.
func (a CORSAnswer) Headers(h http.Header) {
	set := func(k, v string) {
		if v != "" {
			h[k] = []string{v}
		}
	}
	set("Access-Control-Allow-Origin", a.AllowOrigin)
	set("Access-Control-Allow-Methods", a.AllowMethods)
	set("Access-Control-Allow-Headers", a.AllowHeaders)
	set("Access-Control-Expose-Headers", a.ExposeHeaders)
	if a.AllowCredentials {
		set("Access-Control-Allow-Credentials", "true")
	}
	if a.MaxAge != nil {
		set("Access-Control-Max-Age", strconv.Itoa(*a.MaxAge))
	}
	h["Vary"] = []string{"Origin, Access-Control-Request-Headers, Access-Control-Request-Method"}
}

// Match finds the first rule allowing a request from origin with method
// and the request headers a preflight lists; ok false when none does.
func (c *CORSConfiguration) Match(origin, method string, headers []string) (CORSAnswer, bool) {
	for _, r := range c.Rules {
		wildcard, found := false, false
		for _, o := range r.AllowedOrigins {
			if wildcardMatch(o, origin) {
				found, wildcard = true, o == "*"
				break
			}
		}
		if !found || !contains(r.AllowedMethods, method) {
			continue
		}
		allowed := true
		for _, h := range headers {
			ok := false
			for _, a := range r.AllowedHeaders {
				ok = ok || wildcardMatch(strings.ToLower(a), strings.ToLower(h))
			}
			allowed = allowed && ok
		}
		if !allowed {
			continue
		}
		a := CORSAnswer{AllowOrigin: origin, AllowCredentials: !wildcard, MaxAge: r.MaxAgeSeconds,
			AllowMethods: strings.Join(r.AllowedMethods, ", "), ExposeHeaders: strings.Join(r.ExposeHeaders, ", ")}
		if wildcard {
			a.AllowOrigin = "*"
		}
		lower := make([]string, len(headers))
		for i, h := range headers {
			lower[i] = strings.ToLower(h)
		}
		a.AllowHeaders = strings.Join(lower, ", ")
		return a, true
	}
	return CORSAnswer{}, false
}

// ParseRequestHeaders splits Access-Control-Request-Headers.
func ParseRequestHeaders(v string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(v, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if !headerToken.MatchString(h) {
			return nil, s3err.BadRequest.Withf("Access-Control-Request-Headers %q contains invalid character.", h)
		}
		out = append(out, h)
	}
	return out, nil
}

// ErrCORSForbidden refuses a preflight no rule allows.
var ErrCORSForbidden = s3err.AccessForbidden.With("CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.")

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
