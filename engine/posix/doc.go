// Package posix is the object layer (objlayer.Layer) of `strata gateway`:
// S3 objects as the files of a shared directory tree. Buckets are its
// top-level directories, an object is the file at its key's path (each '/'
// a directory level), visible to the NFS and HPC users of the same tree;
// metadata sits in extended attributes, or in sidecar files where the
// filesystem has none. Several stateless replicas serve one volume: what
// must be shared (multipart staging, older versions, locks) is on it.
//
// The tree is laid out byte for byte as versitygw's posix backend laid it
// out for the gateway's earlier releases: attribute names and encodings
// (objmeta.go, bucket.go), the versions directory and its sidecar path
// (versions.go, layout.go), multipart staging and completion claims
// (multipart.go, complete.go), the publish locks (lock.go). Volumes those
// releases wrote keep working, replicas of both can serve one volume
// during a rolling upgrade, and a rollback finds what it expects.
//
// Where this package deliberately does otherwise (each said where it is
// done):
//   - versions move by hard link, not by copy: an archived version keeps
//     its time, and archiving costs nothing whatever the size;
//   - a delete marker is a new file of no bytes (versitygw marked the
//     current file, bytes kept), and a key with no object gets one too;
//   - deleting the latest version brings back the newest archived one
//     (versitygw: the null version whenever there is one);
//   - a null delete marker (versioning suspended) replaces the null
//     version, and a completion in a suspended bucket archives and
//     replaces as a PUT does (versitygw did neither);
//   - an overwrite in sidecar mode removes the attributes the new version
//     does not have, and metadata versitygw has no place for goes to an
//     attribute of ours, strata-meta, bound to its version;
//   - a publish that replaces a file goes through the staging directory,
//     not a hidden name beside the target (which a crash left listed);
//   - keys with a .sgwtmp segment anywhere are refused (they could not be
//     listed), and a symbolic link out of the bucket refuses its key;
//   - uploads are listed by key then upload ID (time-ordered), and
//     Initiated is the ID's time;
//   - listings resume past a marker without reading what comes before it,
//     and keep large directories' sorted listings between pages.
package posix
