package s3front

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Server-side encryption. Every encrypted object has a data key of its own
// (32 random bytes; a multipart upload's parts share the upload's), which
// encrypts its data in packages (ssestream.go) and is itself sealed with a
// key-encryption key: the customer's key (SSE-C), or a master key named in
// the keys file (SSE-S3: the default key; SSE-KMS: the key the request
// names, or the default). The version keeps the sealed data key, the mode
// and the master key's name (or the customer key's MD5) in its metadata;
// the drives never hold a key in the clear, and the customer's key is never
// stored at all. A sealed data key is bound to its bucket and object name,
// so it cannot be moved to another object.

// KeyRing gives the master keys of SSE-S3 and SSE-KMS (engine/kms).
type KeyRing interface {
	Key(id string) ([]byte, bool)
	Default() string
}

type sseMode string

const (
	sseCustomer sseMode = "SSE-C"
	sseS3       sseMode = "AES256"
	sseKMS      sseMode = "aws:kms"
)

// Metadata keys of an encrypted version (internal: never answered, never
// copied).
const (
	metaSSE       = objlayer.InternalMetaPrefix + "Sse"
	metaSSEKeyID  = objlayer.InternalMetaPrefix + "Sse-Key-Id"
	metaSSESealed = objlayer.InternalMetaPrefix + "Sse-Sealed-Key"
	metaSSECMD5   = objlayer.InternalMetaPrefix + "Sse-C-Key-Md5"
)

// sseKey is how one object is, or is to be, encrypted.
type sseKey struct {
	mode   sseMode
	kek    []byte // seals the data key
	keyID  string // master key (SSE-S3, SSE-KMS)
	keyMD5 string // customer key's MD5, base64 (SSE-C)
}

func sseErr(code, msg string, status int) error {
	return s3err.APIError{Code: code, Description: msg, HTTPStatusCode: status}
}

var (
	errSSECNeedsTLS = sseErr("InvalidRequest", "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection.", http.StatusBadRequest)
	errSSEKeyNeeded = sseErr("InvalidRequest", "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.", http.StatusBadRequest)
	errSSEWrongKey  = sseErr("InvalidArgument", "The provided customer key does not match the key the object was encrypted with.", http.StatusBadRequest)
	errSSENotForObj = sseErr("InvalidRequest", "The encryption parameters are not applicable to this object.", http.StatusBadRequest)
	errNoKeys       = sseErr("NotImplemented", "Server-side encryption with managed keys (SSE-S3, SSE-KMS) needs encryption keys configured (STRATA_KMS_KEYS_FILE).", http.StatusNotImplemented)
)

func errNoSuchKMSKey(id string) error {
	return sseErr("KMS.NotFoundException", "Invalid keyId "+id, http.StatusBadRequest)
}

// customerKey reads an SSE-C key from the request (the copy source's with
// copySource). A write's encryption headers (or form fields) are checked
// first, as refuseUnsupported checks them: for uploads it leaves that to
// here (after the access decision, sseCheckedAfterAccess), it never sees a
// form's fields, and every path that stores data comes through here, so a
// malformed one is never ignored. Reads were checked by refuseUnsupported.
func customerKey(ctx context.Context, copySource bool) (*sseKey, error) {
	rc, ok := frontCtx(ctx)
	if !ok {
		return nil, nil
	}
	get := sseParams(rc)
	if !rc.IsGet() && !rc.IsHead() {
		if err := checkSSE(get, false, true); err != nil {
			return nil, *err
		}
	}
	prefix := "X-Amz-Server-Side-Encryption-Customer-"
	if copySource {
		prefix = "X-Amz-Copy-Source-Server-Side-Encryption-Customer-"
	}
	enc := get(prefix + "Key")
	if len(enc) == 0 {
		return nil, nil
	}
	if !rc.IsTLS() {
		return nil, errSSECNeedsTLS
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) != 32 {
		return nil, invalidArgument("The secret key was invalid for the specified algorithm.")
	}
	sum := md5.Sum(key)
	return &sseKey{mode: sseCustomer, kek: key, keyMD5: base64.StdEncoding.EncodeToString(sum[:])}, nil
}

