"""boto3 at its defaults against a strata server over HTTPS: the data
protection features of issue 17, each checked by what it does.

Run by TestDataProtectionClients (test/engine/protection_test.go) with
the venv of `make pyclients`; root's credentials, region and CA bundle
come from the environment, retries are off. --kms-key names a master key
of the server's keys file. Buckets BUCKET and BUCKET-lock are made here.

  * SSE-C: a GET or HEAD without the key is refused, with it the bytes
    come back, and a ranged GET too; SSE-S3 and SSE-KMS answer their
    headers; bucket default encryption encrypts a plain PUT;
  * object lock: a default GOVERNANCE retention is applied, a version
    delete is refused without the bypass and done with it; COMPLIANCE
    refuses even the bypass; a legal hold refuses until lifted;
  * CORS: the configuration reads back, a preflight from an allowed
    origin is answered with its headers, one from another origin is 403;
  * presigned PUT and GET work within their expiry and are refused (403)
    after it.

Prints one JSON object: checks (how many passed) and failures.
"""

import datetime
import http.client
import os
import ssl
import time
import urllib.parse

from checks import Tally, arguments, client, code


def main():
    a = arguments("--kms-key")
    s3 = client(a.endpoint)
    b, locked = a.bucket, a.bucket + "-lock"
    t = Tally()
    check = t.check

    # Encryption.
    s3.create_bucket(Bucket=b)
    key = os.urandom(32)
    ssec = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    body = os.urandom(300 * 1024)
    s3.put_object(Bucket=b, Key="ssec", Body=body, **ssec)
    check(code(s3.get_object, Bucket=b, Key="ssec") == "InvalidRequest", "SSE-C GET without the key refused")
    check(code(s3.head_object, Bucket=b, Key="ssec") != "ok", "SSE-C HEAD without the key refused")
    check(s3.get_object(Bucket=b, Key="ssec", **ssec)["Body"].read() == body, "SSE-C GET with the key")
    check(s3.get_object(Bucket=b, Key="ssec", Range="bytes=70000-70009", **ssec)["Body"].read() == body[70000:70010],
          "SSE-C ranged GET")
    r = s3.put_object(Bucket=b, Key="sse-s3", Body=b"x", ServerSideEncryption="AES256")
    check(r.get("ServerSideEncryption") == "AES256", "SSE-S3 answered: %r" % r.get("ServerSideEncryption"))
    r = s3.put_object(Bucket=b, Key="sse-kms", Body=b"x", ServerSideEncryption="aws:kms", SSEKMSKeyId=a.kms_key)
    h = s3.head_object(Bucket=b, Key="sse-kms")
    check(h.get("ServerSideEncryption") == "aws:kms" and a.kms_key in h.get("SSEKMSKeyId", ""), "SSE-KMS on HEAD: %r" % h)
    s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    s3.put_object(Bucket=b, Key="by-default", Body=b"plain request")
    check(s3.head_object(Bucket=b, Key="by-default").get("ServerSideEncryption") == "AES256", "bucket default encryption")

    # Object lock.
    s3.create_bucket(Bucket=locked, ObjectLockEnabledForBucket=True)
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
    v = s3.put_object(Bucket=locked, Key="gov", Body=b"g")["VersionId"]
    ret = s3.get_object_retention(Bucket=locked, Key="gov", VersionId=v)["Retention"]
    check(ret["Mode"] == "GOVERNANCE", "default retention applied: %r" % ret)
    check(code(s3.delete_object, Bucket=locked, Key="gov", VersionId=v) == "AccessDenied", "governance refuses a delete")
    check(code(s3.delete_object, Bucket=locked, Key="gov", VersionId=v, BypassGovernanceRetention=True) == "ok",
          "governance bypassed")
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    v = s3.put_object(Bucket=locked, Key="comp", Body=b"c", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)["VersionId"]
    check(code(s3.delete_object, Bucket=locked, Key="comp", VersionId=v, BypassGovernanceRetention=True) == "AccessDenied",
          "compliance refuses even the bypass")
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    v = s3.put_object(Bucket=locked, Key="held", Body=b"h", ObjectLockLegalHoldStatus="ON")["VersionId"]
    check(code(s3.delete_object, Bucket=locked, Key="held", VersionId=v) == "AccessDenied", "a legal hold refuses a delete")
    s3.put_object_legal_hold(Bucket=locked, Key="held", VersionId=v, LegalHold={"Status": "OFF"})
    check(code(s3.delete_object, Bucket=locked, Key="held", VersionId=v) == "ok", "delete once the hold is lifted")

    # CORS.
    rule = {"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET", "PUT"], "AllowedHeaders": ["*"],
            "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}
    s3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [rule]})
    got = s3.get_bucket_cors(Bucket=b)["CORSRules"]
    check(len(got) == 1 and got[0]["AllowedOrigins"] == rule["AllowedOrigins"], "CORS rules read back: %r" % got)
    u = urllib.parse.urlparse(a.endpoint)
    tls = ssl.create_default_context(cafile=os.environ["AWS_CA_BUNDLE"])

    def request(method, path, headers=None, body=None):
        c = http.client.HTTPSConnection(u.hostname, u.port, context=tls, timeout=30)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    status, hdrs, _ = request("OPTIONS", "/%s/page" % b, {"Origin": "https://app.example", "Access-Control-Request-Method": "PUT"})
    check(status == 200 and hdrs.get("access-control-allow-origin") == "https://app.example"
          and "PUT" in hdrs.get("access-control-allow-methods", ""), "preflight from an allowed origin: %s %r" % (status, hdrs))
    status, _, _ = request("OPTIONS", "/%s/page" % b, {"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"})
    check(status == 403, "preflight from another origin: %s" % status)

    # Presigned URLs.
    def presigned(method, key, expires):
        url = s3.generate_presigned_url(method, Params={"Bucket": b, "Key": key}, ExpiresIn=expires)
        p = urllib.parse.urlparse(url)
        return p.path + "?" + p.query
    status, _, _ = request("PUT", presigned("put_object", "upload", 300), body=b"presigned body")
    check(status == 200, "presigned PUT: %s" % status)
    status, _, got = request("GET", presigned("get_object", "upload", 300))
    check(status == 200 and got == b"presigned body", "presigned GET: %s %r" % (status, got[:40]))
    short = presigned("get_object", "upload", 1)
    time.sleep(2.5)
    status, _, _ = request("GET", short)
    check(status == 403, "presigned GET after its expiry: %s" % status)
    t.done()


if __name__ == "__main__":
    main()
