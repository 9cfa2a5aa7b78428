package s3api

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"hash"
	"io"
	"slices"
	"strings"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
)

// Server-side encryption. Every encrypted object has a data key of its own
// (32 random bytes; a multipart upload's parts share the upload's), which
// encrypts its data in packages (ssestream.go) and is itself sealed with a
// key-encryption key: the customer's key (SSE-C), or a master key of the
// keys file (SSE-S3: the default key; SSE-KMS: the key the request names,
// or the default). The version keeps the sealed data key, the mode and the
// master key's name (or the customer key's MD5) in its metadata; storage
// never holds a key in the clear, and the customer's key is never stored
// at all. A sealed data key is bound to its bucket and object name, so it
// cannot be moved to another object.

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

// Server-side encryption request headers.
const (
	hdrSSE          = "X-Amz-Server-Side-Encryption"
	hdrSSEKMSKey    = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	hdrSSEContext   = "X-Amz-Server-Side-Encryption-Context"
	hdrSSEBucketKey = "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"
	hdrSSECAlg      = "X-Amz-Server-Side-Encryption-Customer-Algorithm"
	hdrSSECKey      = "X-Amz-Server-Side-Encryption-Customer-Key"
	hdrSSECKeyMD5   = "X-Amz-Server-Side-Encryption-Customer-Key-Md5"
	hdrCopySSEC     = "X-Amz-Copy-Source-Server-Side-Encryption-Customer-"
	// hdrCopySSEPrefix starts every X-Amz-Copy-Source SSE parameter.
	hdrCopySSEPrefix = "X-Amz-Copy-Source-Server-Side-Encryption"
)

// sseKey is how one object is, or is to be, encrypted.
type sseKey struct {
	mode   sseMode
	kek    []byte // seals the data key
	keyID  string // master key (SSE-S3, SSE-KMS)
	keyMD5 string // customer key's MD5, base64 (SSE-C)
}

var (
	errSSECNeedsTLS = s3err.InvalidRequest.With("Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection.")
	errSSEKeyNeeded = s3err.InvalidRequest.With("The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.")
	errSSEWrongKey  = s3err.InvalidArgument.With("The provided customer key does not match the key the object was encrypted with.")
	errSSENotForObj = s3err.InvalidRequest.With("The encryption parameters are not applicable to this object.")
	errNoKeys       = s3err.NotImplemented.With("Server-side encryption with managed keys (SSE-S3, SSE-KMS) needs encryption keys configured (STRATA_KMS_KEYS_FILE).")
)

func errNoSuchKMSKey(id string) error {
	return s3err.KMSNotFound.With("Invalid keyId " + id)
}

// sseParam reads an encryption parameter of the request: its header, or
// for a form upload its form's field of the same name, where S3 takes
// them from a browser's form.
func (r *request) sseParam(name string) string {
	if v := r.h(name); v != "" {
		return v
	}
	if r.form != nil {
		if name == "X-Amz-Acl" {
			name = "acl" // a form names its canned ACL so
		}
		return r.form.Fields.Get(name)
	}
	return ""
}

// namesSSE reports whether the request may carry an SSE parameter: a
// header of the SSE ones' prefixes, or a form. Most requests have none,
// and looking each of checkSSE's ten up to find it missing was 4% of a
// HEAD's CPU.
func (r *request) namesSSE() bool {
	if r.form != nil {
		return true
	}
	for k := range r.header {
		if strings.HasPrefix(k, hdrSSE) || strings.HasPrefix(k, hdrCopySSEPrefix) {
			return true
		}
	}
	return false
}

