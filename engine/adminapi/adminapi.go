// Package adminapi is the wire format of the engine's admin API
// (/strata/admin/v1/...): the documents a strata process answers and how a
// client signs its requests. Both sides import it, the engine's admin
// handlers (engine/admin) and the operator's client (engine/adminclient),
// so they agree on the shapes by construction, and the operator links
// nothing of the engine but this and the client.
package adminapi

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Prefix of the admin API.
const Prefix = "/strata/admin/v1/"

// EmptySHA256 is the payload hash of a request without a body, the only
// kind the admin API takes.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Sign signs req (without a body) for the admin API with the root
// credentials: AWS Signature Version 4, so the secret never crosses the
// wire and a signed request is good only around its time.
func Sign(req *http.Request, access, secret string, now time.Time) error {
	req.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
	return v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: access, SecretAccessKey: secret},
		req, EmptySHA256, "s3", "us-east-1", now)
}

// Info describes a node's view of the deployment.
type Info struct {
	Version         string     `json:"version"`
	ProtocolVersion int        `json:"protocolVersion"` // internode protocol; 0 for the gateway, which speaks none
	DeploymentID    string     `json:"deploymentID"`
	Mode            string     `json:"mode"`
	Uptime          string     `json:"uptime"`
	Pools           []PoolInfo `json:"pools"`
	Capacity        Capacity   `json:"capacity"`
}

// PoolInfo is one server pool.
type PoolInfo struct {
	Name    string      `json:"name"`
	State   string      `json:"state"`
	Sets    int         `json:"sets"`
	SetSize int         `json:"setSize"`
	Parity  int         `json:"parity"`
	Drives  []DriveInfo `json:"drives"`
}

// DriveInfo is one drive.
type DriveInfo struct {
	Endpoint   string `json:"endpoint"`
	Set        int    `json:"set"`
	Index      int    `json:"index"`
	State      string `json:"state"`
	TotalBytes uint64 `json:"totalBytes"`
	UsedBytes  uint64 `json:"usedBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
}

// Capacity sums the drives: raw bytes, and usable bytes after parity.
type Capacity struct {
	TotalBytes  uint64 `json:"totalBytes"`
	UsedBytes   uint64 `json:"usedBytes"`
	FreeBytes   uint64 `json:"freeBytes"`
	UsableBytes uint64 `json:"usableBytes"`
}

// DecommissionStatus is a pool's decommission progress.
type DecommissionStatus struct {
	Pool         string     `json:"pool"`
	State        string     `json:"state"`
	Done         bool       `json:"done"`
	ObjectsMoved int64      `json:"objectsMoved"`
	BytesMoved   int64      `json:"bytesMoved"`
	Sets         []SetDrain `json:"sets"`
}

// SetDrain is one set's drain.
type SetDrain struct {
	Set     int    `json:"set"`
	Node    string `json:"node"`
	Objects int64  `json:"objectsMoved"`
	Bytes   int64  `json:"bytesMoved"`
	Done    bool   `json:"done"`
	Error   string `json:"error,omitempty"`
}

// UserInfo is a user of the users file as the admin API lists it: never
// its secret key.
type UserInfo struct {
	AccessKey string   `json:"accessKey"`
	Policy    string   `json:"policy"`
	Buckets   []string `json:"buckets,omitempty"` // empty: every bucket
}

// HealStatus is a snapshot of a server's healing: queue, counters of what
// was repaired, the integrity scan and drive rebuilds.
type HealStatus struct {
	QueueLength    int64    `json:"queueLength"` // queued or being healed now
	Deferred       int64    `json:"deferred"`
	DeferredSample []string `json:"deferredSample,omitempty"`
	Queued         int64    `json:"queued"`
	Dropped        int64    `json:"dropped"`
	ObjectsHealed  int64    `json:"objectsHealed"`
	ShardsHealed   int64    `json:"shardsHealed"`
	BytesHealed    int64    `json:"bytesHealed"`
	Purged         int64    `json:"danglingPurged"`
	Failed         int64    `json:"failed"`
	ScanCycles     int64    `json:"scanCycles"`
	ScanObjects    int64    `json:"scanObjects"`
	Scanning       bool     `json:"scanning"`
	// WritesBehind counts writes that finished at write quorum while a
	// slow drive still had work for them, which went on in the background.
	WritesBehind int64            `json:"writesBehind"`
	LastScanEnd  *time.Time       `json:"lastScanEnd,omitempty"`
	Drives       []DriveHealState `json:"drives,omitempty"`
}

// DriveHealState reports one drive rebuild.
type DriveHealState struct {
	Set     int       `json:"set"`
	Index   int       `json:"index"`
	Started time.Time `json:"started"`
	Objects int64     `json:"objectsHealed"`
	Done    bool      `json:"done"`
	Error   string    `json:"error,omitempty"`
}

// Quota is a bucket's hard quota; zero is no limit on that figure.
type Quota struct {
	Bytes   int64 `json:"bytes"`
	Objects int64 `json:"objects"`
}

// BucketUsage is a bucket's usage (its versions' bytes and number, delete
// markers not counted) and its quota (nil for none).
type BucketUsage struct {
	Bucket  string `json:"bucket"`
	Bytes   int64  `json:"bytes"`
	Objects int64  `json:"objects"`
	Quota   *Quota `json:"quota,omitempty"`
}

// ReplicationStatus is bucket replication as one node sees it: its
// remotes' backlogs and, per source bucket with a configuration, the
// rules and what this node replicated since it started (each node
// delivers the events of the writes it took).
type ReplicationStatus struct {
	Remotes []ReplicationRemote `json:"remotes"`
	Buckets []BucketReplication `json:"buckets"`
}

// ReplicationRemote is one remote (a target of type s3).
type ReplicationRemote struct {
	ARN      string `json:"arn"`
	Endpoint string `json:"endpoint"`
	// Backlog is the changes waiting to reach it; OldestSeconds the age
	// of the oldest (0: none).
	Backlog       int64   `json:"backlog"`
	OldestSeconds float64 `json:"oldestSeconds"`
}

// BucketReplication is one source bucket's replication.
type BucketReplication struct {
	Bucket string `json:"bucket"`
	// Role is the remote its configuration names; Rules its rules, as
	// "ID: prefix -> destination (Enabled|Disabled)".
	Role  string   `json:"role"`
	Rules []string `json:"rules"`
	// Replicated, Failed (not retried: marked FAILED), Retried (attempts
	// that will be made again) and Bytes count this node's work since it
	// started; LastLagSeconds is the lag of the last change replicated.
	Replicated     int64      `json:"replicated"`
	Failed         int64      `json:"failed"`
	Retried        int64      `json:"retried"`
	Bytes          int64      `json:"bytes"`
	LastLagSeconds float64    `json:"lastLagSeconds"`
	LastAt         *time.Time `json:"lastAt,omitempty"`
}

// ResyncResult says what a resync queued: the versions of the bucket to
// be copied again (all but replicas and those COMPLETED).
type ResyncResult struct {
	Bucket   string `json:"bucket"`
	Queued   int64  `json:"queued"`
	Versions int64  `json:"versions"`
}
