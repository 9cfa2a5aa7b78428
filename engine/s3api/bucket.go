package s3api

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// Buckets: list, create, head, delete, location.

type bucketEntry struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
	BucketRegion string `xml:"BucketRegion"`
}

type listBucketsResult struct {
	XMLName           xml.Name      `xml:"ListAllMyBucketsResult"`
	XMLNS             string        `xml:"xmlns,attr"`
	Owner             s3rules.Owner `xml:"Owner"`
	Buckets           []bucketEntry `xml:"Buckets>Bucket"`
	ContinuationToken string        `xml:"ContinuationToken,omitempty"`
	Prefix            string        `xml:"Prefix,omitempty"`
}

// listBuckets lists the buckets the principal sees, in name order, with
// prefix and pagination: all of them for root, a user's own and those its
// grants name for a user.
func listBuckets(r *request) error {
	maxBuckets := 10000
	if v := r.q("max-buckets"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return s3err.InvalidArgumentNamed("Argument max-buckets must be an integer between 1 and 10000.", "max-buckets", v)
		}
		maxBuckets = n
	}
	prefix, token := r.q("prefix"), r.q("continuation-token")
	buckets, err := r.s.layer.ListBuckets(r.ctx)
	if err != nil {
		return err
	}
	out := listBucketsResult{XMLNS: xmlNS, Owner: s3rules.Named(r.access, r.s.ids), Prefix: prefix, Buckets: []bucketEntry{}}
	for _, bk := range buckets {
		if !servableBucketName(bk.Name) {
			continue // the process's own (the IAM directory's)
		}
		if !r.root && r.s.ownerOf(bk) != r.access && (r.s.cfg.Users == nil || !r.s.cfg.Users.CanList(r.access, bk.Name)) {
			continue
		}
		if !strings.HasPrefix(bk.Name, prefix) || token != "" && bk.Name <= token {
			continue
		}
		if len(out.Buckets) == maxBuckets {
			out.ContinuationToken = out.Buckets[len(out.Buckets)-1].Name
			break
		}
		out.Buckets = append(out.Buckets, bucketEntry{Name: bk.Name, CreationDate: isoTime(bk.Created), BucketRegion: r.s.cfg.Region})
	}
	return r.writeXML(http.StatusOK, out)
}

// createBucketConfiguration is CreateBucket's optional document.
type createBucketConfiguration struct {
	LocationConstraint *string `xml:"LocationConstraint"`
	Tags               []struct {
		Key   string `xml:"Key"`
		Value string `xml:"Value"`
	} `xml:"Tags>Tag"`
}

// createBucket creates a bucket owned by its creator, with the ACL, object
// ownership, tags and object lock the request asks for. Creating a bucket
// one already owns answers success in us-east-1 (as S3 does there) and
// BucketAlreadyOwnedByYou elsewhere; another owner's bucket answers
// BucketAlreadyExists.
//
// A request that names no object ownership gets none, so ACLs work, as S3
// before 2023; BucketOwnerEnforced is one request away.
func createBucket(r *request) error {
	if r.bucket == ReservedBucket {
		return s3err.Bucket(s3err.InvalidBucketName, r.bucket).With("The bucket name " + ReservedBucket + " is reserved for the server's own endpoints (/" + ReservedBucket + "/...).")
	}
	if !s3rules.ValidBucketName(r.bucket) {
		return s3err.Bucket(s3err.InvalidBucketName, r.bucket)
	}
	ownership := r.h("X-Amz-Object-Ownership")
	switch ownership {
	case "", "BucketOwnerEnforced", "BucketOwnerPreferred", "ObjectWriter":
	default:
		return s3err.InvalidArgumentNamed("Invalid x-amz-object-ownership header: "+ownership, "x-amz-object-ownership", ownership)
	}
	creator := r.access
	req := s3rules.ReadACLRequest(r.h, nil)
	acl, err := req.Build(s3rules.ACLTarget{Owner: creator}, r.s.ids)
	if err != nil {
		return err
	}
	if acl == nil {
		a := s3rules.OwnerOnly(creator)
		acl = &a
	}
	if ownership == "BucketOwnerEnforced" && !acl.OnlyOwnerFullControl() {
		return s3err.InvalidBucketAclWithOwnership
	}
	body, err := r.document()
	if err != nil {
		return err
	}
	var conf createBucketConfiguration
	if len(strings.TrimSpace(string(body))) > 0 {
		if xml.Unmarshal(body, &conf) != nil {
			return s3err.MalformedXML
		}
		// Our own region is accepted even when it is us-east-1 (which S3
		// refuses): clients such as minio-py send it on every CreateBucket.
		if lc := conf.LocationConstraint; lc != nil && *lc != r.s.cfg.Region {
			return s3err.InvalidLocationConstraint.Field("LocationConstraint", *lc)
		}
	}
	var tags map[string]string
	if len(conf.Tags) > 0 {
		tags = map[string]string{}
		for _, t := range conf.Tags {
			tags[t.Key] = t.Value
		}
	}
	if existing, err := r.s.layer.StatBucket(r.ctx, r.bucket); err == nil {
		return r.bucketExists(r.s.ownerOf(existing), creator)
	}
	info := objlayer.BucketInfo{Name: r.bucket, Owner: creator, Ownership: ownership, Tags: tags, ACL: acl.Encode()}
	if strings.EqualFold(r.h("X-Amz-Bucket-Object-Lock-Enabled"), "true") {
		// Object lock needs versioning, which it turns on for good.
		now := r.now.UTC()
		lock, err := s3rules.ParseLockConfiguration([]byte(`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`), now)
		if err != nil {
			return err
		}
		info.ObjectLock, info.Versioning = lock, "Enabled"
	}
	err = r.s.layer.CreateBucket(r.ctx, info)
	if errors.Is(err, objlayer.ErrBucketExists) {
		// Created by someone else in the meantime.
		return s3err.Bucket(s3err.BucketAlreadyExists, r.bucket)
	}
	if err != nil {
		return err
	}
	r.setHeader("Location", "/"+r.bucket)
	return r.empty(http.StatusOK)
}

// bucketExists is S3's answer to creating a bucket that exists: success
// for its owner in us-east-1 (S3 keeps that legacy there),
// BucketAlreadyOwnedByYou for its owner elsewhere, BucketAlreadyExists for
// anyone else.
func (r *request) bucketExists(owner, creator string) error {
	switch {
	case owner != creator:
		return s3err.Bucket(s3err.BucketAlreadyExists, r.bucket)
	case r.s.cfg.Region == "us-east-1":
		r.setHeader("Location", "/"+r.bucket)
		return r.empty(http.StatusOK)
	}
	return s3err.Bucket(s3err.BucketAlreadyOwnedByYou, r.bucket)
}

// headBucket reports that a bucket exists (authorize found it).
func headBucket(r *request) error {
	r.setHeader("X-Amz-Bucket-Region", r.s.cfg.Region)
	return r.empty(http.StatusOK)
}

// deleteBucket removes an empty bucket.
func deleteBucket(r *request) error {
	if err := r.s.layer.DeleteBucket(r.ctx, r.bucket); err != nil {
		return err
	}
	return r.empty(http.StatusNoContent)
}

type locationResult struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	XMLNS   string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

// getBucketLocation answers the bucket's region (empty for us-east-1, as
// S3 answers).
func getBucketLocation(r *request) error {
	region := r.s.cfg.Region
	if region == "us-east-1" {
		region = ""
	}
	return r.writeXML(http.StatusOK, locationResult{XMLNS: xmlNS, Region: region})
}
