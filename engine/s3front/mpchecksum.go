package s3front

import (
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
)

// Multipart checksums. An upload created with x-amz-checksum-algorithm
// keeps the algorithm, and its checksum type (COMPOSITE or FULL_OBJECT, the
// front end's default filled in), in its metadata. Every part then stores
// its checksum of that algorithm: the one the client sent, verified as the
// body is read, or one computed here when the client sent none. The
// completion derives the object's checksum from the parts' (COMPOSITE: the
// algorithm over the parts' raw digests, "-N" appended; FULL_OBJECT: the
// parts' CRCs combined into the CRC of the whole), refuses it with
// BadDigest when it differs from one the client sent, and keeps every
// part's checksum with the object so a GET of one part answers its own.
// An upload created without an algorithm keeps what it always did: parts
// answer the checksums clients sent, the object carries none.

const (
	// metaUploadChecksum is the upload's checksum algorithm.
	metaUploadChecksum = objlayer.InternalMetaPrefix + "Checksum-Algorithm"
	// metaPartChecksums is a completed object's part checksums, part 1
	// first, separated by spaces.
	metaPartChecksums = objlayer.InternalMetaPrefix + "Part-Checksums"
)

// setUploadChecksum records an upload's checksum algorithm and type.
func setUploadChecksum(meta map[string]string, alg types.ChecksumAlgorithm, typ types.ChecksumType) {
	if alg == "" {
		return
	}
	meta[metaUploadChecksum] = string(alg)
	meta[metaChecksumType] = string(typ)
}

// sentChecksum is the algorithm of the checksum a request's body carries:
// its trailer's, or that of the checksum header with a value.
func sentChecksum(body io.Reader, headerSums map[types.ChecksumAlgorithm]*string) types.ChecksumAlgorithm {
	if cr, ok := body.(interface{ Algorithm() string }); ok && cr.Algorithm() != "" {
		return types.ChecksumAlgorithm(strings.ToUpper(cr.Algorithm()))
	}
	for a, v := range headerSums {
		if v != nil && *v != "" {
			return a
		}
	}
	return ""
}

// withPartChecksum makes a part of an upload with a checksum algorithm
// carry that algorithm's checksum: a client's checksum of another
// algorithm is refused, and the checksum is computed here when the client
// sent none (sent: the algorithm the client's checksum has). meta is where
// the part's checksum is found once its body was read; the part stores it
// as "ALGORITHM:value".
func withPartChecksum(opts objlayer.PartOptions, sent types.ChecksumAlgorithm, meta map[string]string) objlayer.PartOptions {
	seal := opts.Body
	opts.Body = func(uploadMeta map[string]string, r io.Reader, size int64) (io.Reader, int64, func() string, error) {
		if alg := types.ChecksumAlgorithm(uploadMeta[metaUploadChecksum]); alg != "" {
			switch sent {
			case alg:
			case "":
				hr, err := utils.NewHashReader(r, "", utils.HashType(strings.ToLower(string(alg))))
				if err != nil {
					return nil, 0, nil, err
				}
				r = &eofHook{r: hr, fn: func() { meta[checksumKey(alg)] = hr.Sum() }}
			default:
				return nil, 0, nil, s3err.GetChecksumTypeMismatchErr(alg, sent)
			}
		}
		if seal == nil {
			return r, size, nil, nil
		}
		return seal(uploadMeta, r, size)
	}
	opts.Checksum = func() string {
		if alg, v := partChecksum(meta); alg != "" {
			return string(alg) + ":" + v
		}
		return ""
	}
	return opts
}

// partChecksum is the checksum recorded in a part's metadata.
func partChecksum(meta map[string]string) (types.ChecksumAlgorithm, string) {
	for k, v := range meta {
		if strings.HasPrefix(k, checksumPrefix) && k != metaChecksumType {
			return types.ChecksumAlgorithm(k[len(checksumPrefix):]), v
		}
	}
	return "", ""
}

