package erasure

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
	"github.com/strata-storage/strata/engine/objlayer"
)

// NewMultipartUpload starts an upload; its ID names it from now on.
func (s *Set) NewMultipartUpload(ctx context.Context, bucket, object string, meta map[string]string) (objlayer.UploadInfo, error) {
	u := &drive.Upload{
		ID: uuid.Must(uuid.NewV7()), Bucket: bucket, Object: object, Initiated: time.Now().UnixNano(),
		DataDir: uuid.New(), Meta: meta, Erasure: s.erasureInfo(bucket, object),
	}
	errs := s.forEach(func(_ int, d Drive) error { return d.PutUpload(committing(ctx), u) })
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		s.forEach(func(_ int, d Drive) error { return d.AbortUpload(committing(ctx), bucket, object, u.ID) })
		return objlayer.UploadInfo{}, fmt.Errorf("%w: %d of %d drives recorded the upload, %d needed (%s)",
			objlayer.ErrWriteQuorum, n, len(errs), s.layout.WriteQuorum(), detail(errs))
	}
	return uploadInfo(u), nil
}

func uploadInfo(u *drive.Upload) objlayer.UploadInfo {
	return objlayer.UploadInfo{Bucket: u.Bucket, Object: u.Object, ID: u.ID, Initiated: time.Unix(0, u.Initiated).UTC(), Meta: u.Meta}
}

// getUpload reads an upload's record from every drive; read quorum of
// drives must hold it.
func (s *Set) getUpload(ctx context.Context, drives []Drive, bucket, object string, id [16]byte) (*drive.Upload, []*drive.Upload, error) {
	ups, errs := readUploads(ctx, drives, bucket, object, id)
	return s.uploadQuorum(ups, errs)
}

// readUploads reads an upload's record from every drive: each drive's
// record (nil where it has none) and error.
func readUploads(ctx context.Context, drives []Drive, bucket, object string, id [16]byte) ([]*drive.Upload, []error) {
	ups := make([]*drive.Upload, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		u, err := d.GetUpload(ctx, bucket, object, id)
		ups[pos] = u
		return err
	})
	return ups, errs
}

// uploadQuorum is getUpload's answer from what the drives read: the
// upload when read quorum of drives hold it, ErrUploadNotFound when too
// many lack it, else ErrReadQuorum.
func (s *Set) uploadQuorum(ups []*drive.Upload, errs []error) (*drive.Upload, []*drive.Upload, error) {
	if countNil(errs) >= s.layout.ReadQuorum() {
		for _, u := range ups {
			if u != nil {
				return u, ups, nil
			}
		}
	}
	if countIs(errs, drive.ErrUploadNotFound) > len(errs)-s.layout.ReadQuorum() {
		return nil, nil, objlayer.ErrUploadNotFound
	}
	return nil, nil, fmt.Errorf("%w: %d of %d drives answered (%s)", objlayer.ErrReadQuorum, countNil(errs), len(errs), detail(errs))
}

