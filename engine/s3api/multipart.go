package s3api

import (
	"encoding/xml"
	"errors"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
	"github.com/strata-storage/strata/engine/s3sig"
)

// Multipart uploads. An upload created with x-amz-checksum-algorithm keeps
// the algorithm and its checksum type (COMPOSITE or FULL_OBJECT) in its
// metadata; every part then stores its checksum of that algorithm (the
// client's, verified as the body is read, or one computed here), and the
// completion derives the object's checksum from the parts' and keeps every
// part's, so a GET of one part answers its own.

func parseUploadID(s string) ([16]byte, error) {
	id, err := objlayer.ParseUploadID(s)
	if err != nil {
		return id, s3err.NoSuchUpload
	}
	return id, nil
}

// partNumberOf reads partNumber (1 to 10,000).
func (r *request) partNumberOf() (int, error) {
	n, err := strconv.Atoi(r.q("partNumber"))
	if err != nil || n < 1 || n > objlayer.MaxParts {
		return 0, s3err.InvalidArgumentNamed("Part number must be an integer between 1 and 10000, inclusive", "partNumber", r.q("partNumber"))
	}
	return n, nil
}

type initiateResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	XMLNS    string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

// createMultipartUpload starts an upload.
func createMultipartUpload(r *request) error {
	if err := s3rules.CheckKey(r.key); err != nil {
		return err
	}
	alg := strings.ToUpper(r.h("X-Amz-Checksum-Algorithm"))
	typ := strings.ToUpper(r.h("X-Amz-Checksum-Type"))
	if alg != "" {
		if _, ok := s3sig.ChecksumHash(alg); !ok {
			return s3err.InvalidRequest.With("Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]")
		}
	} else if typ != "" {
		return s3err.InvalidRequest.With("The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
	}
	if alg != "" {
		var err error
		if typ, err = s3rules.UploadChecksumType(alg, typ); err != nil {
			return err
		}
	}
	tags, err := r.writeTags(r.h("X-Amz-Tagging"))
	if err != nil {
		return err
	}
	if err := checkRedirect(r.h(objlayer.MetaWebsiteRedirect)); err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	meta, err := metaFrom(r.header, tags)
	if err != nil {
		return err
	}
	if _, ok := meta[objlayer.MetaContentType]; !ok {
		meta[objlayer.MetaContentType] = "binary/octet-stream"
	}
	if err := r.objectACLOnWrite(bk, meta); err != nil {
		return err
	}
	if err := r.lockOnWrite(bk, meta); err != nil {
		return err
	}
	// An encrypted upload's data key is made now; every part is encrypted
	// with it.
	enc, err := r.writeSSE(bk)
	if err != nil {
		return err
	}
	if enc != nil {
		if _, err := enc.newDataKey(bk.Name, r.key, meta); err != nil {
			return err
		}
		r.setSSEHeaders(meta)
	}
	if alg != "" {
		meta[metaUploadChecksum] = alg
		meta[objlayer.MetaChecksumType] = typ
		r.setHeader("X-Amz-Checksum-Algorithm", alg)
		r.setHeader("X-Amz-Checksum-Type", typ)
	}
	u, err := r.s.layer.NewMultipartUpload(r.ctx, bk.Name, r.key, meta)
	if err != nil {
		return err
	}
	return r.writeXML(http.StatusOK, initiateResult{XMLNS: xmlNS, Bucket: bk.Name, Key: r.key, UploadID: objlayer.FormatUploadID(u.ID)})
}

// partOptions stores a part as its upload needs: encrypted with the
// upload's data key (an SSE-C upload's parts need the customer's key
// again; a customer key for an unencrypted upload is refused), and with
// the upload's checksum (sent: the algorithm the client's checksum has,
// "" none; meta receives the computed one).
func (r *request) partOptions(number int, sent string, meta map[string]string) objlayer.PartOptions {
	return objlayer.PartOptions{
		Body: func(uploadMeta map[string]string, body io.Reader, size int64) (io.Reader, int64, func() string, error) {
			if alg := uploadMeta[metaUploadChecksum]; alg != "" {
				switch sent {
				case alg:
				case "":
					h, _ := s3sig.ChecksumHash(alg)
					hr := &hashReader{r: body, h: h}
					body = &eofHook{r: hr, fn: func() { meta[objlayer.MetaChecksumPrefix+alg] = base64Digest(h.Sum(nil)) }}
				default:
					return nil, 0, nil, s3err.InvalidRequest.Withf("Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: %s", strings.ToLower(alg), strings.ToLower(sent))
				}
			}
			dek, err := r.dataKey(r.bucket, r.key, uploadMeta, false)
			if err != nil || dek == nil {
				return body, size, nil, err
			}
			r.setSSEHeaders(uploadMeta)
			return sealStream(body, size, sseMode(uploadMeta[metaSSE]), dek, number)
		},
		Checksum: func() string {
			if alg, v := storedChecksum(meta); alg != "" {
				return alg + ":" + v
			}
			return ""
		},
	}
}

// eofHook calls fn when its reader reports EOF.
type eofHook struct {
	r    io.Reader
	fn   func()
	done bool
}

func (e *eofHook) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) && !e.done {
		e.done = true
		e.fn()
	}
	return n, err
}