// completedChecksum is the check and derivation of an upload's checksum at
// its completion: called with the parts chosen (their stored checksums)
// before anything is written, it refuses a part the client named with a
// checksum other than the stored one, derives the object's checksum, and
// refuses the completion when the client sent another one.
func completedChecksum(in *s3.CompleteMultipartUploadInput) func([]objlayer.PartInfo, map[string]string) error {
	return func(parts []objlayer.PartInfo, meta map[string]string) error {
		alg := types.ChecksumAlgorithm(meta[metaUploadChecksum])
		typ := types.ChecksumType(meta[metaChecksumType])
		if in.ChecksumType != "" && in.ChecksumType != typ {
			if typ == "" {
				typ = "null"
			}
			return s3err.GetChecksumTypeMismatchOnMpErr(typ)
		}
		if alg == "" {
			return nil
		}
		named := map[int32]*string{}
		for _, p := range in.MultipartUpload.Parts {
			if p.PartNumber != nil {
				named[*p.PartNumber] = partSum(alg, p)
			}
		}
		sums := make([]string, len(parts))
		for i, p := range parts {
			a, v, _ := strings.Cut(p.Checksum, ":")
			if types.ChecksumAlgorithm(a) != alg {
				// A part stored without the upload's checksum (written by a
				// build before multipart checksums): the object gets none.
				delete(meta, metaChecksumType)
				return nil
			}
			if s := named[int32(p.Number)]; s != nil && *s != v {
				return s3err.GetInvalidPartErr(str(in.UploadId), int32(p.Number), p.ETag)
			}
			sums[i] = v
		}
		whole, err := combinedChecksum(alg, typ, parts, sums)
		if err != nil {
			return err
		}
		if got := wholeSum(alg, in); got != nil {
			want := *got
			if typ == types.ChecksumTypeComposite && !strings.Contains(want, "-") {
				want = fmt.Sprintf("%s-%d", want, len(parts))
			}
			if want != whole {
				return s3err.GetChecksumBadDigestErr(alg)
			}
		}
		meta[checksumKey(alg)] = whole
		meta[metaPartChecksums] = strings.Join(sums, " ")
		return nil
	}
}

// combinedChecksum derives an object's checksum from its parts'.
func combinedChecksum(alg types.ChecksumAlgorithm, typ types.ChecksumType, parts []objlayer.PartInfo, sums []string) (string, error) {
	if typ == types.ChecksumTypeFullObject {
		whole := sums[0]
		for i := 1; i < len(sums); i++ {
			var err error
			if whole, err = utils.AddCRCChecksum(alg, whole, sums[i], parts[i].Size); err != nil {
				return "", fmt.Errorf("combine part %d's %s: %w", parts[i].Number, alg, err)
			}
		}
		return whole, nil
	}
	c, err := utils.NewCompositeChecksumReader(utils.HashType(strings.ToLower(string(alg))))
	if err != nil {
		return "", err
	}
	for i, s := range sums {
		if err := c.Process(s); err != nil {
			return "", fmt.Errorf("part %d's %s: %w", parts[i].Number, alg, err)
		}
	}
	return fmt.Sprintf("%s-%d", c.Sum(), len(sums)), nil
}

// partSum is the checksum of algorithm alg a completion names for a part.
func partSum(alg types.ChecksumAlgorithm, p types.CompletedPart) *string {
	return pickSum(alg, p.ChecksumCRC32, p.ChecksumCRC32C, p.ChecksumSHA1, p.ChecksumSHA256, p.ChecksumCRC64NVME)
}

// wholeSum is the object checksum of algorithm alg a completion sent.
func wholeSum(alg types.ChecksumAlgorithm, in *s3.CompleteMultipartUploadInput) *string {
	return pickSum(alg, in.ChecksumCRC32, in.ChecksumCRC32C, in.ChecksumSHA1, in.ChecksumSHA256, in.ChecksumCRC64NVME)
}

func pickSum(alg types.ChecksumAlgorithm, crc32, crc32c, sha1, sha256, crc64 *string) *string {
	v := map[types.ChecksumAlgorithm]*string{
		types.ChecksumAlgorithmCrc32: crc32, types.ChecksumAlgorithmCrc32c: crc32c, types.ChecksumAlgorithmSha1: sha1,
		types.ChecksumAlgorithmSha256: sha256, types.ChecksumAlgorithmCrc64nvme: crc64,
	}[alg]
	if v == nil || *v == "" {
		return nil
	}
	return v
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
	alg := types.ChecksumAlgorithm(meta[metaUploadChecksum])
	if n < 1 || n > len(sums) || alg == "" {
		return nil
	}
	return map[string]string{checksumKey(alg): sums[n-1], metaChecksumType: meta[metaChecksumType]}
}
