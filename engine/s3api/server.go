// Package s3api is Strata's S3 front end: it turns an HTTP request into an
// S3 operation, authenticates it (engine/s3sig), authorises it (IAM
// grants, bucket policies, ACLs, public access blocks), runs it against
// the object layer's contract (engine/objlayer) and answers S3's documents
// and errors (engine/s3err). `strata server` serves it over the erasure
// layer and `strata gateway` over the POSIX layer: one S3 behaviour for
// both. The HTTP server under it (connections, timeouts, limits) is
// engine/s3http; the S3 rules it applies are engine/s3rules.
package s3api

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/iamapi"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3http"
)

// Users are the tenant's principals besides root: their secrets, their
// identity policies, and how ACLs name them. engine/iam implements it.
type Users interface {
	// Secret returns a user's secret key.
	Secret(access string) (string, bool)
	// IdentityAllows reports whether a user's grants allow an action
	// ("s3:GetObject") in a bucket ("": account-level actions).
	IdentityAllows(access, action, bucket string) bool
	// IsAdmin reports a user with root's rights.
	IsAdmin(access string) bool
	// CanCreateBuckets reports whether a user may create buckets.
	CanCreateBuckets(access string) bool
	// CanList reports whether a user sees a bucket it does not own in
	// ListBuckets.
	CanList(access, bucket string) bool
	// Identity and AccessOf map access keys to canonical user IDs.
	Identity(access string) (id, displayName string, ok bool)
	AccessOf(id string) (access string, ok bool)
	// AccountOf says which IAM account a user's key roots (none: the
	// user belongs to the tenant's); RootOf is an account root's key.
	AccountOf(access string) (account string, root bool)
	RootOf(account string) (access string, ok bool)
}

// KeyRing gives the master keys of SSE-S3 and SSE-KMS (engine/kms).
type KeyRing interface {
	Key(id string) ([]byte, bool)
	Default() string
}

// Observer is told about every request (metrics).
type Observer interface {
	// Begin records a request started.
	Begin()
	// Observe records one answered request: its S3 operation, status,
	// duration, and bytes received and sent.
	Observe(op string, status int, d time.Duration, in, out int64)
	// FirstByte records how long a GET took to its first body byte.
	FirstByte(d time.Duration)
}

