package s3sig

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strconv"

	"github.com/strata-storage/strata/engine/s3err"
)

// Payload is a request body's object bytes: aws-chunked framing decoded,
// and everything the request declared of them checked when they end.
// Read returns the check's error instead of io.EOF, so a caller that
// stores a body only once Read has returned io.EOF never stores one that
// does not match its signature, its Content-MD5, its x-amz-content-sha256
// or its checksum. Each byte is hashed once by each digest asked for, in
// one pass; a body that asks for none is not hashed at all.
type Payload struct {
	src    io.Reader
	chunks *chunkReader // when aws-chunked, for its trailer
	size   int64        // declared decoded size, -1 unknown
	n      int64        // bytes read
	max    int64        // a form policy's largest size, -1 none
	min    int64        // a form policy's smallest size

	md5Want []byte // Content-MD5
	shaWant []byte // a hex x-amz-content-sha256
	sum     checksumSpec
	wantMD5 bool // the caller asked for the MD5 (an ETag)

	ready            bool
	md5h, shah, sumh hash.Hash
	fan              [3]hash.Hash
	nfan             int

	err    error
	md5sum []byte
	result string // the checksum's base64 value, after EOF
}

// Body returns a reader over the object bytes of r's body, as declared by
// the request a authenticated: aws-chunked decoding with each chunk's
// signature checked for the STREAMING- payloads, the declared decoded
// length, a hex x-amz-content-sha256, Content-MD5 and the flexible
// checksum (x-amz-checksum-*, its trailer, or only its algorithm, which
// asks for it to be computed). Malformed declarations are refused here,
// before anything is read.
func (a *Auth) Body(r *http.Request) (*Payload, error) {
	md5Value, md5Sent := headerValue(r.Header, "Content-Md5")
	md5Want, err := contentMD5(md5Value, md5Sent)
	if err != nil {
		return nil, err
	}
	trailers := a.Payload == StreamingSignedTrailer || a.Payload == StreamingUnsignedTrailer
	spec, err := headerChecksums(r.Header, trailers)
	if err != nil {
		return nil, err
	}
	if spec.alg == algNone {
		// A presigned URL names its algorithm in the query.
		if v, ok := queryParam(r.URL.RawQuery, "X-Amz-Sdk-Checksum-Algorithm"); ok {
			if spec.alg, ok = parseAlgorithm(v); !ok {
				return nil, errUnknownAlgorithm()
			}
		}
	}
	var body io.Reader = http.NoBody
	if r.Body != nil {
		body = r.Body
	}
	p := &Payload{src: body, size: r.ContentLength, max: -1, md5Want: md5Want, sum: spec}
	if isHexSHA256(a.Payload) {
		p.shaWant, _ = hex.DecodeString(a.Payload)
	}
	if !a.Streaming() {
		return p, nil
	}
	declared, ok := headerValue(r.Header, "X-Amz-Decoded-Content-Length")
	if !ok {
		return nil, s3err.MissingContentLength.With("An aws-chunked body requires the x-amz-decoded-content-length header.")
	}
	n, err := strconv.ParseInt(declared, 10, 64)
	if err != nil || n < 0 {
		return nil, s3err.InvalidArgumentNamed("x-amz-decoded-content-length is not a valid length.", "x-amz-decoded-content-length", declared)
	}
	signed := a.Payload == StreamingSigned || a.Payload == StreamingSignedTrailer
	if signed && a.Scope == "" {
		return nil, s3err.InvalidRequest.With("A signed aws-chunked body requires a Signature Version 4 request.")
	}
	sumAlg := algNone
	if spec.trailer {
		sumAlg = spec.alg
	}
	p.chunks = newChunkReader(body, a, signed, trailers, sumAlg, n)
	p.src, p.size = p.chunks, n
	return p, nil
}