// uploadPart stores one part.
func uploadPart(r *request) error {
	id, err := parseUploadID(r.q("uploadId"))
	if err != nil {
		return err
	}
	number, err := r.partNumberOf()
	if err != nil {
		return err
	}
	if _, err := r.bucketInfo(); err != nil {
		return err
	}
	p, err := r.payload()
	if err != nil {
		return err
	}
	size := p.Size()
	if size > objlayer.MaxPartSize {
		return s3err.EntityTooLarge.Withf("Your proposed upload exceeds the maximum allowed part size of %d bytes.", int64(objlayer.MaxPartSize))
	}
	if err := r.checkSSE(false); err != nil {
		return err
	}
	meta := map[string]string{}
	sent := sentChecksum(r)
	body := &eofHook{r: r.tracked(p), fn: func() {
		if alg, v := p.Checksum(); alg != "" {
			meta[objlayer.MetaChecksumPrefix+alg] = v
		}
	}}
	release, err := r.dataSlot(size)
	if err != nil {
		return err
	}
	defer release()
	part, err := r.s.layer.PutObjectPart(r.ctx, r.bucket, r.key, id, number, body, size, r.partOptions(number, sent, meta))
	if err != nil {
		return r.writeError(err)
	}
	r.setHeader("Etag", quote(part.ETag))
	if alg, v := storedChecksum(meta); alg != "" {
		r.setHeader(http.CanonicalHeaderKey("x-amz-checksum-"+strings.ToLower(alg)), v)
	}
	return r.empty(http.StatusOK)
}

// sentChecksum is the algorithm of the checksum a request's body carries
// (a header with a value, or a trailer), "" none.
func sentChecksum(r *request) string {
	if t := r.h("X-Amz-Trailer"); strings.HasPrefix(strings.ToLower(t), "x-amz-checksum-") {
		return strings.ToUpper(strings.TrimPrefix(strings.ToLower(t), "x-amz-checksum-"))
	}
	for k, v := range r.header {
		if name, ok := cutPrefixFold(k, "X-Amz-Checksum-"); ok && len(v) > 0 && v[0] != "" {
			switch up := strings.ToUpper(name); up {
			case "ALGORITHM", "TYPE", "MODE":
			default:
				return up
			}
		}
	}
	return ""
}

type copyPartResult struct {
	XMLName           xml.Name `xml:"CopyPartResult"`
	XMLNS             string   `xml:"xmlns,attr"`
	LastModified      string   `xml:"LastModified"`
	ETag              string   `xml:"ETag"`
	ChecksumCRC32     string   `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string   `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string   `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string   `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string   `xml:"ChecksumSHA256,omitempty"`
}

// uploadPartCopy stores a part copied from (a range of) an object version.
func uploadPartCopy(r *request) error {
	id, err := parseUploadID(r.q("uploadId"))
	if err != nil {
		return err
	}
	number, err := r.partNumberOf()
	if err != nil {
		return err
	}
	if _, err := r.bucketInfo(); err != nil {
		return err
	}
	src, err := r.openCopySource()
	if err != nil {
		return err
	}
	defer src.h.Close()
	sp, err := s3rules.ParseCopyRange(r.h("X-Amz-Copy-Source-Range"), src.info.Size)
	if err != nil {
		return err
	}
	if sp.Length > objlayer.MaxPartSize {
		return s3err.EntityTooLarge.Withf("Your proposed upload exceeds the maximum allowed part size of %d bytes.", int64(objlayer.MaxPartSize))
	}
	release, err := r.dataSlot(sp.Length)
	if err != nil {
		return err
	}
	defer release()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(src.read(r, pw, sp.Offset, sp.Length)) }()
	meta := map[string]string{} // the part's checksum, when its upload has an algorithm
	part, err := r.s.layer.PutObjectPart(r.ctx, r.bucket, r.key, id, number, pr, sp.Length, r.partOptions(number, "", meta))
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return err
	}
	if src.versionID != "" {
		r.setHeader("X-Amz-Copy-Source-Version-Id", src.versionID)
	}
	doc := copyPartResult{XMLNS: xmlNS, LastModified: isoTime(part.ModTime), ETag: quote(part.ETag)}
	if alg, v := storedChecksum(meta); alg != "" {
		setDocChecksum(alg, v, &doc.ChecksumCRC32, &doc.ChecksumCRC32C, &doc.ChecksumCRC64NVME, &doc.ChecksumSHA1, &doc.ChecksumSHA256)
	}
	return r.writeXML(http.StatusOK, doc)
}

