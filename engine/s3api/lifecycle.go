package s3api

import (
	"time"

	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3rules"
)

// The x-amz-expiration header of current versions: when a rule of the
// bucket expires a version, answers about it say when.

// VersionFacts is what the lifecycle rules look at in a version as the
// layer keeps it (an encrypted one: its plaintext size); the lifecycle
// worker's lifecycle.FactsFunc.
func VersionFacts(info objlayer.ObjectInfo, now time.Time) lifecycle.Version {
	info = plainInfo(info)
	v := lifecycle.Version{ModTime: info.ModTime, Size: info.Size, DeleteMarker: info.DeleteMarker}
	v.Tags = s3rules.DecodeTagQuery(info.Meta[objlayer.MetaTagging])
	ret := s3rules.StoredRetention(info.Meta[objlayer.MetaRetention])
	v.Locked = info.Meta[objlayer.MetaLegalHold] == "ON" || ret.Protects(now)
	return v
}

// setExpiration sets x-amz-expiration on an answer about the current
// version of a key, when a rule of its bucket expires it.
func (r *request) setExpiration(bk objlayer.BucketInfo, info objlayer.ObjectInfo) {
	rules := lifecycle.Cached(bk.Lifecycle)
	if rules == nil || !rules.HasCurrentExpiry() {
		return
	}
	day := r.s.cfg.LifecycleDay
	if day <= 0 {
		day = lifecycle.Day
	}
	if h := rules.ExpirationHeader(info.Name, VersionFacts(info, r.now), day); h != "" {
		r.setHeader("X-Amz-Expiration", h)
	}
}