// WantMD5 asks for the body's MD5 (an S3 ETag) to be computed in the same
// pass; MD5 gives it after io.EOF. It must be called before the first
// Read.
func (p *Payload) WantMD5() { p.wantMD5 = true }

// Size is the body's declared size, decoded (-1 when unknown: a
// chunked-transfer body without a length, or a form's file).
func (p *Payload) Size() int64 { return p.size }

// Checksum gives, once Read has returned io.EOF, the flexible checksum
// that was verified or computed: its algorithm (CRC32, SHA256, ...) and
// its base64 value, for the server to store and answer; ("", "") when the
// request asked for none.
func (p *Payload) Checksum() (name, value string) {
	if p.result == "" {
		return "", ""
	}
	return p.sum.alg.String(), p.result
}

// MD5 gives the body's MD5 once Read has returned io.EOF, when it was
// computed (Content-MD5 sent, an MD5 checksum, or WantMD5); nil otherwise.
func (p *Payload) MD5() []byte { return p.md5sum }

// HashesMD5 says whether the body's MD5 is computed as it is read, so
// that MD5 gives it at the end.
func (p *Payload) HashesMD5() bool { return p.md5Want != nil || p.wantMD5 || p.sum.alg == algMD5 }

// setup makes the hashers the declarations need, sharing one where two
// ask for the same digest.
func (p *Payload) setup() {
	p.ready = true
	if p.HashesMD5() {
		p.md5h = md5.New()
		p.fan[p.nfan], p.nfan = p.md5h, p.nfan+1
	}
	if p.shaWant != nil || p.sum.alg == algSHA256 {
		p.shah = sha256.New()
		p.fan[p.nfan], p.nfan = p.shah, p.nfan+1
	}
	switch p.sum.alg {
	case algNone:
	case algMD5:
		p.sumh = p.md5h
	case algSHA256:
		p.sumh = p.shah
	default:
		p.sumh = p.sum.alg.newHash()
		p.fan[p.nfan], p.nfan = p.sumh, p.nfan+1
	}
}

// Read reads object bytes. At the body's end it checks every declaration
// and returns the first failure in place of io.EOF; a failure is sticky.
func (p *Payload) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if !p.ready {
		p.setup()
	}
	n, err := p.src.Read(b)
	if n > 0 {
		p.n += int64(n)
		switch {
		case p.max >= 0 && p.n > p.max:
			p.err = s3err.EntityTooLarge.With("Your proposed upload exceeds the maximum allowed size")
			return 0, p.err
		case p.size >= 0 && p.n > p.size:
			p.err = s3err.InvalidRequest.With("The body is longer than its declared length.")
			return 0, p.err
		}
		for _, h := range p.fan[:p.nfan] {
			h.Write(b[:n])
		}
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		if err = p.finish(); err == nil {
			err = io.EOF
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = errShortBody(err)
	}
	p.err = err
	return n, err
}

// finish checks the declarations once the body has ended.
func (p *Payload) finish() error {
	if p.size >= 0 && p.n < p.size {
		return errShortBody(nil)
	}
	if p.n < p.min {
		return s3err.EntityTooSmall.With("Your proposed upload is smaller than the minimum allowed size")
	}
	if p.md5h != nil {
		p.md5sum = p.md5h.Sum(nil)
		if p.md5Want != nil && !bytes.Equal(p.md5sum, p.md5Want) {
			return s3err.BadDigest
		}
	}
	if p.shaWant != nil && !bytes.Equal(p.shah.Sum(nil), p.shaWant) {
		return s3err.XAmzContentSHA256Mismatch
	}
	if p.sumh == nil {
		return nil
	}
	want := p.sum.want
	if p.sum.trailer {
		want = p.chunks.trailerValue
	}
	got := p.sumh.Sum(nil)
	if want != nil && !bytes.Equal(got, want) {
		return errChecksumMismatch(p.sum.alg.String())
	}
	p.result = base64.StdEncoding.EncodeToString(got)
	return nil
}