type partEntry struct {
	PartNumber        int    `xml:"PartNumber"`
	LastModified      string `xml:"LastModified"`
	ETag              string `xml:"ETag"`
	Size              int64  `xml:"Size"`
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
}

type listPartsResult struct {
	XMLName              xml.Name      `xml:"ListPartsResult"`
	XMLNS                string        `xml:"xmlns,attr"`
	Bucket               string        `xml:"Bucket"`
	Key                  string        `xml:"Key"`
	UploadID             string        `xml:"UploadId"`
	Initiator            s3rules.Owner `xml:"Initiator"`
	Owner                s3rules.Owner `xml:"Owner"`
	StorageClass         string        `xml:"StorageClass"`
	PartNumberMarker     int           `xml:"PartNumberMarker"`
	NextPartNumberMarker int           `xml:"NextPartNumberMarker"`
	MaxParts             int           `xml:"MaxParts"`
	IsTruncated          bool          `xml:"IsTruncated"`
	ChecksumAlgorithm    string        `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType         string        `xml:"ChecksumType,omitempty"`
	Parts                []partEntry   `xml:"Part"`
}

// maxOf reads a max-keys-like parameter: 1,000 by default and at most,
// negative or malformed refused.
func (r *request) maxOf(name string) (int, error) {
	v := r.q(name)
	if v == "" {
		return 1000, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, s3err.InvalidArgumentNamed("Provided "+name+" not an integer or within integer range", name, v)
	}
	return min(n, 1000), nil
}

// listParts lists an upload's parts.
func listParts(r *request) error {
	id, err := parseUploadID(r.q("uploadId"))
	if err != nil {
		return err
	}
	marker := 0
	if m := r.q("part-number-marker"); m != "" {
		if marker, err = strconv.Atoi(m); err != nil || marker < 0 {
			return s3err.InvalidArgumentNamed("Argument part-number-marker must be an integer.", "part-number-marker", m)
		}
	}
	maxParts, err := r.maxOf("max-parts")
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	u, parts, truncated, err := r.s.layer.ListParts(r.ctx, r.bucket, r.key, id, marker, maxParts)
	if err != nil {
		return err
	}
	owner := r.objectOwner(bk, u.Meta)
	out := listPartsResult{XMLNS: xmlNS, Bucket: r.bucket, Key: r.key, UploadID: r.q("uploadId"), Initiator: owner, Owner: owner,
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: maxParts, IsTruncated: truncated,
		ChecksumAlgorithm: u.Meta[metaUploadChecksum], Parts: []partEntry{}}
	if out.ChecksumAlgorithm != "" {
		out.ChecksumType = u.Meta[objlayer.MetaChecksumType]
	}
	for _, p := range parts {
		size := p.Size
		if encrypted(u.Meta) {
			size = plainSize(size)
		}
		e := partEntry{PartNumber: p.Number, LastModified: isoTime(p.ModTime), ETag: quote(p.ETag), Size: size}
		if alg, v, ok := strings.Cut(p.Checksum, ":"); ok {
			setDocChecksum(alg, v, &e.ChecksumCRC32, &e.ChecksumCRC32C, &e.ChecksumCRC64NVME, &e.ChecksumSHA1, &e.ChecksumSHA256)
		}
		out.Parts = append(out.Parts, e)
		out.NextPartNumberMarker = p.Number
	}
	return r.writeXML(http.StatusOK, out)
}

type completeRequest struct {
	Parts []struct {
		PartNumber        *int   `xml:"PartNumber"`
		ETag              string `xml:"ETag"`
		ChecksumCRC32     string `xml:"ChecksumCRC32"`
		ChecksumCRC32C    string `xml:"ChecksumCRC32C"`
		ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME"`
		ChecksumSHA1      string `xml:"ChecksumSHA1"`
		ChecksumSHA256    string `xml:"ChecksumSHA256"`
	} `xml:"Part"`
}