// managedKey resolves an SSE-S3 or SSE-KMS master key.
func (b *Backend) managedKey(mode sseMode, id string) (*sseKey, error) {
	if b.keys == nil {
		return nil, errNoKeys
	}
	if id == "" {
		id = b.keys.Default()
	}
	kek, ok := b.keys.Key(id)
	if !ok {
		return nil, errNoSuchKMSKey(id)
	}
	return &sseKey{mode: mode, kek: kek, keyID: id}, nil
}

// writeSSE is the encryption a write asks for: in its headers, else the
// bucket's default encryption; nil for none.
func (b *Backend) writeSSE(ctx context.Context, bk objlayer.BucketInfo) (*sseKey, error) {
	if k, err := customerKey(ctx, false); k != nil || err != nil {
		return k, err
	}
	var mode sseMode
	var id string
	if rc, ok := frontCtx(ctx); ok {
		get := sseParams(rc)
		mode, id = sseMode(get(hdrSSE)), get(hdrSSEKMSKey)
	}
	if mode == "" {
		if d := defaultEncryption(bk); d != nil {
			mode, id = d.mode, d.keyID
		}
	}
	switch mode {
	case "":
		return nil, nil
	case "aws:kms:dsse":
		mode = sseKMS
	}
	return b.managedKey(mode, id)
}

// bucketEncryption is a bucket's default encryption as kept in its record.
type bucketEncryption struct {
	Mode  sseMode `json:"mode"`
	KeyID string  `json:"keyId,omitempty"`
}

// defaultEncryption is a bucket's default encryption (nil: none).
func defaultEncryption(bk objlayer.BucketInfo) *sseKey {
	if len(bk.Encryption) == 0 {
		return nil
	}
	var e bucketEncryption
	if json.Unmarshal(bk.Encryption, &e) != nil || e.Mode == "" {
		return nil
	}
	return &sseKey{mode: e.Mode, keyID: e.KeyID}
}

// postFields are the fields of a POST form upload as the front end parsed
// them, names in lower case (nil for any other request).
func postFields(rc *fasthttp.RequestCtx) map[string]string {
	if r, ok := rc.UserValue(string(utils.ContextKeyObjectPostResult)).(middlewares.PostObjectResult); ok {
		return r.Fields
	}
	return nil
}

// sseParams reads a request's encryption parameters: its headers, or for a
// form upload its form's fields of the same names, where S3 takes them from
// a browser's form.
func sseParams(rc *fasthttp.RequestCtx) func(name string) string {
	fields := postFields(rc)
	return func(name string) string {
		if v := rc.Request.Header.Peek(name); len(v) > 0 {
			return string(v)
		}
		return fields[strings.ToLower(name)]
	}
}

// RefuseFormFields answers a form upload whose fields ask for encryption
// (x-amz-server-side-encryption...) or object lock (x-amz-object-lock-...)
// with NotImplemented, for a backend that does not take them from a form:
// the front end hands neither on from a form, and storing the file without
// them would be a false success. nil for any other request.
func RefuseFormFields(ctx context.Context) error {
	rc, ok := frontCtx(ctx)
	if !ok {
		return nil
	}
	for name := range postFields(rc) {
		switch {
		case strings.HasPrefix(name, "x-amz-server-side-encryption"):
			return notImplemented("Server-side encryption (a form's x-amz-server-side-encryption fields)")
		case strings.HasPrefix(name, "x-amz-object-lock-"):
			return notImplemented("Object lock in a form upload (its x-amz-object-lock fields)")
		}
	}
	return nil
}