// PutObjectPart stores one part of an upload. Uploading a part number again
// replaces it (the upload that finishes last wins).
func (s *Set) PutObjectPart(ctx context.Context, bucket, object string, uploadID [16]byte, number int, r io.Reader, size int64, opts objlayer.PartOptions) (objlayer.PartInfo, error) {
	drives := s.writeDrives()
	w := s.newWriteWait()
	u, ups, err := s.getUpload(ctx, drives, bucket, object, uploadID)
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	var etag func() string
	if opts.Body != nil {
		if r, size, etag, err = opts.Body(u.Meta, r, size); err != nil {
			return objlayer.PartInfo{}, err
		}
	}
	part := &drive.PartRecord{Number: number, ID: uuid.New()}
	st, err := s.stageShards(ctx, w, drives, part.ID, 1, u.Erasure.Distribution, r, size, etag == nil)
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	if opts.Checksum != nil {
		part.Checksum = opts.Checksum()
	}
	// Timed when its data is in, not when it started: of two uploads of one
	// part number, the one that finishes last wins, as in S3.
	part.ModTime = hlc.Default.Now()
	part.Size, part.ETag = st.size, st.etag
	if etag != nil {
		part.ETag = etag()
	}
	// A drive still committing the part when write quorum did is left to
	// finish; what it staged is removed if it fails (the completion then
	// misses that drive, and heals it).
	_, errs := forEachDriveWait(w, drives, func(pos int, d Drive) (struct{}, error) {
		if st.errs[pos] != nil {
			return struct{}{}, st.errs[pos]
		}
		if ups[pos] == nil {
			_ = d.AbortStaged(committing(ctx), part.ID)
			return struct{}{}, drive.ErrUploadNotFound
		}
		return struct{}{}, d.CommitPart(committing(ctx), u, part)
	}, errStillCommitting, func(pos int, _ struct{}, err error) {
		if err != nil {
			_ = drives[pos].AbortStaged(committing(ctx), part.ID)
		}
	})
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		return objlayer.PartInfo{}, fmt.Errorf("%w: %d of %d drives stored part %d, %d needed (%s)",
			objlayer.ErrWriteQuorum, n, len(errs), number, s.layout.WriteQuorum(), detail(errs))
	}
	return partInfo(*part), nil
}

func partInfo(p drive.PartRecord) objlayer.PartInfo {
	return objlayer.PartInfo{Number: p.Number, ModTime: time.Unix(0, p.ModTime).UTC(), Size: p.Size, ETag: p.ETag, Checksum: p.Checksum}
}

// resolveParts reads an upload's parts from every drive and keeps, for each
// part number, the upload held by read quorum (the newest when several are).
// lists holds what each drive listed.
func (s *Set) resolveParts(ctx context.Context, drives []Drive, uploadID [16]byte) (parts []drive.PartRecord, lists [][]drive.PartRecord, err error) {
	lists = make([][]drive.PartRecord, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		var err error
		lists[pos], err = d.ListParts(ctx, uploadID)
		return err
	})
	if countNil(errs) < s.layout.ReadQuorum() {
		return nil, nil, fmt.Errorf("%w: %d of %d drives listed parts (%s)", objlayer.ErrReadQuorum, countNil(errs), len(errs), detail(errs))
	}
	type key struct {
		number int
		id     [16]byte
	}
	counts := map[key]int{}
	recs := map[key]drive.PartRecord{}
	for _, l := range lists {
		for _, p := range l {
			k := key{p.Number, p.ID}
			counts[k]++
			recs[k] = p
		}
	}
	best := map[int]drive.PartRecord{}
	for k, n := range counts {
		if n < s.layout.ReadQuorum() {
			continue
		}
		p := recs[k]
		if cur, ok := best[k.number]; !ok || p.ModTime > cur.ModTime {
			best[k.number] = p
		}
	}
	out := make([]drive.PartRecord, 0, len(best))
	for _, p := range best {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, lists, nil
}

// ListParts lists an upload's parts after partMarker, at most maxParts.
func (s *Set) ListParts(ctx context.Context, bucket, object string, uploadID [16]byte, partMarker, maxParts int) (objlayer.UploadInfo, []objlayer.PartInfo, bool, error) {
	drives := s.Drives()
	u, _, err := s.getUpload(ctx, drives, bucket, object, uploadID)
	if err != nil {
		return objlayer.UploadInfo{}, nil, false, err
	}
	parts, _, err := s.resolveParts(ctx, drives, uploadID)
	if err != nil {
		return objlayer.UploadInfo{}, nil, false, err
	}
	var out []objlayer.PartInfo
	for _, p := range parts {
		if p.Number <= partMarker {
			continue
		}
		if len(out) == maxParts {
			return uploadInfo(u), out, true, nil
		}
		out = append(out, partInfo(p))
	}
	return uploadInfo(u), out, false, nil
}

