package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/engine"
)

// declaredBuckets turns spec.buckets into what the engine client applies
// and what status.buckets reports once it has; a rule naming a
// notification target the tenant does not have is an error, and its
// bucket is left out (the others are returned).
func declaredBuckets(t *v1.Tenant) ([]engine.Bucket, []v1.BucketStatus, error) {
	buckets := make([]engine.Bucket, 0, len(t.Spec.Buckets))
	applied := make([]v1.BucketStatus, 0, len(t.Spec.Buckets))
	var errs []error
	for i, b := range t.Spec.Buckets {
		eb := engine.Bucket{Name: b.Name, Versioning: b.Versioning}
		st := v1.BucketStatus{Name: b.Name, Versioning: b.Versioning}
		if l := b.ObjectLock; l != nil {
			eb.ObjectLock = &engine.ObjectLock{Mode: l.Mode, Days: l.Days}
			st.ObjectLock, st.Versioning = "on", "Enabled"
			if l.Mode != "" {
				st.ObjectLock = fmt.Sprintf("%s %d days", l.Mode, l.Days)
			}
		}
		if e := b.Encryption; e != nil {
			eb.Encryption = &engine.Encryption{Algorithm: e.Algorithm, KMSKeyID: e.KMSKeyID}
			st.Encryption = e.Algorithm
			if e.KMSKeyID != "" {
				st.Encryption += " (key " + e.KMSKeyID + ")"
			}
		}
		if lc := b.Lifecycle; lc != nil {
			eb.Lifecycle = &engine.Lifecycle{ExpirationDays: lc.ExpirationDays, NoncurrentDays: lc.NoncurrentVersionExpirationDays,
				AbortUploadDays: lc.AbortIncompleteMultipartUploadDays}
			var parts []string
			for _, p := range []struct {
				what string
				days *int32
			}{{"expire after", lc.ExpirationDays}, {"noncurrent versions after", lc.NoncurrentVersionExpirationDays}, {"abort uploads after", lc.AbortIncompleteMultipartUploadDays}} {
				if p.days != nil {
					parts = append(parts, fmt.Sprintf("%s %d days", p.what, *p.days))
				}
			}
			st.Lifecycle = strings.Join(parts, ", ")
		}
		n, err := bucketNotifications(b.Notifications, t, fmt.Sprintf("spec.buckets[%d].notifications", i))
		if err != nil {
			errs = append(errs, err) // this bucket waits; the others are applied
			continue
		}
		if eb.Notifications = n; n != nil {
			st.Notifications = "none"
			if len(n.Rules) > 0 {
				var to []string
				for _, r := range b.Notifications.Rules {
					if !slices.Contains(to, r.Target) {
						to = append(to, r.Target)
					}
				}
				rules := "rules"
				if len(n.Rules) == 1 {
					rules = "rule"
				}
				st.Notifications = fmt.Sprintf("%d %s to %s", len(n.Rules), rules, strings.Join(to, ", "))
			}
		}
		buckets = append(buckets, eb)
		applied = append(applied, st)
	}
	return buckets, applied, errors.Join(errs...)
}
