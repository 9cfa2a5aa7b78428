package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// A decommissioned pool holds nothing and takes nothing: once its servers
// are gone (its drives offline) while nodes still list it, bucket
// operations and object traffic go on in the other pools.
func TestDecommissionedPoolWithItsDrivesGoneIsLeftOut(t *testing.T) {
	active, gone := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	ps := NewPools(NewPoolEntry("b", gone.Pool, StateDecommissioned), NewPoolEntry("a", active.Pool, StateActive))
	for _, s := range gone.Sets() {
		for i := range s.Drives() {
			s.SetDrive(i, nil)
		}
	}
	if err := ps.MakeBucket(t.Context(), "photos"); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	if err := ps.UpdateBucket(t.Context(), "photos", func(b *objlayer.BucketInfo) { b.Tags = map[string]string{"team": "media"} }); err != nil {
		t.Fatalf("update bucket: %v", err)
	}
	if b, err := ps.StatBucket(t.Context(), "photos"); err != nil || b.Tags["team"] != "media" {
		t.Fatalf("stat bucket: %+v, %v", b, err)
	}
	body := bytes.Repeat([]byte("x"), 300<<10)
	if _, err := ps.PutObject(t.Context(), "photos", "k", bytes.NewReader(body), int64(len(body)), objlayer.PutOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := ps.ListObjects(t.Context(), "photos", "", "", "", 100); err != nil {
		t.Fatalf("list: %v", err)
	}
	if _, err := ps.DeleteObject(t.Context(), "photos", "k", nil, objlayer.DeleteUnversioned); err != nil {
		t.Fatalf("delete object: %v", err)
	}
	if err := ps.DeleteBucket(t.Context(), "photos"); err != nil {
		t.Fatalf("delete bucket: %v", err)
	}
}

// A pool whose drives cannot all be used yet (its servers starting, or
// not yet aware of the pool) takes no new objects while another pool can
// take them; with no such pool, placement is as before.
func TestNewObjectsAvoidAPoolWithoutWriteQuorum(t *testing.T) {
	ready, coming := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	up := &atomic.Bool{}
	for pos := 1; pos < 4; pos++ {
		coming.Sets()[0].SetDrive(pos, flaky{Drive: coming.drives[pos], up: up})
	}
	ps := NewPools(NewPoolEntry("coming", coming.Pool, StateActive), NewPoolEntry("ready", ready.Pool, StateActive))
	for i := 0; i < 20; i++ {
		e, err := ps.placement(t.Context())
		if err != nil || e.Name != "ready" {
			t.Fatalf("placement with pool coming at 1 of 4 drives: %v, %v", e.Name, err)
		}
	}
	for pos := 0; pos < 4; pos++ {
		ready.Sets()[0].SetDrive(pos, nil)
	}
	if _, err := ps.placement(t.Context()); err != nil {
		t.Fatalf("placement with no pool writable: %v", err)
	}
}

// A pool some node does not know yet takes no new objects while a pool
// more nodes know can take them (an object there would be missing from
// that node's reads), also when no pool is known to every node (the
// servers of a second pool being added have not answered yet); once every
// node knows it, it takes its share.
func TestNewObjectsGoOnlyWhereEveryNodeLooks(t *testing.T) {
	known, added := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	// Three peers: two know pool known, one (starting) knows nothing yet.
	knowers := map[string]*atomic.Int32{"known": {}, "added": {}}
	knowers["known"].Store(2)
	ps := NewPools(NewPoolEntry("known", known.Pool, StateActive), NewPoolEntry("added", added.Pool, StateActive))
	ps.KnownBy = func(pool string) int { return int(knowers[pool].Load()) }
	seen := map[string]int{}
	for _, addedKnownBy := range []int32{0, 1} {
		knowers["added"].Store(addedKnownBy)
		for range 40 {
			e, err := ps.placement(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			seen[e.Name]++
		}
		if seen["added"] > 0 {
			t.Fatalf("placement while pool added is known to %d nodes and pool known to 2: %v", addedKnownBy, seen)
		}
	}
	knowers["added"].Store(2)
	clear(seen)
	for range 200 {
		e, err := ps.placement(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Name]++
	}
	if seen["added"] == 0 || seen["known"] == 0 {
		t.Fatalf("placement once every node knows both pools: %v", seen)
	}
}

// Copying bucket records to a pool whose drives do not answer yet is an
// error (its caller tries again), and succeeds once they answer.
func TestBucketsReachAPoolOnceItAnswers(t *testing.T) {
	first, added := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	ps := NewPools(NewPoolEntry("first", first.Pool, StateActive))
	if err := ps.MakeBucket(t.Context(), "photos"); err != nil {
		t.Fatal(err)
	}
	up := &atomic.Bool{}
	for pos := 0; pos < 4; pos++ {
		added.Sets()[0].SetDrive(pos, flakyAll{flaky{Drive: added.drives[pos], up: up}})
	}
	ps.Add(NewPoolEntry("added", added.Pool, StateActive))
	if err := ps.HealBuckets(t.Context()); err == nil {
		t.Fatal("buckets copied to a pool whose drives do not answer")
	}
	up.Store(true)
	if err := ps.HealBuckets(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := ps.UpdateBucket(t.Context(), "photos", func(b *objlayer.BucketInfo) { b.Tags = map[string]string{"k": "v"} }); err != nil {
		t.Fatalf("changing the bucket once it reached every pool: %v", err)
	}
}

// A pool added while running, whose servers are still starting (no drive
// answers), is left out of listings until its servers are up: a listing
// then went on serving the other pool instead of failing. A pool this
// node opened at its start is never left out (a listing that cannot read
// it fails with ErrReadQuorum: 503, not 500).
func TestListingsWaitForAnAddedPoolsServers(t *testing.T) {
	old, added := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	ps := NewPools(NewPoolEntry("old", old.Pool, StateActive))
	if err := ps.MakeBucket(t.Context(), "lw"); err != nil {
		t.Fatal(err)
	}
	body := []byte("kept")
	if _, err := ps.PutObject(t.Context(), "lw", "k", bytes.NewReader(body), int64(len(body)), objlayer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	up := &atomic.Bool{}
	for pos := range 4 {
		added.Sets()[0].SetDrive(pos, starting{flaky{Drive: added.drives[pos], up: up}})
	}
	ps.Add(NewPoolEntry("added", added.Pool, StateActive))
	l, err := ps.ListObjects(t.Context(), "lw", "", "", "", 100)
	if err != nil || len(l.Objects) != 1 {
		t.Fatalf("listing while the added pool's servers start: %+v, %v", l.Objects, err)
	}
	up.Store(true)
	if _, err := ps.ListObjects(t.Context(), "lw", "", "", "", 100); err != nil {
		t.Fatalf("listing with the added pool up: %v", err)
	}
	up.Store(false) // seen up once: now it is read, and its loss is an error
	if _, err := ps.ListObjects(t.Context(), "lw", "", "", "", 100); !errors.Is(err, objlayer.ErrReadQuorum) {
		t.Fatalf("listing with a pool that was up gone: %v, want ErrReadQuorum", err)
	}
}

// starting is a drive whose node is not up yet: listings fail too.
type starting struct{ flaky }

func (s starting) WalkObjects(ctx context.Context, bucket, prefix, startAfter string, latestOnly bool, fn func(string, []*drive.Record) bool) error {
	if !s.up.Load() {
		return errors.New("node offline")
	}
	return s.flaky.WalkObjects(ctx, bucket, prefix, startAfter, latestOnly, fn)
}

// A delete that one drive missed (offline then back, not yet healed) does
// not bring the object back in listings: whichever drives a listing
// reads, an object some of them do not list is resolved as a GET resolves
// it first.
func TestListingAfterADeleteADriveMissed(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	tp.put(t, "kept", []byte("kept"))
	tp.put(t, "gone", []byte("gone"))
	set := tp.Sets()[0]
	stale := deleteWhileAway(t, tp, set, 3, "gone")
	if _, err := stale.GetVersion(t.Context(), "bk", "gone", nil); err != nil {
		t.Fatalf("the drive that missed the delete should still hold the object: %v", err)
	}
	for range 8 { // the drives a listing reads rotate
		l, err := tp.ListObjects(t.Context(), "bk", "", "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Objects) != 1 || l.Objects[0].Name != "kept" {
			var names []string
			for _, o := range l.Objects {
				names = append(names, o.Name)
			}
			t.Fatalf("listing after a delete one drive missed: %v, want [kept]", names)
		}
	}
}

// A drain moves the objects of buckets whose records the draining pool
// does not hold (records reach an added pool in the background, and
// objects may arrive first): it walked only the pool's own buckets, found
// the pool empty, and the objects were lost with it.
func TestDrainMovesObjectsOfBucketsThePoolDoesNotList(t *testing.T) {
	keep, old := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	ps := NewPools(NewPoolEntry("keep", keep.Pool, StateActive))
	if err := ps.MakeBucket(t.Context(), "photos"); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("y"), 5000)
	if _, err := old.PutObject(t.Context(), "photos", "arrived-early", bytes.NewReader(body), int64(len(body)), objlayer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	from := NewPoolEntry("old", old.Pool, StateDraining)
	ps.Add(from)
	bs, err := old.ListBuckets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Name == "photos" {
			t.Fatal("the draining pool holds the bucket's record")
		}
	}
	m, err := ps.DrainSet(t.Context(), from, 0, DrainMarker{}, func(DrainMarker) error { return nil })
	if err != nil || !m.Done || m.Objects != 1 {
		t.Fatalf("drain: %+v, %v; want done with 1 object moved", m, err)
	}
	if _, err := keep.StatObject(t.Context(), "photos", "arrived-early", nil); err != nil {
		t.Fatalf("the object is not in the active pool after the drain: %v", err)
	}
	if _, err := old.StatObject(t.Context(), "photos", "arrived-early", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
		t.Fatalf("the object is still in the drained pool: %v", err)
	}
}

// A listing with a delimiter, whose drives skip past a prefix after its
// first live key, lists the prefixes a GET-consistent view holds when a
// drive missed deletes under them: b/ still has b/2 after b/1 was
// deleted, c/ held only c/1, deleted.
func TestDelimitedListingAfterDeletesADriveMissed(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	for _, k := range []string{"a/1", "a/2", "b/1", "b/2", "c/1", "d"} {
		tp.put(t, k, []byte(k))
	}
	set := tp.Sets()[0]
	if !set.delimits() {
		t.Fatal("local drives do not walk delimited listings")
	}
	deleteWhileAway(t, tp, set, 3, "b/1", "c/1")
	for i := range 8 { // the drives a listing reads rotate
		var got []string
		marker := ""
		for {
			l, err := tp.ListObjects(t.Context(), "bk", "", marker, "/", 1+i%3)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l.CommonPrefixes...)
			for _, o := range l.Objects {
				got = append(got, o.Name)
			}
			if !l.IsTruncated {
				break
			}
			marker = l.NextMarker
		}
		slices.Sort(got)
		if fmt.Sprint(got) != "[a/ b/ d]" {
			t.Fatalf("listing %d with a delimiter after deletes one drive missed: %v, want [a/ b/ d]", i, got)
		}
	}
}

// A batch of a listing in which every object turned out deleted (a drive
// that missed the deletes listed them) does not end the listing: the
// objects after them are listed.
func TestListingPastABatchOfDeletesADriveMissed(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	for _, k := range []string{"a", "b", "c", "d"} {
		tp.put(t, k, []byte(k))
	}
	set := tp.Sets()[0]
	deleteWhileAway(t, tp, set, 3, "a", "b")
	for i := range 8 { // the drives a listing reads rotate
		for _, delimiter := range []string{"", "/"} {
			var got []string
			marker := ""
			for {
				l, err := tp.ListObjects(t.Context(), "bk", "", marker, delimiter, 1)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range l.Objects {
					got = append(got, o.Name)
				}
				if !l.IsTruncated {
					break
				}
				marker = l.NextMarker
			}
			if fmt.Sprint(got) != "[c d]" {
				t.Fatalf("listing %d (delimiter %q) after deletes one drive missed: %v, want [c d]", i, delimiter, got)
			}
		}
	}
}

// A listing reads Layout.ListDrives drives of a set, and that is enough: a
// write that reached only write quorum (the other drives offline, then
// back without it) is listed whichever drives the listing reads, with its
// versions.
func TestListingSeesWritesOnlyWriteQuorumHolds(t *testing.T) {
	for _, c := range []struct{ size, parity, list int }{{4, 2, 2}, {5, 2, 3}, {6, 2, 3}, {8, 4, 4}, {6, 3, 3}} {
		l, err := NewLayout(c.size, c.parity)
		if err != nil {
			t.Fatal(err)
		}
		if l.ListDrives() != c.list {
			t.Fatalf("%d+%d: a listing reads %d drives, want %d", l.Data, l.Parity, l.ListDrives(), c.list)
		}
		tp := newTestPool(t, 1, c.size, c.parity)
		tp.put(t, "before", []byte("before"))
		set := tp.Sets()[0]
		away := c.size - l.WriteQuorum()
		for i := range away {
			set.SetDrive(i, nil)
		}
		tp.put(t, "during", []byte("during"))
		for i := range away {
			set.SetDrive(i, tp.drives[i])
		}
		for i := range 2 * c.size { // the drives a listing reads rotate
			res, err := tp.ListObjects(t.Context(), "bk", "", "", "", 100)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range res.Objects {
				names = append(names, o.Name)
			}
			if fmt.Sprint(names) != "[before during]" {
				t.Fatalf("%d+%d, listing %d after a write %d drives missed: %v", l.Data, l.Parity, i, away, names)
			}
		}
	}
}

// deleteWhileAway deletes keys while the set's drive at pos is offline,
// then puts the drive back: it still holds them. It returns the drive.
func deleteWhileAway(t *testing.T, tp *testPool, set *Set, pos int, keys ...string) Drive {
	t.Helper()
	away := set.Drives()[pos]
	set.SetDrive(pos, nil)
	for _, k := range keys {
		if _, err := tp.DeleteObject(t.Context(), "bk", k, nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatal(err)
		}
	}
	set.SetDrive(pos, away)
	return away
}

// listedVersions lists every version of bucket bk as key@etag, newest
// first within a key.
func listedVersions(t *testing.T, tp *testPool) []string {
	t.Helper()
	l, err := tp.ListObjectVersions(t.Context(), "bk", "", "", nil, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range l.Objects {
		got = append(got, o.Name+"@"+o.ETag)
	}
	return got
}

// A version delete that one drive missed (offline then back, not yet
// healed) does not bring the version back in version listings, whichever
// drives a listing reads; nor does a whole key deleted that way.
func TestVersionListingAfterVersionDeletesADriveMissed(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	if err := tp.SetBucketVersioning(t.Context(), "bk", "Enabled"); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string) objlayer.ObjectInfo {
		info, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader([]byte(body)), int64(len(body)),
			objlayer.PutOptions{VersionID: uuid.Must(uuid.NewV7())})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	old, kept, gone := put("k", "old"), put("k", "kept"), put("gone", "gone")
	set := tp.Sets()[0]
	away := set.Drives()[3]
	set.SetDrive(3, nil)
	for _, v := range []objlayer.ObjectInfo{old, gone} {
		if _, err := tp.DeleteObject(t.Context(), "bk", v.Name, &v.VersionID, objlayer.DeleteVersioned); err != nil {
			t.Fatal(err)
		}
	}
	set.SetDrive(3, away)
	if vs, err := away.Versions(t.Context(), "bk", "k"); err != nil || len(vs) != 2 {
		t.Fatalf("the drive that missed the delete should still hold both versions: %d, %v", len(vs), err)
	}
	want := fmt.Sprint([]string{"k@" + kept.ETag})
	for i := range 8 { // the drives a listing reads rotate
		if got := fmt.Sprint(listedVersions(t, tp)); got != want {
			t.Fatalf("version listing %d after version deletes one drive missed: %v, want %v", i, got, want)
		}
	}
}

// A write that failed can leave its record on a drive that answered too
// late to be rolled back. Neither listing shows that record, whichever
// drives it reads: a GET would not return it (one drive of four holds
// it), in a versioned bucket and in one without versioning (a null
// version's newer record).
func TestListingsLeaveOutAFailedWritesRecord(t *testing.T) {
	for _, versioning := range []string{"Enabled", ""} {
		t.Run("versioning "+versioning, func(t *testing.T) {
			tp := newTestPool(t, 1, 4, 2)
			if versioning != "" {
				if err := tp.SetBucketVersioning(t.Context(), "bk", versioning); err != nil {
					t.Fatal(err)
				}
			}
			var opts objlayer.PutOptions
			if versioning != "" {
				opts.VersionID = uuid.Must(uuid.NewV7())
			}
			v, err := tp.PutObject(t.Context(), "bk", "k", bytes.NewReader([]byte("committed")), 9, opts)
			if err != nil {
				t.Fatal(err)
			}
			late := tp.Sets()[0].Drives()[2]
			rec, err := late.GetVersion(t.Context(), "bk", "k", nil)
			if err != nil {
				t.Fatal(err)
			}
			left := *rec
			left.ModTime++
			left.ETag = "0123456789abcdef0123456789abcdef"
			if versioning != "" {
				left.VersionID = uuid.Must(uuid.NewV7())
			}
			if _, err := late.PutVersion(t.Context(), "bk", "k", &left, drive.NotStaged); err != nil {
				t.Fatal(err)
			}
			if _, err := tp.StatObject(t.Context(), "bk", "k", nil); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprint([]string{"k@" + v.ETag})
			for i := range 8 { // the drives a listing reads rotate
				if got := fmt.Sprint(listedVersions(t, tp)); got != want {
					t.Fatalf("version listing %d with a failed write's record on one drive: %v, want %v", i, got, want)
				}
				l, err := tp.ListObjects(t.Context(), "bk", "", "", "", 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(l.Objects) != 1 || l.Objects[0].ETag != v.ETag {
					t.Fatalf("listing %d with a failed write's record on one drive: %+v, want k@%s", i, l.Objects, v.ETag)
				}
			}
		})
	}
}

// Versions written while a drive was offline (back, not yet healed) are
// all listed, in order, page by page, whichever drives a listing reads:
// each is doubtful where the listing reads that drive, and its GET finds
// it on the others.
func TestVersionListingOfVersionsADriveMissed(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	if err := tp.SetBucketVersioning(t.Context(), "bk", "Enabled"); err != nil {
		t.Fatal(err)
	}
	var want []string
	add := func(key string) {
		info, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader([]byte(key)), int64(len(key)),
			objlayer.PutOptions{VersionID: uuid.Must(uuid.NewV7())})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, key+"@"+info.ETag)
	}
	add("a")
	restore := tp.offline(t, 1)
	for range 30 {
		add("b")
	}
	if _, err := tp.DeleteObject(t.Context(), "bk", "b", nil, objlayer.DeleteVersioned); err != nil {
		t.Fatal(err)
	}
	restore()
	want = append(want[:1], append([]string{"b@"}, want[1:]...)...) // the marker is b's newest
	slices.Reverse(want[2:])                                        // b's versions newest first
	for i := range 8 {                                              // the drives a listing reads rotate
		var got []string
		for _, o := range versionPages(t, tp, 7, nil) {
			got = append(got, o.Name+"@"+o.ETag)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("version listing %d of versions a drive missed:\n got %v\nwant %v", i, got, want)
		}
	}
	// Those listings queued b to be healed: a healer (which never heard
	// of the writes that missed the drive) copies its versions onto it,
	// and the listings stop paying for the disagreement.
	back := tp.Sets()[0].Drives()[1]
	if vs, err := back.Versions(t.Context(), "bk", "b"); err == nil && len(vs) > 0 {
		t.Fatalf("the drive that was away holds %d versions of b before any heal", len(vs))
	}
	defer func(after time.Duration) { listHealAfter = after }(listHealAfter)
	listHealAfter = 0 // the versions were just written
	h := NewHealer(tp.Pool, HealerOptions{QueueSize: 10, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go h.Run(ctx)
	waitUntil(t, func() bool {
		// Listings rotate over the drives: some read the one that was away.
		if _, err := tp.ListObjectVersions(t.Context(), "bk", "", "", nil, "", 1000); err != nil {
			t.Fatal(err)
		}
		vs, err := back.Versions(t.Context(), "bk", "b")
		return err == nil && len(vs) == 31
	})
}

// A listing queues an object whose drives disagree only about versions
// older than listHealAfter: a write still committing is not healed under
// it.
func TestSettledDisagreement(t *testing.T) {
	now := time.Now()
	recent := &drive.Record{ModTime: now.Add(-time.Second).UnixNano()}
	old := &drive.Record{ModTime: now.Add(-time.Minute).UnixNano()}
	if settledDisagreement([]*drive.Record{recent}, now) || !settledDisagreement([]*drive.Record{recent, old}, now) {
		t.Fatal("a listing queues an object for the versions older than listHealAfter only")
	}
}

// The null version made after a marker version is not listed again when
// that marker is deleted between pages: it is placed by its time.
func TestVersionListingAfterItsMarkerVersionIsDeletedBeforeANullVersion(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	if err := tp.SetBucketVersioning(t.Context(), "bk", "Enabled"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		info, err := tp.PutObject(t.Context(), "bk", "n", strings.NewReader(fmt.Sprint(i)), 1, objlayer.PutOptions{VersionID: uuid.Must(uuid.NewV7())})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{objlayer.FormatVersionID(info.VersionID)}, ids...)
	}
	time.Sleep(2 * time.Millisecond) // the null version's time after the IDs'
	if err := tp.SetBucketVersioning(t.Context(), "bk", "Suspended"); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.PutObject(t.Context(), "bk", "n", strings.NewReader("null"), 4, objlayer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	page, err := tp.ListObjectVersions(t.Context(), "bk", "", "", nil, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 2 || objlayer.FormatVersionID(page.Objects[0].VersionID) != "null" || page.NextVersionMarker != ids[0] {
		t.Fatalf("first page: %+v, next %s; want the null version and %s", page.Objects, page.NextVersionMarker, ids[0])
	}
	marker, _ := objlayer.ParseVersionID(page.NextVersionMarker)
	if _, err := tp.DeleteObject(t.Context(), "bk", "n", &marker, objlayer.DeleteVersioned); err != nil {
		t.Fatal(err)
	}
	page, err = tp.ListObjectVersions(t.Context(), "bk", "", "n", &marker, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range page.Objects {
		got = append(got, objlayer.FormatVersionID(o.VersionID))
	}
	if fmt.Sprint(got) != fmt.Sprint(ids[1:]) {
		t.Fatalf("after the marker was deleted: %v, want %v", got, ids[1:])
	}
}

// A version listing whose marker version is deleted between its pages
// goes on with the versions made before it: none is skipped, none listed
// twice. (It used to skip the rest of the marker key's versions.)
func TestVersionListingAfterItsMarkerVersionIsDeleted(t *testing.T) {
	for _, also := range []bool{false, true} { // the marker alone; the marker and the version after it
		t.Run(fmt.Sprint("and the next ", also), func(t *testing.T) {
			tp := newTestPool(t, 1, 4, 2)
			if err := tp.SetBucketVersioning(t.Context(), "bk", "Enabled"); err != nil {
				t.Fatal(err)
			}
			var want []string // key@version, in listing order
			for _, k := range []struct {
				key string
				n   int
			}{{"a", 3}, {"k", 10}, {"z", 2}} {
				var vs []string
				for i := range k.n {
					body := fmt.Sprint(i)
					info, err := tp.PutObject(t.Context(), "bk", k.key, strings.NewReader(body), int64(len(body)),
						objlayer.PutOptions{VersionID: uuid.Must(uuid.NewV7())})
					if err != nil {
						t.Fatal(err)
					}
					vs = append(vs, k.key+"@"+objlayer.FormatVersionID(info.VersionID))
				}
				slices.Reverse(vs)
				want = append(want, vs...)
			}
			deleteVersion := func(kv string) {
				key, v, _ := strings.Cut(kv, "@")
				id, err := objlayer.ParseVersionID(v)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tp.DeleteObject(t.Context(), "bk", key, &id, objlayer.DeleteVersioned); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			pages := versionPages(t, tp, 4, func(keyMarker string, versionMarker [16]byte) {
				marker := keyMarker + "@" + objlayer.FormatVersionID(versionMarker)
				deleteVersion(marker)
				if next := slices.Index(want, marker) + 1; also && next < len(want) && strings.HasPrefix(want[next], keyMarker+"@") {
					deleteVersion(want[next]) // never listed, so not wanted
					want = slices.Delete(want, next, next+1)
				}
			})
			for _, o := range pages {
				got = append(got, o.Name+"@"+objlayer.FormatVersionID(o.VersionID))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("version listing with its marker versions deleted between pages:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// versionPages lists every version of bucket bk, pageSize a page, and
// calls between, when given, with each page's markers before the next
// page is asked for.
func versionPages(t *testing.T, tp *testPool, pageSize int, between func(keyMarker string, versionMarker [16]byte)) []objlayer.ObjectInfo {
	t.Helper()
	var all []objlayer.ObjectInfo
	var keyMarker string
	var versionMarker *[16]byte
	for {
		l, err := tp.ListObjectVersions(t.Context(), "bk", "", keyMarker, versionMarker, "", pageSize)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l.Objects...)
		if !l.IsTruncated {
			return all
		}
		id, err := objlayer.ParseVersionID(l.NextVersionMarker)
		if err != nil {
			t.Fatal(err)
		}
		keyMarker, versionMarker = l.NextMarker, &id
		if between != nil {
			between(keyMarker, id)
		}
	}
}