// CompleteMultipartUpload turns an upload into an object version made of
// the named parts, without copying their data. opts gives the version ID
// and may override metadata. Each part but the last must be at least
// MinPartSize.
func (s *Set) CompleteMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte, parts []objlayer.CompletePart, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	drives := s.writeDrives()
	w := s.newWriteWait()
	ups, readErrs := readUploads(ctx, drives, bucket, object, uploadID)
	if info, resumed, err := s.resumeCompletion(ctx, drives, bucket, object, ups, readErrs, parts); resumed {
		return info, err
	}
	u, ups, err := s.uploadQuorum(ups, readErrs)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	uploaded, lists, err := s.resolveParts(ctx, drives, uploadID)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	byNumber := map[int]drive.PartRecord{}
	for _, p := range uploaded {
		byNumber[p.Number] = p
	}
	if len(parts) == 0 {
		return objlayer.ObjectInfo{}, objlayer.ErrInvalidPart
	}
	chosen := make([]drive.PartRecord, 0, len(parts))
	etags := md5.New()
	var size int64
	for i, cp := range parts {
		if i > 0 && cp.Number <= parts[i-1].Number {
			return objlayer.ObjectInfo{}, objlayer.ErrInvalidPartOrder
		}
		p, ok := byNumber[cp.Number]
		if !ok || strings.Trim(cp.ETag, `"`) != p.ETag {
			return objlayer.ObjectInfo{}, fmt.Errorf("%w: part %d", objlayer.ErrInvalidPart, cp.Number)
		}
		if i < len(parts)-1 && p.Size < objlayer.MinPartSize {
			return objlayer.ObjectInfo{}, fmt.Errorf("%w: part %d is %d bytes", objlayer.ErrPartTooSmall, cp.Number, p.Size)
		}
		raw, err := hex.DecodeString(p.ETag)
		if err != nil {
			return objlayer.ObjectInfo{}, fmt.Errorf("%w: part %d", objlayer.ErrInvalidPart, cp.Number)
		}
		etags.Write(raw)
		size += p.Size
		chosen = append(chosen, p)
	}
	modTime := opts.ModTime
	if modTime.IsZero() {
		modTime = hlc.Now()
	}
	src := u.Meta
	if opts.Meta != nil {
		src = opts.Meta
	}
	meta := make(map[string]string, len(src)+1)
	for k, v := range src {
		meta[k] = v
	}
	meta[objlayer.MetaUploadID] = uuid.UUID(uploadID).String()
	if opts.CompleteParts != nil {
		infos := make([]objlayer.PartInfo, len(chosen))
		for i, p := range chosen {
			infos[i] = partInfo(p)
		}
		if err := opts.CompleteParts(infos, meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	if err := s.checkCondition(ctx, bucket, object, opts.Condition); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	rec := &drive.Record{
		VersionID: opts.VersionID,
		ModTime:   modTime.UnixNano(),
		Size:      size,
		ETag:      fmt.Sprintf("%s-%d", hexSum(etags), len(chosen)),
		Meta:      meta,
		DataDir:   u.DataDir,
		Erasure:   u.Erasure,
	}
	if opts.ETag != "" {
		rec.ETag = opts.ETag // a replica keeps the source's
	}
	for _, p := range chosen {
		rec.Parts = append(rec.Parts, drive.Part{Number: p.Number, Size: p.Size, ETag: p.ETag})
	}
	// Drives holding the upload complete it. One that missed a chosen part
	// (its node was away, or it was left behind committing it) completes
	// without that part's shard, which is then healed, as a PUT that left a
	// drive behind is; each chosen part must be on write quorum of them, as
	// a PUT's data must. Otherwise nothing is consumed and the upload stays
	// as it is.
	mine, missed, err := s.partsByDrive(ups, lists, chosen)
	if err != nil {
		return objlayer.ObjectInfo{}, fmt.Errorf("%w: upload %s of %s/%s; the upload is kept, retry", err, uuid.UUID(uploadID), bucket, object)
	}
	// A drive that dropped the completion as older than a null version it
	// holds kept the upload: commitVersion completes it there again with a
	// later stamp; the drives that took an earlier stamp take the new
	// record over it (its files are in place). A drive still completing
	// when write quorum of drives did is left to finish (what it commits is
	// whole); if it fails the object is healed, and if it dropped the
	// completion its upload is aborted there.
	var dropped []bool // in the last round
	consumed := make([]bool, len(drives))
	errs := s.commitVersion(ctx, drives, bucket, object, rec, !opts.ModTime.IsZero(), nil, func(committed []bool) []error {
		var errs []error
		dropped, errs = forEachDriveWait(w, drives, func(pos int, d Drive) (bool, error) {
			switch {
			case ups[pos] == nil:
				return false, drive.ErrUploadNotFound
			case committed[pos]:
				_, err := d.PutVersion(committing(ctx), bucket, object, ownRecord(rec, pos, nil), drive.NotStaged)
				return false, err
			}
			res, err := d.CompleteUpload(committing(ctx), u, mine[pos], ownRecord(rec, pos, nil))
			if err == nil && res.Superseded {
				return true, drive.ErrSuperseded
			}
			consumed[pos] = consumed[pos] || err == nil
			return false, err
		}, errStillCommitting, func(pos int, dropped bool, err error) {
			if dropped {
				_ = drives[pos].AbortUpload(committing(ctx), bucket, object, uploadID)
			}
			if err != nil {
				s.partialWrite(bucket, object, rec.VersionID)
			}
		})
		return errs
	})
	if countNil(errs) < s.layout.WriteQuorum() {
		return objlayer.ObjectInfo{}, s.reopenUpload(ctx, drives, u, mine, rec, consumed, errs)
	}
	// Drives still holding the upload because they dropped the completion:
	// the upload is done everywhere else.
	forEachDrive(drives, func(pos int, d Drive) error {
		if dropped[pos] {
			_ = d.AbortUpload(committing(ctx), bucket, object, uploadID)
		}
		return nil
	})
	if missed {
		s.partialWrite(bucket, object, rec.VersionID)
	}
	return s.finishPut(ctx, drives, bucket, object, rec, errs)
}

// partsByDrive gives each drive holding the upload (ups) the chosen parts
// as it completes them: those it lists (lists) with the chosen upload of
// their number, the others marked missed (drive.PartRecord.Missed). missed
// says whether any drive missed one. It refuses when fewer than write
// quorum of drives hold the upload, or a chosen part is on fewer than
// write quorum of them.
func (s *Set) partsByDrive(ups []*drive.Upload, lists [][]drive.PartRecord, chosen []drive.PartRecord) (mine [][]drive.PartRecord, missed bool, err error) {
	mine = make([][]drive.PartRecord, len(ups))
	holders := make([]int, len(chosen))
	holding := 0
	for pos, u := range ups {
		if u == nil {
			continue
		}
		holding++
		have := make(map[int][16]byte, len(lists[pos]))
		for _, p := range lists[pos] {
			have[p.Number] = p.ID
		}
		mine[pos] = make([]drive.PartRecord, len(chosen))
		for i, p := range chosen {
			if id, ok := have[p.Number]; ok && id == p.ID {
				mine[pos][i] = p
				holders[i]++
			} else {
				mine[pos][i] = drive.PartRecord{Number: p.Number} // missed
				missed = true
			}
		}
	}
	wq := s.layout.WriteQuorum()
	if holding < wq {
		return nil, false, fmt.Errorf("%w: %d of %d drives hold the upload, %d needed", objlayer.ErrWriteQuorum, holding, len(ups), wq)
	}
	for i, n := range holders {
		if n < wq {
			return nil, false, fmt.Errorf("%w: part %d is on %d of %d drives, %d needed", objlayer.ErrWriteQuorum, chosen[i].Number, n, len(ups), wq)
		}
	}
	return mine, missed, nil
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// reopenUpload undoes a completion that missed write quorum: the drives
// that consumed the upload (consumed) take it back with the chosen parts
// each held (mine; drive.ReopenUpload), so the client's retry finds the upload whole. It
// returns the completion's error, which says on how many drives the upload
// is open again.
func (s *Set) reopenUpload(ctx context.Context, drives []Drive, u *drive.Upload, mine [][]drive.PartRecord, rec *drive.Record, consumed []bool, errs []error) error {
	took := make([]Drive, len(drives)) // the drives that consumed the upload
	for pos, d := range drives {
		if consumed[pos] {
			took[pos] = d
		}
	}
	var reopened atomic.Int32
	reopenErrs := forEachDrive(took, func(pos int, d Drive) error {
		ok, err := d.ReopenUpload(committing(ctx), u, mine[pos], ownRecord(rec, pos, nil))
		if ok {
			reopened.Add(1)
		}
		return err
	})
	kept := fmt.Sprintf("the upload is kept (reopened on %d of %d drives that completed it", reopened.Load(), countTrue(consumed))
	if int(reopened.Load()) < countTrue(consumed) {
		for pos := range reopenErrs {
			if !consumed[pos] {
				reopenErrs[pos] = nil // not asked
			}
		}
		why := detail(reopenErrs)
		if countNil(reopenErrs) == len(reopenErrs) {
			why = "a later write replaced the completed version there"
		}
		kept += ": " + why
	}
	kept += "), retry"
	if countIs(errs, drive.ErrSuperseded) > 0 {
		observeNewest(ctx, drives, u.Bucket, u.Object)
		return fmt.Errorf("%w: %w: %s/%s was written with a later stamp while this completion committed (%d of %d drives hold the newer one); %s",
			objlayer.ErrWriteQuorum, drive.ErrSuperseded, u.Bucket, u.Object, countIs(errs, drive.ErrSuperseded), len(errs), kept)
	}
	return fmt.Errorf("%w: %d of %d drives committed %s/%s, %d needed; %s (%s)",
		objlayer.ErrWriteQuorum, countNil(errs), len(errs), u.Bucket, u.Object, s.layout.WriteQuorum(), kept, detail(errs))
}

// AbortMultipartUpload removes an upload and its parts.
func (s *Set) AbortMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte) error {
	drives := s.Drives()
	if _, _, err := s.getUpload(ctx, drives, bucket, object, uploadID); err != nil {
		return err
	}
	errs := forEachDrive(drives, func(_ int, d Drive) error {
		err := d.AbortUpload(committing(ctx), bucket, object, uploadID)
		if errors.Is(err, drive.ErrUploadNotFound) {
			return nil
		}
		return err
	})
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		return fmt.Errorf("%w: %d of %d drives aborted the upload, %d needed (%s)",
			objlayer.ErrWriteQuorum, n, len(errs), s.layout.WriteQuorum(), detail(errs))
	}
	return nil
}

