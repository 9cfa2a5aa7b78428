package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/tags"
)

// pageSize is how many entries a listing page holds.
const pageSize = 100

// maxJSON bounds a JSON request body.
const maxJSON = 1 << 20

func (c *Console) routes() {
	c.mux.HandleFunc("GET /{$}", staticFile("index.html", "text/html; charset=utf-8"))
	c.mux.HandleFunc("GET /app.js", staticFile("app.js", "text/javascript; charset=utf-8"))
	c.mux.HandleFunc("GET /app.css", staticFile("app.css", "text/css; charset=utf-8"))
	c.mux.HandleFunc("GET /api/config", c.config)
	c.mux.HandleFunc("POST /api/login", c.login)
	c.mux.HandleFunc("POST /api/oidc/start", c.oidcStart)
	c.mux.HandleFunc("GET /api/oidc/callback", c.oidcCallback)
	c.mux.HandleFunc("GET /api/session", c.signedIn(c.sessionInfo))
	c.mux.HandleFunc("POST /api/logout", c.signedIn(c.logout))
	c.mux.HandleFunc("GET /api/buckets", c.signedIn(c.listBuckets))
	c.mux.HandleFunc("POST /api/buckets", c.signedIn(c.makeBucket))
	c.mux.HandleFunc("DELETE /api/buckets", c.signedIn(c.removeBucket))
	c.mux.HandleFunc("GET /api/objects", c.signedIn(c.listObjects))
	c.mux.HandleFunc("GET /api/object", c.signedIn(c.statObject))
	c.mux.HandleFunc("DELETE /api/object", c.signedIn(c.removeObject))
	c.mux.HandleFunc("GET /api/versions", c.signedIn(c.listVersions))
	c.mux.HandleFunc("PUT /api/tags", c.signedIn(c.putTags))
	c.mux.HandleFunc("GET /api/download", c.signedIn(c.download))
	c.mux.HandleFunc("POST /api/presign", c.signedIn(c.presign))
	c.mux.HandleFunc("PUT /api/upload", c.signedIn(c.upload))
	c.mux.HandleFunc("POST /api/multipart", c.signedIn(c.startMultipart))
	c.mux.HandleFunc("PUT /api/multipart", c.signedIn(c.uploadPart))
	c.mux.HandleFunc("POST /api/multipart/complete", c.signedIn(c.completeMultipart))
	c.mux.HandleFunc("DELETE /api/multipart", c.signedIn(c.abortMultipart))
	c.mux.HandleFunc("GET /api/tenant", c.signedIn(c.tenant))
	c.mux.HandleFunc("GET /api/charts", c.signedIn(c.charts))
	c.mux.HandleFunc("GET /api/users", c.signedIn(c.users))
	c.mux.HandleFunc("GET /api/claims", c.signedIn(c.claims))
	c.mux.HandleFunc("POST /api/users", c.signedIn(c.createUser))
	c.mux.HandleFunc("DELETE /api/users", c.signedIn(c.deleteUser))
	c.mux.HandleFunc("POST /api/users/keys", c.signedIn(c.createKey))
	c.mux.HandleFunc("DELETE /api/users/keys", c.signedIn(c.deleteKey))
	c.mux.HandleFunc("PUT /api/users/policy", c.signedIn(c.putPolicy))
	c.mux.HandleFunc("DELETE /api/users/policy", c.signedIn(c.deletePolicy))
	c.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "no such console page or call")
	})
}

// call is one signed-in request: its session and S3 clients signing with
// the session's credentials.
type call struct {
	ses  session
	s3   *minio.Client
	core minio.Core
}

type apiFunc func(w http.ResponseWriter, r *http.Request, k *call)

// signedIn opens the session, checks that a request changing something
// comes from the console's own page, and hands the handler clients that
// sign as the session's person.
func (c *Console) signedIn(h apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ses, err := c.sessions.open(r)
		if err != nil {
			writeError(w, http.StatusUnauthorized, "SignedOut", err.Error())
			return
		}
		// Every call carries the page's token but downloads, which are
		// navigations (a link cannot send a header) and change nothing.
		if r.URL.Path != "/api/download" && !c.sessions.fromPage(r, ses) {
			writeError(w, http.StatusForbidden, "CSRF", "the request did not come from the console's page (missing or wrong CSRF token): sign in again")
			return
		}
		cl, err := c.client(ses)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		h(w, r, &call{ses: ses, s3: cl, core: minio.Core{Client: cl}})
	}
}

