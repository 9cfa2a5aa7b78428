// Package iamapi is the IAM Query API of a tenant, served on its S3 port
// (docs/iam.md): users, their access keys and inline policies, kept in
// the tenant's IAM directory (engine/iam). The front end (engine/s3api)
// authenticates the request and says who sent it; this package decides
// whether that caller may run the action, runs it, and answers the Query
// protocol's XML, never S3's.
package iamapi

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/iam"
)

// Version is the API version IAM clients send (Version=2010-05-08).
const Version = "2010-05-08"

const xmlns = "https://iam.amazonaws.com/doc/2010-05-08/"

// Caller is who sent a request, as the front end authenticated it.
type Caller struct {
	// Account is the IAM account the caller belongs to ("" the tenant's).
	Account string
	// Root: the account's root itself (its own access keys are its to
	// manage).
	Root bool
	// Admin: the account's root or a user with its rights; may do
	// anything in the account.
	Admin bool
	// User is the caller's IAM user name ("" for the account's root and
	// for users of the users file with its rights).
	User string
	// Allows decides an IAM action ("iam:CreateUser") on a resource (an
	// IAM ARN) by the caller's identity policies; nil allows nothing.
	Allows func(action, resource string) bool
	// Session is the STS session whose credentials signed the request
	// (nil: none).
	Session *iam.Session
}

// Handler serves the IAM API over a directory.
type Handler struct {
	Dir *iam.Directory
	// Account is the tenant's account ID, shown in ARNs.
	Account string
	// CheckPolicy validates an inline policy document (the front end's
	// identity-policy grammar, engine/s3rules); nil accepts any.
	CheckPolicy func(doc string) error
	// CheckTrust validates a role's trust policy; nil accepts any.
	CheckTrust func(doc string) error
}

// Serve runs the action a form names and writes its answer.
func (h *Handler) Serve(ctx context.Context, w http.ResponseWriter, form url.Values, c Caller, requestID string) {
	res, err := h.run(ctx, form, c)
	answer(w, xmlns, form.Get("Action"), res, err, requestID)
}

// answer writes an action's result, or its error, in the namespace ns.
func answer(w http.ResponseWriter, ns, action string, res any, err error, requestID string) {
	if err != nil {
		writeError(w, ns, err, requestID)
		return
	}
	writeResult(w, ns, action, res, requestID)
}

// action is one IAM action: its handler returns the result element's
// content (nil: none), after authorize checked the caller.
type action func(ctx context.Context, h *Handler, p params, c Caller) (any, error)

// actions are the IAM actions served, filled in by init (the policy,
// attachment and listing actions exist once per kind of entity).
var actions = map[string]action{}

func (h *Handler) run(ctx context.Context, form url.Values, c Caller) (any, error) {
	name := form.Get("Action")
	if name == "" {
		return nil, errMissingAction
	}
	if v := form.Get("Version"); v != Version {
		return nil, validation("Version %q is not the IAM API's (%s)", v, Version)
	}
	act, ok := actions[name]
	if !ok {
		return nil, &apiError{code: "InvalidAction", status: http.StatusBadRequest,
			msg: fmt.Sprintf("Could not find operation %s for version %s (see docs/iam.md for the actions served)", name, Version)}
	}
	return act(ctx, h, params{form: form, action: name}, c)
}

// params are an action's form fields.
type params struct {
	form   url.Values
	action string
}

func (p params) opt(name string) string { return p.form.Get(name) }

func (p params) req(name string) (string, error) {
	v := p.form.Get(name)
	if v == "" {
		return "", validation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(name))
	}
	return v, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// maxItems is a listing's page size: MaxItems, 1 to 1000, default 100.
func (p params) maxItems() (int, error) {
	v := p.opt("MaxItems")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, validation("MaxItems must be a number from 1 to 1000")
	}
	return n, nil
}