// Config configures the front end.
type Config struct {
	// Region answered to clients; default us-east-1.
	Region string
	// RootAccess and RootSecret are the root credentials.
	RootAccess, RootSecret string
	// Users are the other principals (nil: root only).
	Users Users
	// Keys are the master keys of SSE-S3 and SSE-KMS; nil refuses those
	// modes (SSE-C needs none).
	Keys KeyRing
	// Directory is the tenant's IAM directory and IAM its API (iam.go);
	// nil: neither (POST / stays MethodNotAllowed).
	Directory Directory
	IAM       *iamapi.Handler
	// Account is the tenant's own IAM account ID, shown in its ARNs (""
	// by default, as Ceph shows users without an account).
	Account string
	// STS is the STS API (nil: none); Sessions open its session tokens.
	STS      *iamapi.STS
	Sessions *iam.Sessions
	// Observer is told about requests; nil: no one.
	Observer Observer
	// Notifier queues bucket notifications (nil: none, and every
	// configuration naming a target is refused).
	Notifier Notifier
	// LifecycleDay, for tests only, shortens the day of lifecycle rules;
	// 0 is S3's day.
	LifecycleDay time.Duration
	// MaxPutSize, for tests only, lowers the largest object a single PUT
	// may write (0: S3's 5 GiB, objlayer.MaxPutSize); a replication
	// remote's PUT of a replica may be larger (a multipart version).
	MaxPutSize int64
	// MaxDocument bounds request bodies that are not object data (XML and
	// JSON documents); default 4 MiB.
	MaxDocument int64
	// DataSlots bounds the requests moving more object data than an inline
	// object holds, at once (PUT, UploadPart, copies, GET of the erasure
	// layer's objects), so their buffers fit the process's memory
	// (memlimit.PlanFor); 0 is no bound. Others wait up to DataSlotWait
	// (default DefaultDataSlotWait), then get SlowDown.
	DataSlots    int
	DataSlotWait time.Duration
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// DefaultMaxDocument bounds the documents a request may send: 10,000
// parts of a completion fit in about 1.3 MiB.
const DefaultMaxDocument = 4 << 20

// ReservedBucket is the bucket name the process's own endpoints
// (/strata/health, /strata/metrics, /strata/admin...) occupy.
const ReservedBucket = "strata"

// Server is the S3 front end over one object layer.
type Server struct {
	layer objlayer.Layer
	cfg   Config
	ids   identities
	// slots holds a token per request holding a data slot (nil: no bound).
	slots chan struct{}
	// identityPolicies are directory users' policies parsed, by document
	// (*s3rules.BucketPolicy, or the error that refused it).
	identityPolicies sync.Map
	// delivered are replication events found gone (eventDelivered).
	delivered deliveredEvents
}

// New returns the front end over layer.
func New(layer objlayer.Layer, cfg Config) *Server {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.MaxDocument <= 0 {
		cfg.MaxDocument = DefaultMaxDocument
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.DataSlotWait <= 0 {
		cfg.DataSlotWait = DefaultDataSlotWait
	}
	s := &Server{layer: layer, cfg: cfg, ids: identities{users: cfg.Users, root: cfg.RootAccess, dir: cfg.Directory, account: cfg.Account}}
	if cfg.DataSlots > 0 {
		s.slots = make(chan struct{}, cfg.DataSlots)
	}
	return s
}

var _ s3http.Handler = (*Server)(nil)

// ServeS3 serves one S3 request.
func (s *Server) ServeS3(w http.ResponseWriter, hr *s3http.Request) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.Begin()
	}
	r := s.newRequest(w, hr)
	defer r.finish()
	r.serve()
}

// identities names principals in ACLs and policies: the users', and root
// by its access key; and the IAM principals policies name by ARN.
type identities struct {
	users   Users
	root    string
	dir     Directory
	account string
}

// KnownPrincipal reports whether an IAM ARN or account ID names a
// principal of the tenant: an account (its ID or root ARN), or a user or
// role of the directory.
func (i identities) KnownPrincipal(arn string) bool {
	rest, isARN := strings.CutPrefix(arn, "arn:aws:iam::")
	if !isARN {
		// A role session, arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION.
		if rest, isARN = strings.CutPrefix(arn, "arn:aws:sts::"); isARN && !strings.Contains(rest, ":assumed-role/") {
			return false
		}
	}
	acct, what, _ := strings.Cut(rest, ":")
	if !isARN {
		acct, what = arn, "root"
	}
	known := acct == i.account
	if !known && i.users != nil {
		_, known = i.users.RootOf(acct)
	}
	if !known {
		return false
	}
	if acct == i.account {
		acct = ""
	}
	kind, name, _ := strings.Cut(what, "/")
	if kind == "assumed-role" {
		// The role's sessions (Ceph writes them arn:aws:iam::, AWS
		// arn:aws:sts::), whatever the session's name.
		role, session, ok := strings.Cut(name, "/")
		if !ok || session == "" || i.dir == nil {
			return false
		}
		_, err := i.dir.Get(iam.KindRole, acct, role)
		return err == nil
	}
	switch {
	case what == "root":
		return true
	case i.dir == nil || kind != "user" && kind != "role":
		return false
	}
	e, err := i.dir.Get(iam.Kind(kind), acct, name[strings.LastIndex(name, "/")+1:])
	return err == nil && e.Path+e.Name == "/"+name
}

func (i identities) Identity(access string) (string, string, bool) {
	if i.users != nil {
		if id, name, ok := i.users.Identity(access); ok {
			return id, name, true
		}
	}
	return access, access, access == i.root
}

func (i identities) AccessOf(id string) (string, bool) {
	if i.users != nil {
		if a, ok := i.users.AccessOf(id); ok {
			return a, true
		}
	}
	return id, id == i.root
}