// client is an S3 client of the process's own listener signing with the
// session's credentials (no network until used).
func (c *Console) client(ses session) (*minio.Client, error) {
	return minio.New(c.s3Host, &minio.Options{
		Creds:  credentials.NewStaticV4(ses.AccessKey, ses.SecretKey, ses.SessionToken),
		Secure: c.cfg.S3TLS, Transport: c.transport, Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
		MaxRetries: 1,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is the console's error answer: S3's code and message when S3
// refused, so the page says what the user would hear from any client.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Code: code, Message: msg})
}

// signedOutCodes are S3's and IAM's answers to credentials that no longer
// sign (a key deleted, a session token expired): the page goes back to
// sign-in on them.
var signedOutCodes = map[string]bool{"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true,
	"InvalidToken": true, "InvalidClientTokenId": true}

// writeS3Error answers with what S3 (or IAM, or the admin API) said.
func writeS3Error(w http.ResponseWriter, err error) {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code != "" {
		if signedOutCodes[resp.Code] {
			writeError(w, http.StatusUnauthorized, "SignedOut", resp.Code+": these credentials no longer sign in; sign in again")
			return
		}
		status := resp.StatusCode
		if status == 0 { // an error inside a 200 answer (CompleteMultipartUpload)
			status = http.StatusInternalServerError
		}
		msg := resp.Message
		if msg == "" {
			msg = http.StatusText(status)
		}
		writeError(w, status, resp.Code, msg)
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		writeError(w, http.StatusGatewayTimeout, "Timeout", err.Error())
		return
	}
	writeError(w, http.StatusBadGateway, "Unavailable", err.Error())
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSON)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "MalformedJSON", "the request body is not the JSON expected: "+err.Error())
		return false
	}
	return true
}

// need returns the query parameters named, or answers 400 naming the first
// missing one.
func need(w http.ResponseWriter, r *http.Request, names ...string) ([]string, bool) {
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = r.URL.Query().Get(n)
		if vals[i] == "" {
			writeError(w, http.StatusBadRequest, "MissingParameter", "the query parameter "+n+" is required")
			return nil, false
		}
	}
	return vals, true
}

type loginRequest struct {
	AccessKey    string `json:"accessKey"`
	SecretKey    string `json:"secretKey"`
	SessionToken string `json:"sessionToken,omitempty"`
}

type sessionInfo struct {
	AccessKey string `json:"accessKey"`
	// Name is who signed in through single sign-on, and as which role.
	Name string `json:"name,omitempty"`
	// CSRF is the session's token, given at sign-in only (the page keeps
	// it in sessionStorage).
	CSRF    string    `json:"csrf,omitempty"`
	Expires time.Time `json:"expires"`
	// Admin is whether the credentials may read the admin API (the
	// tenant's pools, drives and health).
	Admin bool `json:"admin"`
}