// paginate returns the page of items after marker (a name, compared
// ignoring case as IAM sorts) and the marker of the next page ("" when
// this is the last).
func paginate[T any](items []T, marker string, n int, name func(T) string) ([]T, string) {
	start := 0
	if marker != "" {
		for start < len(items) && strings.ToLower(name(items[start])) <= strings.ToLower(marker) {
			start++
		}
	}
	items = items[start:]
	if len(items) <= n {
		return items, ""
	}
	return items[:n], name(items[n-1])
}

// apiError is an error the Query protocol answers with its own code.
type apiError struct {
	code   string
	status int
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

var errMissingAction = &apiError{code: "MissingAction", status: http.StatusBadRequest, msg: "The request must contain the parameter Action"}

func validation(format string, args ...any) error {
	return &apiError{code: "ValidationError", status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// Error is the Query protocol's answer for an error of the directory or
// of the front end's authentication (which it maps itself: an unknown key
// is InvalidClientTokenId here, not S3's InvalidAccessKeyId).
func Error(code string, status int, msg string) error {
	return &apiError{code: code, status: status, msg: msg}
}

// directoryErrors are the directory's errors as IAM's codes.
var directoryErrors = []struct {
	err    error
	code   string
	status int
}{
	{iam.ErrNoSuchEntity, "NoSuchEntity", http.StatusNotFound},
	{iam.ErrEntityExists, "EntityAlreadyExists", http.StatusConflict},
	{iam.ErrLimitExceeded, "LimitExceeded", http.StatusConflict},
	{iam.ErrDeleteConflict, "DeleteConflict", http.StatusConflict},
	{iam.ErrInvalidInput, "InvalidInput", http.StatusBadRequest},
	{iam.ErrMalformedPolicy, "MalformedPolicyDocument", http.StatusBadRequest},
}

func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	for _, m := range directoryErrors {
		if errors.Is(err, m.err) {
			return &apiError{code: m.code, status: m.status, msg: strings.TrimPrefix(err.Error(), m.err.Error()+": ")}
		}
	}
	return &apiError{code: "ServiceFailure", status: http.StatusInternalServerError,
		msg: "The request processing has failed because of an unknown error: " + err.Error()}
}

// WriteError answers an error in the Query protocol's XML.
func WriteError(w http.ResponseWriter, err error, requestID string) {
	writeError(w, xmlns, err, requestID)
}

// WriteSTSError answers an error in STS's XML.
func WriteSTSError(w http.ResponseWriter, err error, requestID string) {
	writeError(w, stsXmlns, err, requestID)
}

func writeError(w http.ResponseWriter, ns string, err error, requestID string) {
	ae := asAPIError(err)
	typ := "Sender"
	if ae.status >= 500 {
		typ = "Receiver"
	}
	doc := struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
		Error   struct {
			Type    string `xml:"Type"`
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
		RequestID string `xml:"RequestId"`
	}{Xmlns: ns, RequestID: requestID}
	doc.Error.Type, doc.Error.Code, doc.Error.Message = typ, ae.code, ae.msg
	writeXML(w, ae.status, doc)
}

// writeResult answers <ActionResponse><ActionResult>res</ActionResult>
// <ResponseMetadata>...; actions without a result carry only the
// metadata. The action is one of the actions table's names.
func writeResult(w http.ResponseWriter, ns, action string, res any, requestID string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<%sResponse xmlns="%s">`, action, ns)
	if res != nil {
		enc := xml.NewEncoder(&b)
		if err := enc.EncodeElement(res, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
			writeError(w, ns, err, requestID)
			return
		}
		_ = enc.Flush()
	}
	b.WriteString("<ResponseMetadata><RequestId>")
	_ = xml.EscapeText(&b, []byte(requestID))
	fmt.Fprintf(&b, "</RequestId></ResponseMetadata></%sResponse>", action)
	writeBody(w, http.StatusOK, b.Bytes())
}

func writeXML(w http.ResponseWriter, status int, doc any) {
	body, err := xml.Marshal(doc)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
