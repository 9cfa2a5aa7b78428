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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/iam"
)

// Version is the API version IAM clients send (Version=2010-05-08).
const Version = "2010-05-08"

const xmlns = "https://iam.amazonaws.com/doc/2010-05-08/"

// Caller is who sent a request, as the front end authenticated it.
type Caller struct {
	// Admin: the root account or a user with its rights; may do anything.
	Admin bool
	// User is the caller's directory user ("" when it is none: the root
	// account, or a user of the operator's users file).
	User string
	// Allows decides an IAM action ("iam:CreateUser") on a resource (an
	// IAM ARN) by the caller's identity policies; nil allows nothing.
	Allows func(action, resource string) bool
}

// Handler serves the IAM API over a directory.
type Handler struct {
	Dir *iam.Directory
	// Account is the tenant's account ID, shown in ARNs.
	Account string
	// CheckPolicy validates an inline policy document (the front end's
	// identity-policy grammar, engine/s3rules); nil accepts any.
	CheckPolicy func(doc string) error
}

// Serve runs the action a form names and writes its answer.
func (h *Handler) Serve(ctx context.Context, w http.ResponseWriter, form url.Values, c Caller, requestID string) {
	res, err := h.run(ctx, form, c)
	if err != nil {
		writeError(w, err, requestID)
		return
	}
	writeResult(w, form.Get("Action"), res, requestID)
}

// action is one IAM action: its handler returns the result element's
// content (nil: none), after authorize checked the caller.
type action func(ctx context.Context, h *Handler, p params, c Caller) (any, error)

var actions = map[string]action{
	"CreateUser":       createUser,
	"GetUser":          getUser,
	"ListUsers":        listUsers,
	"UpdateUser":       updateUser,
	"DeleteUser":       deleteUser,
	"CreateAccessKey":  createAccessKey,
	"ListAccessKeys":   listAccessKeys,
	"UpdateAccessKey":  updateAccessKey,
	"DeleteAccessKey":  deleteAccessKey,
	"PutUserPolicy":    putUserPolicy,
	"GetUserPolicy":    getUserPolicy,
	"ListUserPolicies": listUserPolicies,
	"DeleteUserPolicy": deleteUserPolicy,
}

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
			msg: fmt.Sprintf("Could not find operation %s for version %s (this IAM API serves users, access keys and inline user policies)", name, Version)}
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

// subject is the user an action is about: UserName, or the caller's own
// when omitted (a directory user acting on itself).
func (p params) subject(c Caller) (string, error) {
	if u := p.opt("UserName"); u != "" {
		return u, nil
	}
	if c.User == "" {
		return "", validation("UserName is required: this caller is no IAM user (the root account's keys are the tenant's credentials, kept in a Secret)")
	}
	return c.User, nil
}

// userARN is a user's ARN.
func (h *Handler) userARN(u iam.DirUser) string {
	return fmt.Sprintf("arn:aws:iam::%s:user%s%s", h.Account, u.Path, u.Name)
}

// userResource is the ARN an action on a user is authorised against.
func (h *Handler) userResource(name string) string {
	if u, err := h.Dir.User(name); err == nil {
		return h.userARN(u)
	}
	return fmt.Sprintf("arn:aws:iam::%s:user/%s", h.Account, name)
}

// authorize lets the caller run the action on a resource: admins always;
// directory users when their policies allow it.
func (h *Handler) authorize(c Caller, action, resource string) error {
	if c.Admin || c.Allows != nil && c.Allows("iam:"+action, resource) {
		return nil
	}
	return &apiError{code: "AccessDenied", status: http.StatusForbidden,
		msg: fmt.Sprintf("User is not authorized to perform: iam:%s on resource: %s", action, resource)}
}

// xmlUser is a User element.
type xmlUser struct {
	Path       string `xml:"Path"`
	UserName   string `xml:"UserName"`
	UserID     string `xml:"UserId"`
	Arn        string `xml:"Arn"`
	CreateDate string `xml:"CreateDate"`
}