// checkSSE validates the request's server-side-encryption parameters as S3
// does (read: the request reads data).
func (r *request) checkSSE(read bool) error {
	if !r.namesSSE() {
		return nil
	}
	get := r.sseParam
	sse, kmsKey := get(hdrSSE), get(hdrSSEKMSKey)
	alg, key, keyMD5 := get(hdrSSECAlg), get(hdrSSECKey), get(hdrSSECKeyMD5)
	customer := alg != "" || key != "" || keyMD5 != ""
	if err := checkCustomerKey(alg, key, keyMD5); err != nil {
		return err
	}
	if err := checkCustomerKey(get(hdrCopySSEC+"Algorithm"), get(hdrCopySSEC+"Key"), get(hdrCopySSEC+"Key-Md5")); err != nil {
		return err
	}
	fail := s3err.InvalidArgument.With
	switch {
	case customer && sse != "":
		return fail("Server Side Encryption with Customer provided key is incompatible with the encryption method specified")
	case sse != "" && read:
		return fail("x-amz-server-side-encryption header is not supported for this operation.")
	case sse != "" && sse != "AES256" && sse != "aws:kms" && sse != "aws:kms:dsse":
		return fail("The encryption method specified is not supported")
	case sse == "" && (kmsKey != "" || get(hdrSSEContext) != "" || get(hdrSSEBucketKey) != ""):
		return fail("Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms")
	case sse == "AES256" && kmsKey != "":
		return fail("Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms")
	}
	return nil
}

// checkCustomerKey checks a set of SSE-C parameters (all empty: none).
func checkCustomerKey(alg, key, keyMD5 string) error {
	fail := s3err.InvalidArgument.With
	switch {
	case alg == "" && key == "" && keyMD5 == "":
		return nil
	case alg != "AES256":
		return fail("Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.")
	case key == "":
		return fail("Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.")
	case keyMD5 == "":
		return fail("Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.")
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		return fail("The secret key was invalid for the specified algorithm.")
	}
	sum := md5.Sum(raw)
	if base64.StdEncoding.EncodeToString(sum[:]) != keyMD5 {
		return fail("The calculated MD5 hash of the key did not match the hash that was provided.")
	}
	return nil
}

// customerKey reads an SSE-C key from the request (the copy source's with
// copySource), checked (checkSSE) by the caller.
func (r *request) customerKey(copySource bool) (*sseKey, error) {
	prefix := "X-Amz-Server-Side-Encryption-Customer-"
	if copySource {
		prefix = hdrCopySSEC
	}
	enc := r.sseParam(prefix + "Key")
	if enc == "" {
		return nil, nil
	}
	if !r.secure() {
		return nil, errSSECNeedsTLS
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) != 32 {
		return nil, s3err.InvalidArgument.With("The secret key was invalid for the specified algorithm.")
	}
	sum := md5.Sum(key)
	return &sseKey{mode: sseCustomer, kek: key, keyMD5: base64.StdEncoding.EncodeToString(sum[:])}, nil
}

// managedKey resolves an SSE-S3 or SSE-KMS master key.
func (s *Server) managedKey(mode sseMode, id string) (*sseKey, error) {
	if s.cfg.Keys == nil {
		return nil, errNoKeys
	}
	if id == "" {
		id = s.cfg.Keys.Default()
	}
	kek, ok := s.cfg.Keys.Key(id)
	if !ok {
		return nil, errNoSuchKMSKey(id)
	}
	return &sseKey{mode: mode, kek: kek, keyID: id}, nil
}

// writeSSE is the encryption a write asks for: in its headers, else the
// bucket's default encryption; nil for none. The request's encryption
// parameters are checked here, after the access decision, so a bucket
// policy refusing uploads without AES256 answers 403 before a malformed
// header answers 400 (as S3 does).
func (r *request) writeSSE(bk objlayer.BucketInfo) (*sseKey, error) {
	if err := r.checkSSE(false); err != nil {
		return nil, err
	}
	if k, err := r.customerKey(false); k != nil || err != nil {
		return k, err
	}
	mode, id := sseMode(r.sseParam(hdrSSE)), r.sseParam(hdrSSEKMSKey)
	if mode == "" {
		if d := defaultEncryption(bk); d != nil {
			mode, id = d.Mode, d.KeyID
		}
	}
	switch mode {
	case "":
		return nil, nil
	case "aws:kms:dsse":
		mode = sseKMS
	}
	return r.s.managedKey(mode, id)
}

