// Package s3sig authenticates S3 requests and guards the integrity of
// their payloads, on net/http and the standard library alone.
//
// It answers three questions the S3 front end asks of every request:
//
//   - Who sent it? Verify checks a request's signature (Signature Version 4
//     in the Authorization header or a presigned URL, Signature Version 2
//     likewise, or none: anonymous) from its method, path, query and
//     headers, never its body, and returns an Auth.
//   - Is the body what was signed and declared? Auth.Body wraps the body in
//     a Payload that decodes aws-chunked framing (verifying each chunk's
//     signature), and checks at its end the declared x-amz-content-sha256,
//     Content-MD5 and flexible checksum (x-amz-checksum-*), failing the
//     last Read instead of returning io.EOF, so a caller that stores only
//     what reached io.EOF never stores a corrupted or forged body.
//   - Is a browser form upload allowed? ReadForm streams a POST object
//     form up to its file, VerifyPost checks its signature and policy.
//
// Every refusal is an *s3err.Error carrying S3's code, status and message;
// the package decides nothing about access (an anonymous Auth is returned
// for the caller's policy to judge).
package s3sig