func (h *Handler) xmlUser(u iam.DirUser) xmlUser {
	return xmlUser{Path: u.Path, UserName: u.Name, UserID: u.ID, Arn: h.userARN(u), CreateDate: isoTime(u.Created)}
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

type userResult struct {
	User xmlUser `xml:"User"`
}

// onUser reads the required UserName and fields (in the order named),
// and authorises the action on that user.
func (h *Handler) onUser(p params, c Caller, fields ...string) (string, []string, error) {
	name, err := p.req("UserName")
	if err != nil {
		return "", nil, err
	}
	return h.onSubject(p, c, name, fields)
}

// onSelf is onUser where UserName may be omitted for the caller's own.
func (h *Handler) onSelf(p params, c Caller, fields ...string) (string, []string, error) {
	name, err := p.subject(c)
	if err != nil {
		return "", nil, err
	}
	return h.onSubject(p, c, name, fields)
}

func (h *Handler) onSubject(p params, c Caller, name string, fields []string) (string, []string, error) {
	values := make([]string, len(fields))
	for i, f := range fields {
		v, err := p.req(f)
		if err != nil {
			return "", nil, err
		}
		values[i] = v
	}
	return name, values, h.authorize(c, p.action, h.userResource(name))
}

func createUser(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.onUser(p, c)
	if err != nil {
		return nil, err
	}
	u, err := h.Dir.CreateUser(ctx, name, p.opt("Path"))
	if err != nil {
		return nil, err
	}
	return userResult{User: h.xmlUser(u)}, nil
}

func getUser(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	if p.opt("UserName") == "" && c.User == "" && c.Admin {
		// The account itself, as IAM answers its root.
		return userResult{User: xmlUser{Path: "/", UserName: "root", UserID: h.Account,
			Arn: fmt.Sprintf("arn:aws:iam::%s:root", h.Account), CreateDate: isoTime(time.Unix(0, 0))}}, nil
	}
	name, _, err := h.onSelf(p, c)
	if err != nil {
		return nil, err
	}
	u, err := h.Dir.User(name)
	if err != nil {
		return nil, err
	}
	return userResult{User: h.xmlUser(u)}, nil
}

type listUsersResult struct {
	Users       []xmlUser `xml:"Users>member"`
	IsTruncated bool      `xml:"IsTruncated"`
	Marker      string    `xml:"Marker,omitempty"`
}

func listUsers(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	prefix := p.opt("PathPrefix")
	if prefix == "" {
		prefix = "/"
	}
	if err := h.authorize(c, p.action, fmt.Sprintf("arn:aws:iam::%s:user%s", h.Account, prefix)); err != nil {
		return nil, err
	}
	n, err := p.maxItems()
	if err != nil {
		return nil, err
	}
	var res listUsersResult
	page, next := paginate(h.Dir.Users(prefix), p.opt("Marker"), n, func(u iam.DirUser) string { return u.Name })
	for _, u := range page {
		res.Users = append(res.Users, h.xmlUser(u))
	}
	res.IsTruncated, res.Marker = next != "", next
	return res, nil
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

func updateUser(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.onUser(p, c)
	if err != nil {
		return nil, err
	}
	_, err = h.Dir.UpdateUser(ctx, name, p.opt("NewUserName"), p.opt("NewPath"))
	return nil, err
}

func deleteUser(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.onUser(p, c)
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.DeleteUser(ctx, name)
}

// xmlKey is an AccessKey element (the secret only when just created).
type xmlKey struct {
	UserName        string `xml:"UserName"`
	AccessKeyID     string `xml:"AccessKeyId"`
	Status          string `xml:"Status"`
	SecretAccessKey string `xml:"SecretAccessKey,omitempty"`
	CreateDate      string `xml:"CreateDate"`
}

func createAccessKey(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.onSelf(p, c)
	if err != nil {
		return nil, err
	}
	k, err := h.Dir.CreateAccessKey(ctx, name)
	if err != nil {
		return nil, err
	}
	return struct {
		AccessKey xmlKey `xml:"AccessKey"`
	}{xmlKey{UserName: k.User, AccessKeyID: k.ID, Status: k.Status, SecretAccessKey: k.Secret, CreateDate: isoTime(k.Created)}}, nil
}

func listAccessKeys(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.onSelf(p, c)
	if err != nil {
		return nil, err
	}
	keys, err := h.Dir.Keys(name)
	if err != nil {
		return nil, err
	}
	var res struct {
		Keys        []xmlKey `xml:"AccessKeyMetadata>member"`
		IsTruncated bool     `xml:"IsTruncated"`
	}
	for _, k := range keys {
		res.Keys = append(res.Keys, xmlKey{UserName: k.User, AccessKeyID: k.ID, Status: k.Status, CreateDate: isoTime(k.Created)})
	}
	return res, nil
}

func updateAccessKey(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.onSelf(p, c, "AccessKeyId", "Status")
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.UpdateAccessKey(ctx, name, v[0], v[1])
}

func deleteAccessKey(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.onSelf(p, c, "AccessKeyId")
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.DeleteAccessKey(ctx, name, v[0])
}

func putUserPolicy(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.onUser(p, c, "PolicyName", "PolicyDocument")
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.PutUserPolicy(ctx, name, v[0], v[1], h.CheckPolicy)
}

func getUserPolicy(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.onUser(p, c, "PolicyName")
	if err != nil {
		return nil, err
	}
	u, err := h.Dir.User(name)
	if err != nil {
		return nil, err
	}
	doc, ok := u.Policies[v[0]]
	if !ok {
		return nil, fmt.Errorf("%w: the user policy with name %s cannot be found", iam.ErrNoSuchEntity, v[0])
	}
	return struct {
		UserName       string `xml:"UserName"`
		PolicyName     string `xml:"PolicyName"`
		PolicyDocument string `xml:"PolicyDocument"`
	}{u.Name, v[0], percentEncoded(doc)}, nil
}

// percentEncoded is a policy document as IAM answers it: URL-encoded,
// spaces as %20 (botocore decodes it with Python's unquote, which leaves
// '+' alone).
func percentEncoded(doc string) string { return strings.ReplaceAll(url.QueryEscape(doc), "+", "%20") }

func listUserPolicies(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.onUser(p, c)
	if err != nil {
		return nil, err
	}
	n, err := p.maxItems()
	if err != nil {
		return nil, err
	}
	u, err := h.Dir.User(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(u.Policies))
	for k := range u.Policies {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	page, next := paginate(names, p.opt("Marker"), n, func(s string) string { return s })
	return struct {
		PolicyNames []string `xml:"PolicyNames>member"`
		IsTruncated bool     `xml:"IsTruncated"`
		Marker      string   `xml:"Marker,omitempty"`
	}{page, next != "", next}, nil
}

func deleteUserPolicy(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.onUser(p, c, "PolicyName")
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.DeleteUserPolicy(ctx, name, v[0])
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
func WriteError(w http.ResponseWriter, err error, requestID string) { writeError(w, err, requestID) }

func writeError(w http.ResponseWriter, err error, requestID string) {
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
	}{Xmlns: xmlns, RequestID: requestID}
	doc.Error.Type, doc.Error.Code, doc.Error.Message = typ, ae.code, ae.msg
	writeXML(w, ae.status, doc)
}

// writeResult answers <ActionResponse><ActionResult>res</ActionResult>
// <ResponseMetadata>...; actions without a result carry only the
// metadata. The action is one of the actions table's names.
func writeResult(w http.ResponseWriter, action string, res any, requestID string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<%sResponse xmlns="%s">`, action, xmlns)
	if res != nil {
		enc := xml.NewEncoder(&b)
		if err := enc.EncodeElement(res, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
			writeError(w, err, requestID)
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