// bucketEncryption is a bucket's default encryption as kept in its record.
type bucketEncryption struct {
	Mode  sseMode `json:"mode"`
	KeyID string  `json:"keyId,omitempty"`
}

// defaultEncryption is a bucket's default encryption (nil: none).
func defaultEncryption(bk objlayer.BucketInfo) *bucketEncryption {
	if len(bk.Encryption) == 0 {
		return nil
	}
	var e bucketEncryption
	if json.Unmarshal(bk.Encryption, &e) != nil || e.Mode == "" {
		return nil
	}
	return &e
}

// sseConfiguration is S3's document of a bucket's default encryption.
type sseConfiguration struct {
	XMLName xml.Name  `xml:"ServerSideEncryptionConfiguration"`
	XMLNS   string    `xml:"xmlns,attr,omitempty"`
	Rules   []sseRule `xml:"Rule"`
}

type sseRule struct {
	Default struct {
		Algorithm string `xml:"SSEAlgorithm"`
		KeyID     string `xml:"KMSMasterKeyID,omitempty"`
	} `xml:"ApplyServerSideEncryptionByDefault"`
	BucketKeyEnabled *bool `xml:"BucketKeyEnabled,omitempty"`
}

// parseEncryption reads a ServerSideEncryptionConfiguration document.
func parseEncryption(body []byte) (bucketEncryption, error) {
	var doc sseConfiguration
	if xml.Unmarshal(body, &doc) != nil || len(doc.Rules) != 1 {
		return bucketEncryption{}, s3err.MalformedXML
	}
	d := doc.Rules[0].Default
	switch d.Algorithm {
	case "AES256":
		if d.KeyID != "" {
			return bucketEncryption{}, s3err.MalformedXML
		}
	case "aws:kms", "aws:kms:dsse":
		d.Algorithm = string(sseKMS)
	default:
		return bucketEncryption{}, s3err.MalformedXML
	}
	return bucketEncryption{Mode: sseMode(d.Algorithm), KeyID: d.KeyID}, nil
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

// dataKey opens the data key of an encrypted version (or upload) for the
// request: SSE-C needs the customer's key in the request (the copy
// source's, with copySource), managed modes need their master key. An
// unencrypted version asked for with a customer key is refused.
func (r *request) dataKey(bucket, object string, meta map[string]string, copySource bool) ([]byte, error) {
	ck, err := r.customerKey(copySource)
	if err != nil {
		return nil, err
	}
	return r.s.openDataKey(bucket, object, meta, ck)
}

// openDataKey opens the data key of an encrypted version (or upload) with
// the customer's key ck (nil when none was given) or the managed master
// key; nil for an unencrypted version.
func (s *Server) openDataKey(bucket, object string, meta map[string]string, ck *sseKey) ([]byte, error) {
	mode := sseMode(meta[metaSSE])
	var k *sseKey
	var err error
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
		if k, err = s.managedKey(mode, meta[metaSSEKeyID]); err != nil {
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
func (r *request) setSSEHeaders(meta map[string]string) {
	switch mode := sseMode(meta[metaSSE]); mode {
	case sseCustomer:
		r.setHeader(hdrSSECAlg, "AES256")
		r.setHeader(hdrSSECKeyMD5, meta[metaSSECMD5])
	case sseS3:
		r.setHeader(hdrSSE, string(sseS3))
	case sseKMS:
		r.setHeader(hdrSSE, string(sseKMS))
		r.setHeader(hdrSSEKMSKey, meta[metaSSEKeyID])
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
// data key recorded in meta: the reader, the stored size (-1 when
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
func decryptRange(r *request, h objlayer.Handle, dek []byte, w io.Writer, offset, length int64) error {
	info := h.Info()
	sealedParts := []int64{info.Size}
	numbers := []int{0}
	if len(info.Parts) > 0 {
		sealedParts, numbers = nil, nil
		for _, p := range info.Parts {
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
		err = h.WriteRange(r.ctx, ow, sealedBase+sp.offset, sp.length)
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