// login checks the credentials with S3 itself (a ListBuckets signed with
// them: wrong keys are refused there, a key without the right to list is
// still a key) and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// A sign-in forged by another site (signing the victim in as the
	// attacker) is refused: browsers tell the site, and a JSON body cannot
	// be sent cross-site without a preflight the console never answers.
	if !fromOwnPage(r) {
		writeError(w, http.StatusForbidden, "CSRF", "sign in from the console's own page")
		return
	}
	var req loginRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.AccessKey == "" || req.SecretKey == "" {
		writeError(w, http.StatusBadRequest, "MissingCredentials", "enter an access key and a secret key")
		return
	}
	ses := session{AccessKey: req.AccessKey, SecretKey: req.SecretKey, SessionToken: req.SessionToken}
	cl, err := c.client(ses)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	if _, err := cl.ListBuckets(r.Context()); err != nil {
		switch minio.ToErrorResponse(err).Code {
		case "AccessDenied":
			// Signed correctly, only not allowed to list buckets.
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
			c.cfg.Log.Info("console sign-in refused", "accessKey", req.AccessKey, "client", r.RemoteAddr)
			writeError(w, http.StatusUnauthorized, "InvalidCredentials", "the access key or the secret key is wrong")
			return
		default:
			writeS3Error(w, err)
			return
		}
	}
	token, hash := newCSRF()
	ses.CSRFHash = hash
	started, err := c.sessions.start(w, ses, time.Time{})
	if errors.Is(err, errCookieTooLarge) {
		writeError(w, http.StatusBadRequest, "CredentialsTooLarge", err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	c.cfg.Log.Info("console sign-in", "accessKey", req.AccessKey, "client", r.RemoteAddr)
	info := c.describe(r.Context(), started)
	info.CSRF = token
	writeJSON(w, http.StatusOK, info)
}

// fromOwnPage is whether a sign-in (with keys, or the start of a single
// sign-on) comes from the console's own page: JSON (which another site
// cannot send without a preflight) and from the same origin.
func fromOwnPage(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/json" && sameOrigin(r)
}

func (c *Console) describe(ctx context.Context, ses session) sessionInfo {
	_, err := c.admin(ses).Info(ctx)
	return sessionInfo{AccessKey: ses.AccessKey, Name: ses.Name, Expires: time.Unix(ses.Expires, 0).UTC(), Admin: err == nil}
}

func (c *Console) sessionInfo(w http.ResponseWriter, r *http.Request, k *call) {
	writeJSON(w, http.StatusOK, c.describe(r.Context(), k.ses))
}

func (c *Console) logout(w http.ResponseWriter, _ *http.Request, _ *call) {
	c.sessions.end(w)
	writeJSON(w, http.StatusOK, struct{}{})
}

type bucketEntry struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

func (c *Console) listBuckets(w http.ResponseWriter, r *http.Request, k *call) {
	buckets, err := k.s3.ListBuckets(r.Context())
	if err != nil {
		writeS3Error(w, err)
		return
	}
	out := make([]bucketEntry, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, bucketEntry{Name: b.Name, Created: b.CreationDate})
	}
	writeJSON(w, http.StatusOK, out)
}

type makeBucketRequest struct {
	Name       string `json:"name"`
	Versioning bool   `json:"versioning"`
	ObjectLock bool   `json:"objectLock"`
}

func (c *Console) makeBucket(w http.ResponseWriter, r *http.Request, k *call) {
	var req makeBucketRequest
	if !readJSON(w, r, &req) {
		return
	}
	if err := k.s3.MakeBucket(r.Context(), req.Name, minio.MakeBucketOptions{ObjectLocking: req.ObjectLock}); err != nil {
		writeS3Error(w, err)
		return
	}
	if req.Versioning && !req.ObjectLock {
		if err := k.s3.EnableVersioning(r.Context(), req.Name); err != nil {
			writeS3Error(w, err)
			return
		}
	}
	writeJSON(w, http.StatusCreated, bucketEntry{Name: req.Name, Created: time.Now().UTC()})
}

func (c *Console) removeBucket(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket")
	if !ok {
		return
	}
	if c.claimedBucketRefused(w, r, k, q[0]) {
		return
	}
	if err := k.s3.RemoveBucket(r.Context(), q[0]); err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

type objectEntry struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	ETag     string    `json:"etag"`
}

type listing struct {
	Prefixes []string      `json:"prefixes"`
	Objects  []objectEntry `json:"objects"`
	// Next continues the listing (empty: this was the last page).
	Next string `json:"next,omitempty"`
}

// listObjects answers one page of a prefix, its "directories" first: a
// single ListObjectsV2, so the first page of a prefix of any size comes
// as fast as S3 lists 100 keys.
func (c *Console) listObjects(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket")
	if !ok {
		return
	}
	res, err := k.core.ListObjectsV2(q[0], r.URL.Query().Get("prefix"), "", r.URL.Query().Get("next"), "/", pageSize)
	if err != nil {
		writeS3Error(w, err)
		return
	}
	out := listing{Prefixes: []string{}, Objects: []objectEntry{}}
	for _, p := range res.CommonPrefixes {
		out.Prefixes = append(out.Prefixes, p.Prefix)
	}
	for _, o := range res.Contents {
		out.Objects = append(out.Objects, objectEntry{Key: o.Key, Size: o.Size, Modified: o.LastModified, ETag: strings.Trim(o.ETag, `"`)})
	}
	if res.IsTruncated {
		out.Next = res.NextContinuationToken
	}
	writeJSON(w, http.StatusOK, out)
}