// uploadPage is one batch of a walk over uploads, in (object, upload ID)
// order: every upload after the position asked for and up to next, and
// whether more may follow next.
type uploadPage struct {
	uploads []objlayer.UploadInfo
	next    drive.UploadPos
	more    bool
}

// uploadPager reads a batch of at most limit uploads after a position: a
// set, a pool and the pools of a deployment are pagers.
type uploadPager func(ctx context.Context, bucket, prefix string, after drive.UploadPos, limit int) (uploadPage, error)

// uploadsPage reads the set's uploads after a position, at most limit from
// each drive, keeping those read quorum of drives hold. A drive that
// filled its batch may hold more, so the page ends at the smallest last
// position of such a drive: memory is bounded by limit per drive, however
// many uploads the bucket has.
func (s *Set) uploadsPage(ctx context.Context, bucket, prefix string, after drive.UploadPos, limit int) (uploadPage, error) {
	drives := s.Drives()
	lists := make([][]*drive.Upload, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		return d.WalkUploads(ctx, bucket, prefix, after, func(u *drive.Upload) bool {
			lists[pos] = append(lists[pos], u)
			return len(lists[pos]) < limit
		})
	})
	if countNil(errs) < s.layout.ReadQuorum() {
		return uploadPage{}, fmt.Errorf("%w: %d of %d drives listed uploads (%s)", objlayer.ErrReadQuorum, countNil(errs), len(errs), detail(errs))
	}
	var page uploadPage
	for pos, l := range lists {
		if errs[pos] == nil && len(l) == limit {
			if last := l[len(l)-1].Pos(); !page.more || last.Less(page.next) {
				page.next = last
			}
			page.more = true
		}
	}
	counts := map[[16]byte]int{}
	byID := map[[16]byte]*drive.Upload{}
	for _, l := range lists {
		for _, u := range l {
			if page.more && page.next.Less(u.Pos()) {
				continue // past the complete part of the page
			}
			counts[u.ID]++
			byID[u.ID] = u
		}
	}
	for id, n := range counts {
		if n >= s.layout.ReadQuorum() {
			page.uploads = append(page.uploads, uploadInfo(byID[id]))
		}
	}
	sortUploads(page.uploads)
	return page, nil
}