type completeResult struct {
	XMLName           xml.Name `xml:"CompleteMultipartUploadResult"`
	XMLNS             string   `xml:"xmlns,attr"`
	Location          string   `xml:"Location"`
	Bucket            string   `xml:"Bucket"`
	Key               string   `xml:"Key"`
	ETag              string   `xml:"ETag"`
	ChecksumCRC32     string   `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string   `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string   `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string   `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string   `xml:"ChecksumSHA256,omitempty"`
	ChecksumType      string   `xml:"ChecksumType,omitempty"`
}

// completeMultipartUpload assembles an object from uploaded parts.
func completeMultipartUpload(r *request) error {
	id, err := parseUploadID(r.q("uploadId"))
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	body, err := r.document()
	if err != nil {
		return err
	}
	var doc completeRequest
	if err := xml.Unmarshal(body, &doc); err != nil || len(doc.Parts) == 0 {
		return s3err.MalformedXML
	}
	parts := make([]objlayer.CompletePart, len(doc.Parts))
	named := map[int]map[string]string{}
	for i, p := range doc.Parts {
		if p.PartNumber == nil {
			return s3err.MalformedXML
		}
		parts[i] = objlayer.CompletePart{Number: *p.PartNumber, ETag: strings.Trim(p.ETag, `"`)}
		named[*p.PartNumber] = map[string]string{"CRC32": p.ChecksumCRC32, "CRC32C": p.ChecksumCRC32C,
			"CRC64NVME": p.ChecksumCRC64NVME, "SHA1": p.ChecksumSHA1, "SHA256": p.ChecksumSHA256}
	}
	if err := r.putConditions(r.bucket, r.key); err != nil {
		return err
	}
	// Completing an upload encrypted with a customer key takes the key
	// again, as S3 requires.
	if u, err := r.s.layer.StatUpload(r.ctx, r.bucket, r.key, id); err == nil {
		if _, err := r.dataKey(r.bucket, r.key, u.Meta, false); err != nil {
			return err
		}
	}
	opts := objlayer.PutOptions{VersionID: newVersionID(bk), CompleteParts: r.completedChecksum(id, named), Condition: r.writeCondition()}
	// A replication remote copies a version larger than a single PUT in
	// parts; its completion carries the replica headers.
	if err := r.replicaWrite(bk, &opts, -1); err != nil {
		if held := (*errReplicaHeld)(nil); errors.As(err, &held) {
			// Sent again (a retry whose answer was lost, a resync): the
			// parts sent this time are not needed, removed when the
			// principal may abort the upload (else left to the bucket's
			// lifecycle).
			if r.allowed(bk, r.key, "", []s3rules.Action{s3rules.ActAbortMultipartUpload}, s3rules.PermWrite, false) == nil {
				if aerr := r.s.layer.AbortMultipartUpload(r.ctx, r.bucket, r.key, id); aerr != nil && !errors.Is(aerr, objlayer.ErrUploadNotFound) {
					return aerr
				}
			}
			return r.completed(bk, held.info)
		}
		return err
	}
	r.keepReplicaETag(&opts)
	info, err := r.s.layer.CompleteMultipartUpload(r.ctx, r.bucket, r.key, id, parts, opts)
	if errors.Is(err, objlayer.ErrUploadNotFound) {
		// A completion retried after it succeeded (its answer was lost)
		// answers as the first one did, while the version it made is the
		// object's current one.
		if h, oerr := r.s.layer.OpenObjectMeta(r.ctx, r.bucket, r.key, nil); oerr == nil {
			if cur := h.Info(); cur.Meta[objlayer.MetaUploadID] == objlayer.FormatUploadID(id) {
				info, err = cur, nil
			}
			h.Close()
		}
	}
	if err != nil {
		return err
	}
	info = plainInfo(info)
	if err := r.notify(bk, notify.ObjectCreatedMultipart, r.key, info); err != nil {
		return err
	}
	return r.completed(bk, info)
}