type objectDetail struct {
	objectEntry
	ContentType       string            `json:"contentType"`
	VersionID         string            `json:"versionId,omitempty"`
	Tags              map[string]string `json:"tags"`
	Metadata          map[string]string `json:"metadata"`
	ReplicationStatus string            `json:"replicationStatus,omitempty"`
	RetentionMode     string            `json:"retentionMode,omitempty"`
	RetainUntil       *time.Time        `json:"retainUntil,omitempty"`
	LegalHold         string            `json:"legalHold,omitempty"`
}

func (c *Console) statObject(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	vid := r.URL.Query().Get("versionId")
	info, err := k.s3.StatObject(r.Context(), q[0], q[1], minio.StatObjectOptions{VersionID: vid})
	if err != nil {
		writeS3Error(w, err)
		return
	}
	d := objectDetail{
		objectEntry: objectEntry{Key: info.Key, Size: info.Size, Modified: info.LastModified, ETag: strings.Trim(info.ETag, `"`)},
		ContentType: info.ContentType, VersionID: info.VersionID, Tags: map[string]string{}, Metadata: map[string]string{},
		ReplicationStatus: info.ReplicationStatus,
	}
	for name, v := range info.UserMetadata {
		d.Metadata[name] = v
	}
	if t, err := k.s3.GetObjectTagging(r.Context(), q[0], q[1], minio.GetObjectTaggingOptions{VersionID: vid}); err == nil {
		d.Tags = t.ToMap()
	}
	// The lock state comes with the HEAD's headers.
	d.RetentionMode = info.Metadata.Get("X-Amz-Object-Lock-Mode")
	if until, err := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")); err == nil {
		d.RetainUntil = &until
	}
	d.LegalHold = info.Metadata.Get("X-Amz-Object-Lock-Legal-Hold")
	writeJSON(w, http.StatusOK, d)
}