// mergeUploadPages merges the batches of several pagers (the sets of a
// pool, the pools of a deployment): only positions up to the smallest
// next of a pager that may have more are complete.
func mergeUploadPages(ctx context.Context, pagers []uploadPager, bucket, prefix string, after drive.UploadPos, limit int) (uploadPage, error) {
	var page uploadPage
	var all []objlayer.UploadInfo
	for _, p := range pagers {
		b, err := p(ctx, bucket, prefix, after, limit)
		if err != nil {
			return uploadPage{}, err
		}
		if b.more && (!page.more || b.next.Less(page.next)) {
			page.next, page.more = b.next, true
		}
		all = append(all, b.uploads...)
	}
	for _, u := range all {
		if !page.more || !page.next.Less(uploadPos(u)) {
			page.uploads = append(page.uploads, u)
		}
	}
	sortUploads(page.uploads)
	return page, nil
}

// eachUpload calls fn for every upload a pager lists under prefix, in
// order, a batch at a time, until fn returns false or an error.
func eachUpload(ctx context.Context, pager uploadPager, bucket, prefix string, after drive.UploadPos, fn func(objlayer.UploadInfo) (bool, error)) error {
	for {
		page, err := pager(ctx, bucket, prefix, after, uploadBatch)
		if err != nil {
			return err
		}
		for _, u := range page.uploads {
			if goOn, err := fn(u); !goOn || err != nil {
				return err
			}
		}
		if !page.more || !after.Less(page.next) {
			return nil
		}
		after = page.next
	}
}