// completed answers a completion that made (or had made) info.
func (r *request) completed(bk objlayer.BucketInfo, info objlayer.ObjectInfo) error {
	r.setSSEHeaders(info.Meta)
	r.setHeader("X-Amz-Version-Id", writtenVersionID(info.VersionID))
	r.setExpiration(bk, info)
	out := completeResult{XMLNS: xmlNS, Location: "/" + r.bucket + "/" + r.key, Bucket: r.bucket, Key: r.key, ETag: quote(info.ETag)}
	if alg, v := storedChecksum(info.Meta); alg != "" {
		setDocChecksum(alg, v, &out.ChecksumCRC32, &out.ChecksumCRC32C, &out.ChecksumCRC64NVME, &out.ChecksumSHA1, &out.ChecksumSHA256)
		out.ChecksumType = checksumType(info.Meta)
	}
	return r.writeXML(http.StatusOK, out)
}

// completedChecksum checks and derives an upload's checksum at its
// completion: called with the parts chosen (their stored checksums)
// before anything is written, it refuses a part the client named with a
// checksum other than the stored one, derives the object's checksum, and
// refuses the completion when the client sent another one.
func (r *request) completedChecksum(id [16]byte, named map[int]map[string]string) func([]objlayer.PartInfo, map[string]string) error {
	return func(parts []objlayer.PartInfo, meta map[string]string) error {
		alg, typ := meta[metaUploadChecksum], meta[objlayer.MetaChecksumType]
		if want := strings.ToUpper(r.h("X-Amz-Checksum-Type")); want != "" && want != typ {
			if typ == "" {
				typ = "null"
			}
			return s3err.InvalidRequest.Withf("The upload was created using the %s checksum mode. The complete request must use the same checksum mode.", strings.ToLower(typ))
		}
		if alg == "" {
			return nil
		}
		sums := make([]string, len(parts))
		for i, p := range parts {
			a, v, _ := strings.Cut(p.Checksum, ":")
			if a != alg {
				// A part stored without the upload's checksum (written by a
				// build before multipart checksums): the object gets none.
				delete(meta, objlayer.MetaChecksumType)
				return nil
			}
			if s := named[p.Number][alg]; s != "" && s != v {
				return s3err.InvalidPart.Withf("One or more of the specified parts could not be found: part %d's checksum does not match.", p.Number)
			}
			sums[i] = v
		}
		var whole string
		var err error
		if typ == s3rules.ChecksumFullObject {
			whole = sums[0]
			for i := 1; i < len(sums); i++ {
				if whole, err = s3rules.CombineCRC(alg, whole, sums[i], parts[i].Size); err != nil {
					return err
				}
			}
		} else {
			newHash := func() hash.Hash { h, _ := s3sig.ChecksumHash(alg); return h }
			if whole, err = s3rules.Composite(newHash, sums); err != nil {
				return err
			}
		}
		if got := r.h(http.CanonicalHeaderKey("x-amz-checksum-" + strings.ToLower(alg))); got != "" {
			want := got
			if typ == s3rules.ChecksumComposite && !strings.Contains(want, "-") {
				want += "-" + strconv.Itoa(len(parts))
			}
			if want != whole {
				return s3err.BadDigest.Withf("The %s you specified did not match the calculated checksum.", strings.ToLower(alg))
			}
		}
		meta[objlayer.MetaChecksumPrefix+alg] = whole
		meta[metaPartChecksums] = strings.Join(sums, " ")
		return nil
	}
}

// abortMultipartUpload discards an upload and its parts.
func abortMultipartUpload(r *request) error {
	id, err := parseUploadID(r.q("uploadId"))
	if err != nil {
		return err
	}
	if _, err := r.bucketInfo(); err != nil {
		return err
	}
	if err := r.s.layer.AbortMultipartUpload(r.ctx, r.bucket, r.key, id); err != nil {
		return err
	}
	return r.empty(http.StatusNoContent)
}

// partChecksums is a completed object's checksum of each part, part 1
// first (nil when it keeps none).
func partChecksums(meta map[string]string) []string {
	if s, ok := meta[metaPartChecksums]; ok {
		return strings.Fields(s)
	}
	return nil
}

// partChecksumOf answers part n's checksum (1-based) as the object's: the
// same algorithm and type, the part's value.
func partChecksumOf(meta map[string]string, n int) map[string]string {
	sums := partChecksums(meta)
	alg := meta[metaUploadChecksum]
	if n < 1 || n > len(sums) || alg == "" {
		return nil
	}
	return map[string]string{objlayer.MetaChecksumPrefix + alg: sums[n-1], objlayer.MetaChecksumType: meta[objlayer.MetaChecksumType]}
}
