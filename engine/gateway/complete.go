package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/s3response"
)

// Completing a multipart upload across replicas. versitygw's posix backend
// claims a completion by renaming the upload's directory to
// <uploadId>.<ETag>.inprogress, assembles the object, links it and removes
// the claim. A second completion of the same upload that finds the claim
// answers success at once, trusting the claimant to finish. A claimant on
// a replica that died never does: the client, whose first attempt ended
// with the connection, retried on another replica, was told its upload
// completed, and the object never appeared (seen in the day-2 test when a
// node was lost). So a completion that returns while the claim is still
// there waits for it to go, and takes over a claim older than any live
// assembly of its parts could be.

// DefaultClaimTimeout is the gateway's --multipart-claim-timeout.
const DefaultClaimTimeout = 30 * time.Second

const (
	// A live claimant's assembly is bounded by the claim timeout plus its
	// parts' size at claimRate: an older claim is taken over.
	claimRate = 16 << 20 // bytes a second
	// claimPoll is how often a claim is looked at while waiting.
	claimPoll = 200 * time.Millisecond
)

// errClaimUnsettled answers a completion whose claim neither finished nor
// could be taken over in time: the client retries, it is never told a
// completion happened that did not.
var errClaimUnsettled = errors.New("gateway: another completion of this upload is still in progress; retry")

// completeMultipart runs versitygw's completion until it answers for an
// object that was linked (or an error).
func (b *Backend) completeMultipart(ctx context.Context, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, string, error) {
	claim, upload, ok := b.claimPaths(in)
	var deadline time.Time
	var limit time.Duration // how old a claim is taken over
	for {
		out, v, err := b.Posix.CompleteMultipartUpload(ctx, in)
		if err != nil || !ok {
			return out, v, err
		}
		// A completion that linked the object removed its claim first;
		// one that found another's claim returns with the claim there.
		st, err := os.Lstat(claim)
		if errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Lstat(upload); err == nil {
				continue // the claimant failed and gave the upload back
			}
			return out, v, nil
		}
		if err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", err
		}
		if deadline.IsZero() {
			// Read once: the claim's parts are the upload's, whoever holds it.
			limit = b.claimBase + claimLimit(claim)
			deadline = time.Now().Add(limit + time.Minute)
		}
		if time.Now().After(deadline) {
			return s3response.CompleteMultipartUploadResult{}, "", errClaimUnsettled
		}
		if age := time.Since(changed(st)); age > limit {
			// The claimant is gone: give the upload back and complete it
			// here. A rename another replica made first fails; the next
			// round sees its claim.
			if err := os.Rename(claim, upload); err == nil {
				b.log.Warn("took over a multipart completion claimed long ago", "claim", claim, "age", age.Round(time.Second))
			}
			continue
		}
		time.Sleep(claimPoll)
	}
}

// claimPaths are the paths in the volume of the upload's directory and of
// its claim by a completion of these parts; ok is false when the claim's name cannot be known.
func (b *Backend) claimPaths(in *s3.CompleteMultipartUploadInput) (claim, upload string, ok bool) {
	if in.Bucket == nil || in.Key == nil || in.UploadId == nil || in.MultipartUpload == nil {
		return "", "", false
	}
	token, err := backend.ComputeMultipartETagFromPartETags(in.MultipartUpload.Parts)
	if err != nil {
		return "", "", false
	}
	dir := filepath.Join(b.vol.dir, *in.Bucket, posix.MetaTmpMultipartDir, fmt.Sprintf("%x", sha256.Sum256([]byte(*in.Key))))
	upload = filepath.Join(dir, *in.UploadId)
	return upload + "." + strings.Trim(token, `"`) + ".inprogress", upload, true
}

// claimLimit is how long its parts' size lets a live claimant take.
func claimLimit(claim string) time.Duration {
	var size int64
	entries, _ := os.ReadDir(claim)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
	}
	return time.Duration(size / claimRate * int64(time.Second))
}

// changed is when a directory was last renamed (its ctime): for a claim,
// when it was claimed.
func changed(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}
