package objlayer

// The metadata map of a version is the front end's: a layer stores it as
// given and returns it as stored. These are the keys the front end writes
// that a layer may have to know by name, because its on-disk format gives
// them a place of their own (the gateway's POSIX layout keeps each in an
// extended attribute, as the files' other readers expect). Values are as
// the front end renders them.
const (
	// Stored HTTP headers: the value as the client sent it.
	MetaContentType        = "Content-Type"
	MetaContentEncoding    = "Content-Encoding"
	MetaContentDisposition = "Content-Disposition"
	MetaContentLanguage    = "Content-Language"
	MetaCacheControl       = "Cache-Control"
	MetaExpires            = "Expires"
	MetaWebsiteRedirect    = "X-Amz-Website-Redirect-Location"

	// MetaUserPrefix starts user metadata: the prefix, then the name in
	// lower case (x-amz-meta-color arrives as "X-Amz-Meta-color").
	MetaUserPrefix = "X-Amz-Meta-"
	// MetaTagging holds the object's tags, URL-query encoded in key order.
	MetaTagging = "X-Amz-Tagging"
	// MetaChecksumPrefix starts a checksum: the prefix, the algorithm in
	// upper case (CRC32, CRC32C, CRC64NVME, SHA1, SHA256, ...), the value
	// base64 of the digest ("-N" appended for a composite multipart one).
	MetaChecksumPrefix = "X-Amz-Checksum-"
	// MetaChecksumType is FULL_OBJECT or COMPOSITE.
	MetaChecksumType = "X-Amz-Checksum-Type"
)

// InternalMetaPrefix starts the metadata keys the front end and the layers
// keep for themselves: never answered to clients, never copied by a copy.
const InternalMetaPrefix = "X-Strata-"

// Internal keys a layer may have to know by name.
const (
	// MetaUploadID is the ID of the multipart upload a version was
	// completed from (set by the layer at completion).
	MetaUploadID = InternalMetaPrefix + "Upload-Id"
	// MetaRetention is a version's object-lock retention: JSON
	// {"Mode":"GOVERNANCE"|"COMPLIANCE","RetainUntilDate":"<RFC 3339>"}.
	MetaRetention = InternalMetaPrefix + "Object-Lock-Retention"
	// MetaLegalHold is a version's legal hold: "ON" or "OFF".
	MetaLegalHold = InternalMetaPrefix + "Object-Lock-Legal-Hold"
	// MetaChecksumAlgorithm is the checksum algorithm a multipart upload
	// was created with (its parts carry checksums of it; MetaChecksumType
	// says how they combine), kept by the version completed from it.
	MetaChecksumAlgorithm = InternalMetaPrefix + "Checksum-Algorithm"
)