// uploadBatch is how many uploads a listing reads per drive at a time (a
// variable for tests).
var uploadBatch = 1000

func uploadPos(u objlayer.UploadInfo) drive.UploadPos {
	return drive.UploadPos{Object: u.Object, ID: u.ID}
}

// sortUploads orders uploads as listings run: by object, then upload ID.
// IDs are time-ordered (UUIDv7) for uploads started by this release, so an
// object's uploads list in the order they began, as S3 lists them.
func sortUploads(us []objlayer.UploadInfo) {
	sort.Slice(us, func(i, j int) bool { return uploadPos(us[i]).Less(uploadPos(us[j])) })
}

// listUploads reads one page of a ListMultipartUploads from a pager,
// after (keyMarker, uploadIDMarker), grouping by delimiter; it reads the
// pager's batches until the page is full.
func listUploads(ctx context.Context, pager uploadPager, bucket, prefix, keyMarker string, uploadIDMarker [16]byte, delimiter string, maxUploads int) (objlayer.UploadList, error) {
	var res objlayer.UploadList
	var after drive.UploadPos
	if keyMarker != "" {
		// Without an upload-id marker every upload of the marker key is
		// skipped; a marker that is a common prefix skips all under it.
		after = drive.UploadPos{Object: keyMarker, ID: uploadIDMarker}
		if uploadIDMarker == objlayer.NullVersion {
			after.ID = lastUploadID
		}
		if cp, ok := commonPrefix(keyMarker, prefix, delimiter); ok && cp == keyMarker {
			after = drive.UploadPos{Object: keyMarker + maxListKey}
		}
	}
	lastPrefix := ""
	err := eachUpload(ctx, pager, bucket, prefix, after, func(u objlayer.UploadInfo) (bool, error) {
		if cp, ok := commonPrefix(u.Object, prefix, delimiter); ok {
			if cp == lastPrefix {
				return true, nil
			}
			if len(res.Uploads)+len(res.CommonPrefixes) == maxUploads {
				res.IsTruncated = true
				return false, nil
			}
			res.CommonPrefixes = append(res.CommonPrefixes, cp)
			lastPrefix = cp
			res.NextKeyMarker, res.NextUploadID = cp, objlayer.NullVersion
			return true, nil
		}
		if len(res.Uploads)+len(res.CommonPrefixes) == maxUploads {
			res.IsTruncated = true
			return false, nil
		}
		res.Uploads = append(res.Uploads, u)
		res.NextKeyMarker, res.NextUploadID = u.Object, u.ID
		return true, nil
	})
	return res, err
}