func (c *Console) removeObject(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	if err := k.s3.RemoveObject(r.Context(), q[0], q[1], minio.RemoveObjectOptions{VersionID: r.URL.Query().Get("versionId")}); err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

type versionEntry struct {
	VersionID    string    `json:"versionId"`
	Size         int64     `json:"size"`
	Modified     time.Time `json:"modified"`
	ETag         string    `json:"etag,omitempty"`
	Latest       bool      `json:"latest"`
	DeleteMarker bool      `json:"deleteMarker"`
}

// maxVersions bounds the versions one key's page shows.
const maxVersions = 1000

func (c *Console) listVersions(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := []versionEntry{}
	for o := range k.s3.ListObjects(ctx, q[0], minio.ListObjectsOptions{Prefix: q[1], WithVersions: true, MaxKeys: pageSize}) {
		if o.Err != nil {
			writeS3Error(w, o.Err)
			return
		}
		if o.Key != q[1] {
			if o.Key > q[1] {
				break
			}
			continue
		}
		out = append(out, versionEntry{VersionID: o.VersionID, Size: o.Size, Modified: o.LastModified,
			ETag: strings.Trim(o.ETag, `"`), Latest: o.IsLatest, DeleteMarker: o.IsDeleteMarker})
		if len(out) == maxVersions {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) putTags(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	var req struct {
		Tags map[string]string `json:"tags"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	t, err := tags.NewTags(req.Tags, true)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidTag", err.Error())
		return
	}
	if err := k.s3.PutObjectTagging(r.Context(), q[0], q[1], t, minio.PutObjectTaggingOptions{VersionID: r.URL.Query().Get("versionId")}); err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// download streams an object (a version of it) to the browser as a file.
func (c *Console) download(w http.ResponseWriter, r *http.Request, k *call) {
	if r.Method == http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "download with GET")
		return
	}
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	body, info, _, err := k.core.GetObject(r.Context(), q[0], q[1], minio.GetObjectOptions{VersionID: r.URL.Query().Get("versionId")})
	if err != nil {
		writeS3Error(w, err)
		return
	}
	defer body.Close()
	h := w.Header()
	name := path.Base(strings.TrimRight(q[1], "/"))
	if name == "." || name == "/" || name == "" {
		name = "object"
	}
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	// Served as bytes, never as a page of the console's origin.
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("ETag", info.ETag)
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, body)
}

type presignRequest struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId,omitempty"`
	// Seconds the link stays good: 1 to 7 days' worth, S3's bounds.
	Seconds int `json:"seconds"`
}

// presign makes a GET link of the object signed with the session's
// credentials, for the S3 endpoint the browser reaches.
func (c *Console) presign(w http.ResponseWriter, r *http.Request, k *call) {
	var req presignRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Seconds < 1 || req.Seconds > 7*24*3600 {
		writeError(w, http.StatusBadRequest, "InvalidExpiry", "a link lasts from 1 second to 7 days (604800 seconds)")
		return
	}
	endpoint, secure := c.publicS3(r.Host)
	pub, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(k.ses.AccessKey, k.ses.SecretKey, k.ses.SessionToken),
		Secure: secure, Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	params := url.Values{}
	if req.VersionID != "" {
		params.Set("versionId", req.VersionID)
	}
	u, err := pub.PresignedGetObject(r.Context(), req.Bucket, req.Key, time.Duration(req.Seconds)*time.Second, params)
	if err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"url": u.String()})
}

// bodySize is a body's declared length, which uploads need (S3 takes
// none without one); the browser always sends it for a Blob.
func bodySize(w http.ResponseWriter, r *http.Request) (int64, bool) {
	if r.ContentLength < 0 {
		writeError(w, http.StatusLengthRequired, "MissingContentLength", "an upload needs its Content-Length")
		return 0, false
	}
	return r.ContentLength, true
}

func uploadOptions(r *http.Request) minio.PutObjectOptions {
	ct := r.URL.Query().Get("type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	return minio.PutObjectOptions{ContentType: ct}
}

// upload stores a file sent whole (the page sends files up to a part's
// size this way).
func (c *Console) upload(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	size, ok := bodySize(w, r)
	if !ok {
		return
	}
	info, err := k.core.PutObject(r.Context(), q[0], q[1], r.Body, size, "", "", uploadOptions(r))
	if err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"etag": info.ETag, "versionId": info.VersionID})
}

func (c *Console) startMultipart(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key")
	if !ok {
		return
	}
	id, err := k.core.NewMultipartUpload(r.Context(), q[0], q[1], uploadOptions(r))
	if err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"uploadId": id})
}

func (c *Console) uploadPart(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key", "uploadId", "part")
	if !ok {
		return
	}
	n, err := strconv.Atoi(q[3])
	if err != nil || n < 1 || n > 10000 {
		writeError(w, http.StatusBadRequest, "InvalidPart", "part is a number from 1 to 10000")
		return
	}
	size, ok := bodySize(w, r)
	if !ok {
		return
	}
	part, err := k.core.PutObjectPart(r.Context(), q[0], q[1], q[2], n, r.Body, size, minio.PutObjectPartOptions{})
	if err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"part": n, "etag": part.ETag})
}

type completeRequest struct {
	Parts []struct {
		Part int    `json:"part"`
		ETag string `json:"etag"`
	} `json:"parts"`
}

func (c *Console) completeMultipart(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key", "uploadId")
	if !ok {
		return
	}
	var req completeRequest
	if !readJSON(w, r, &req) {
		return
	}
	parts := make([]minio.CompletePart, 0, len(req.Parts))
	for _, p := range req.Parts {
		parts = append(parts, minio.CompletePart{PartNumber: p.Part, ETag: p.ETag})
	}
	info, err := k.core.CompleteMultipartUpload(r.Context(), q[0], q[1], q[2], parts, minio.PutObjectOptions{})
	if err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"etag": info.ETag, "versionId": info.VersionID})
}

func (c *Console) abortMultipart(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "bucket", "key", "uploadId")
	if !ok {
		return
	}
	if err := k.core.AbortMultipartUpload(r.Context(), q[0], q[1], q[2]); err != nil {
		writeS3Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