// headerOf is a request header, when ctx is the front end's request.
func headerOf(ctx context.Context, name string) string {
	if rc, ok := frontCtx(ctx); ok {
		return string(rc.Request.Header.Peek(name))
	}
	return ""
}

func sealAAD(bucket, object string, mode string) []byte {
	return []byte("strata-sse-v1\x00" + bucket + "/" + object + "\x00" + mode)
}

// newDataKey makes an object's data key, records it sealed in meta, and
// returns it.
func (k *sseKey) newDataKey(bucket, object string, meta map[string]string) ([]byte, error) {
	dek := make([]byte, 32)
	nonce := make([]byte, pkgNonce)
	if _, err := rand.Read(dek); err != nil {
		return nil, err
	}
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	aead, err := newGCM(k.kek)
	if err != nil {
		return nil, err
	}
	sealed := aead.Seal(nonce, nonce, dek, sealAAD(bucket, object, string(k.mode)))
	meta[metaSSE] = string(k.mode)
	meta[metaSSESealed] = base64.StdEncoding.EncodeToString(sealed)
	if k.keyID != "" {
		meta[metaSSEKeyID] = k.keyID
	}
	if k.keyMD5 != "" {
		meta[metaSSECMD5] = k.keyMD5
	}
	return dek, nil
}

// encrypted reports whether a version's metadata says it is encrypted.
func encrypted(meta map[string]string) bool { return meta[metaSSE] != "" }

// dataKey opens the data key of an encrypted version (or upload) for a
// request: SSE-C needs the customer's key in the request (the copy
// source's, with copySource), managed modes need their master key. An
// unencrypted version asked for with a customer key is refused.
func (b *Backend) dataKey(ctx context.Context, bucket, object string, meta map[string]string, copySource bool) ([]byte, error) {
	ck, err := customerKey(ctx, copySource)
	if err != nil {
		return nil, err
	}
	mode := sseMode(meta[metaSSE])
	var k *sseKey
	switch mode {
	case "":
		if ck != nil {
			return nil, errSSENotForObj
		}
		return nil, nil
	case sseCustomer:
		if ck == nil {
			return nil, errSSEKeyNeeded
		}
		if ck.keyMD5 != meta[metaSSECMD5] {
			return nil, errSSEWrongKey
		}
		k = ck
	default:
		if ck != nil {
			return nil, errSSENotForObj
		}
		if k, err = b.managedKey(mode, meta[metaSSEKeyID]); err != nil {
			return nil, err
		}
	}
	sealed, err := base64.StdEncoding.DecodeString(meta[metaSSESealed])
	if err != nil || len(sealed) < pkgNonce {
		return nil, errTampered
	}
	aead, err := newGCM(k.kek)
	if err != nil {
		return nil, err
	}
	dek, err := aead.Open(nil, sealed[:pkgNonce], sealed[pkgNonce:], sealAAD(bucket, object, string(mode)))
	if err != nil {
		if mode == sseCustomer {
			return nil, errSSEWrongKey
		}
		return nil, errTampered
	}
	return dek, nil
}

// setSSEHeaders answers a version's encryption in the response headers.
func setSSEHeaders(ctx context.Context, meta map[string]string) {
	switch mode := sseMode(meta[metaSSE]); mode {
	case sseCustomer:
		setResponseHeader(ctx, hdrSSECAlg, "AES256")
		setResponseHeader(ctx, hdrSSECKeyMD5, meta[metaSSECMD5])
	case sseS3:
		setResponseHeader(ctx, hdrSSE, string(sseS3))
	case sseKMS:
		setResponseHeader(ctx, hdrSSE, string(sseKMS))
		setResponseHeader(ctx, hdrSSEKMSKey, meta[metaSSEKeyID])
	}
}

// plainSum hashes the plaintext an encrypting reader reads, for the ETag:
// S3 answers the plaintext's MD5 for SSE-S3 objects; for the other modes
// the ETag must not reveal the plaintext, so it is a MAC under the data
// key (the same data gives the same ETag within one object or upload, so a
// part uploaded twice keeps its ETag).
type plainSum struct {
	r io.Reader
	h hash.Hash
}