// lastUploadID sorts after every upload ID.
var lastUploadID = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// NewMultipartUpload starts an upload in the object's set.
func (p *Pool) NewMultipartUpload(ctx context.Context, bucket, object string, meta map[string]string) (objlayer.UploadInfo, error) {
	return p.SetFor(bucket, object).NewMultipartUpload(ctx, bucket, object, meta)
}

// StatUpload returns an upload's record.
func (p *Pool) StatUpload(ctx context.Context, bucket, object string, uploadID [16]byte) (objlayer.UploadInfo, error) {
	s := p.SetFor(bucket, object)
	u, _, err := s.getUpload(ctx, s.Drives(), bucket, object, uploadID)
	if err != nil {
		return objlayer.UploadInfo{}, err
	}
	return uploadInfo(u), nil
}

// PutObjectPart stores a part of an upload.
func (p *Pool) PutObjectPart(ctx context.Context, bucket, object string, uploadID [16]byte, number int, r io.Reader, size int64, opts objlayer.PartOptions) (objlayer.PartInfo, error) {
	return p.SetFor(bucket, object).PutObjectPart(ctx, bucket, object, uploadID, number, r, size, opts)
}

// ListParts lists an upload's parts.
func (p *Pool) ListParts(ctx context.Context, bucket, object string, uploadID [16]byte, partMarker, maxParts int) (objlayer.UploadInfo, []objlayer.PartInfo, bool, error) {
	return p.SetFor(bucket, object).ListParts(ctx, bucket, object, uploadID, partMarker, maxParts)
}

// CompleteMultipartUpload completes an upload.
func (p *Pool) CompleteMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte, parts []objlayer.CompletePart, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	return p.SetFor(bucket, object).CompleteMultipartUpload(ctx, bucket, object, uploadID, parts, opts)
}

// AbortMultipartUpload aborts an upload.
func (p *Pool) AbortMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte) error {
	return p.SetFor(bucket, object).AbortMultipartUpload(ctx, bucket, object, uploadID)
}

// uploadsPage merges a batch of the pool's sets.
func (p *Pool) uploadsPage(ctx context.Context, bucket, prefix string, after drive.UploadPos, limit int) (uploadPage, error) {
	pagers := make([]uploadPager, len(p.sets))
	for i, s := range p.sets {
		pagers[i] = s.uploadsPage
	}
	return mergeUploadPages(ctx, pagers, bucket, prefix, after, limit)
}

// EachUpload calls fn for each of the pool's uploads of a bucket under
// prefix, in (object, upload ID) order, until fn returns false or an error;
// memory stays bounded however many uploads there are.
func (p *Pool) EachUpload(ctx context.Context, bucket, prefix string, fn func(objlayer.UploadInfo) (bool, error)) error {
	return eachUpload(ctx, p.uploadsPage, bucket, prefix, drive.UploadPos{}, fn)
}

// ListMultipartUploads pages through a bucket's uploads.
func (p *Pool) ListMultipartUploads(ctx context.Context, bucket, prefix, keyMarker string, uploadIDMarker [16]byte, delimiter string, maxUploads int) (objlayer.UploadList, error) {
	return listUploads(ctx, p.uploadsPage, bucket, prefix, keyMarker, uploadIDMarker, delimiter, maxUploads)
}