func newPlainSum(r io.Reader, mode sseMode, dek []byte) *plainSum {
	if mode == sseS3 {
		return &plainSum{r: r, h: md5.New()}
	}
	return &plainSum{r: r, h: hmac.New(sha256.New, dek)}
}

func (p *plainSum) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.h.Write(b[:n])
	return n, err
}

func (p *plainSum) etag() string { return hex.EncodeToString(p.h.Sum(nil)[:md5.Size]) }

// sealBody turns a write's plaintext body into what is stored, with a new
// data key recorded in meta. Returns the reader, the stored size (-1 when
// unknown) and what gives the ETag once it was read.
func (k *sseKey) sealBody(bucket, object string, body io.Reader, size int64, meta map[string]string) (io.Reader, int64, func() string, error) {
	dek, err := k.newDataKey(bucket, object, meta)
	if err != nil {
		return nil, 0, nil, err
	}
	return sealStream(body, size, k.mode, dek, 0)
}

// sealStream encrypts a body (part 0: a whole object) with a data key.
func sealStream(body io.Reader, size int64, mode sseMode, dek []byte, part int) (io.Reader, int64, func() string, error) {
	sum := newPlainSum(body, mode, dek)
	r, err := newSealReader(sum, dek, part, size)
	if err != nil {
		return nil, 0, nil, err
	}
	if size >= 0 {
		size = sealedSize(size)
	}
	return r, size, sum.etag, nil
}

// plainParts are the plaintext sizes of an encrypted version's parts (one
// for a single-part object).
func plainParts(info objlayer.ObjectInfo) []int64 {
	if len(info.Parts) == 0 {
		return []int64{plainSize(info.Size)}
	}
	out := make([]int64, len(info.Parts))
	for i, p := range info.Parts {
		out[i] = plainSize(p.Size)
	}
	return out
}

// plainInfo is a version as clients see it: an encrypted one with its
// plaintext size and part sizes.
func plainInfo(info objlayer.ObjectInfo) objlayer.ObjectInfo {
	if !encrypted(info.Meta) {
		return info
	}
	sizes := plainParts(info)
	var total int64
	for _, s := range sizes {
		total += s
	}
	info.Size = total
	if len(info.Parts) > 0 {
		parts := slices.Clone(info.Parts)
		for i := range parts {
			parts[i].Size = sizes[i]
		}
		info.Parts = parts
	}
	return info
}

// decryptRange writes plaintext [offset, offset+length) of an encrypted
// version to w, reading only the packages that hold it.
func decryptRange(ctx context.Context, h objlayer.Handle, dek []byte, w io.Writer, offset, length int64) error {
	sealedParts := []int64{h.Info().Size}
	numbers := []int{0}
	if len(h.Info().Parts) > 0 {
		sealedParts, numbers = nil, nil
		for _, p := range h.Info().Parts {
			sealedParts = append(sealedParts, p.Size)
			numbers = append(numbers, p.Number)
		}
	}
	var sealedBase int64 // stored offset of the current part
	for i, sealed := range sealedParts {
		plain := plainSize(sealed)
		if length <= 0 {
			break
		}
		if offset >= plain {
			offset -= plain
			sealedBase += sealed
			continue
		}
		n := min(length, plain-offset)
		sp := spanOf(sealed, offset, n)
		ow, err := newOpenWriter(w, dek, numbers[i], sp.first, sp.skip, n)
		if err != nil {
			return err
		}
		err = h.WriteRange(ctx, ow, sealedBase+sp.offset, sp.length)
		if err == nil {
			err = ow.Close()
		}
		if err != nil {
			return err
		}
		length -= n
		offset = 0
		sealedBase += sealed
	}
	return nil
}
