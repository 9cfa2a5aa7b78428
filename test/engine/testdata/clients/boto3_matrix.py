"""boto3 against a strata endpoint, the way applications use it.

Run by TestClientMatrix (test/engine/clientmatrix_test.go) with the venv of
`make pyclients`. Credentials, region and the CA bundle come from the
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION,
AWS_CA_BUNDLE). Every other client setting is boto3's default, except that
retries are off, so that no failed request is hidden.

Scenario, in one bucket:
  * load: THREADS threads share one client (keep-alive connections from its
    pool); each does ITERATIONS times: PUT a fresh key (4 KiB, every 4th
    300 KiB), then GET one of its earlier keys and compare the bytes;
  * upload_file / download_file of a 20 MiB file (multipart, ranged GETs);
  * list_objects_v2 through a paginator, MaxKeys=100, over every load key;
  * copy_object, head_object;
  * a browser-style form upload (POST object) from generate_presigned_post,
    sent with urllib3 as a browser sends it, then read back;
  * delete_objects, delete_bucket.

Prints one JSON object on stdout: requests (HTTP requests sent, counted by a
botocore hook), failures (what went wrong, with the error string) and
http_errors (every response that was not 2xx). Exits 0 even when something
failed: the Go test reads the summary and reports it.
"""

import argparse
import hashlib
import json
import os
import random
import sys
import threading
import traceback

import boto3
import urllib3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

KIB = 1024
MIB = 1024 * KIB


class Tally:
    """Thread-safe record of requests and failures."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.failures = []
        self.http_errors = []
        self.ops = {}

    def fail(self, what, err):
        with self.lock:
            self.failures.append({"what": what, "error": err})

    def op(self, name):
        with self.lock:
            self.ops[name] = self.ops.get(name, 0) + 1

    # botocore emits needs-retry once per attempt, with the response or the
    # exception; with retries off that is once per request sent.
    def on_attempt(self, response=None, caught_exception=None, operation=None, **_):
        with self.lock:
            self.requests += 1
            name = operation.name if operation is not None else "?"
            if caught_exception is not None:
                self.http_errors.append({"op": name, "error": repr(caught_exception)})
            elif response is not None:
                http, parsed = response
                if http.status_code >= 300:
                    code = parsed.get("Error", {}).get("Code", "") if isinstance(parsed, dict) else ""
                    self.http_errors.append({"op": name, "status": http.status_code, "code": code})
        return None


def describe(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            h.update(block)
    return h.hexdigest()


def load_worker(s3, bucket, tally, thread, iterations):
    # Which earlier key to read is drawn from a per-thread seeded generator:
    # the same sequence of operations on every run.
    pick = random.Random(thread)
    written = []  # (key, sha256)
    for i in range(iterations):
        key = "load/t%d/k%04d" % (thread, i)
        size = 300 * KIB if i % 4 == 3 else 4 * KIB
        data = os.urandom(size)
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=data)
            tally.op("PutObject")
            written.append((key, sha(data)))
        except Exception as e:  # noqa: BLE001 - every error is reported
            tally.fail("PUT %s (%d bytes)" % (key, size), describe(e))
        if not written:
            continue
        rkey, rsum = written[pick.randrange(len(written))]
        try:
            body = s3.get_object(Bucket=bucket, Key=rkey)["Body"].read()
            tally.op("GetObject")
            if sha(body) != rsum:
                tally.fail("GET %s" % rkey, "body differs from what was written (%d bytes read)" % len(body))
        except Exception as e:  # noqa: BLE001
            tally.fail("GET %s" % rkey, describe(e))
    return written


def run(args, tally):
    cfg = Config(retries={"max_attempts": 1, "mode": "standard"}, s3={"addressing_style": "path"})
    s3 = boto3.client("s3", endpoint_url=args.endpoint, config=cfg)
    s3.meta.events.register("needs-retry.s3", tally.on_attempt)
    bucket = args.bucket

    s3.create_bucket(Bucket=bucket)
    tally.op("CreateBucket")

    # The load, THREADS threads on the one client.
    results = [None] * args.threads
    errors = []

    def worker(n):
        try:
            results[n] = load_worker(s3, bucket, tally, n, args.iterations)
        except Exception:  # noqa: BLE001
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for e in errors:
        tally.fail("load thread", e)
    load_keys = sorted(k for r in results if r for k, _ in r)

    # The transfer manager: multipart upload, parallel ranged download.
    # Its own retry of interrupted downloads is turned off as well.
    tcfg = TransferConfig(num_download_attempts=1)
    src = os.path.join(args.workdir, "upload.bin")
    dst = os.path.join(args.workdir, "download.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(20 * MIB))
    try:
        s3.upload_file(src, bucket, "transfer/20MiB.bin", Config=tcfg)
        tally.op("upload_file")
        s3.download_file(bucket, "transfer/20MiB.bin", dst, Config=tcfg)
        tally.op("download_file")
        if file_sha(src) != file_sha(dst):
            tally.fail("download_file transfer/20MiB.bin", "file differs from the uploaded one")
        head = s3.head_object(Bucket=bucket, Key="transfer/20MiB.bin")
        tally.op("HeadObject")
        if head["ContentLength"] != 20 * MIB:
            tally.fail("HEAD transfer/20MiB.bin", "ContentLength %d" % head["ContentLength"])
        if not head["ETag"].strip('"').endswith("-3"):
            tally.fail("HEAD transfer/20MiB.bin", "ETag %s is not that of a 3-part upload (8 MiB parts)" % head["ETag"])
    except Exception as e:  # noqa: BLE001
        tally.fail("transfer manager 20 MiB", describe(e))

    # Listing in pages of 100.
    listed, pages = [], 0
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="load/", PaginationConfig={"PageSize": 100}):
            pages += 1
            contents = page.get("Contents", [])
            if len(contents) > 100:
                tally.fail("list_objects_v2 page %d" % pages, "%d keys with MaxKeys=100" % len(contents))
            listed.extend(o["Key"] for o in contents)
        tally.op("ListObjectsV2 pages")
        if listed != load_keys:
            missing = sorted(set(load_keys) - set(listed))[:5]
            extra = sorted(set(listed) - set(load_keys))[:5]
            tally.fail("list_objects_v2", "listed %d keys in %d pages, want %d in order; missing %s extra %s" %
                       (len(listed), pages, len(load_keys), missing, extra))
        if pages < (len(load_keys) + 99) // 100:
            tally.fail("list_objects_v2", "%d keys in only %d pages of 100" % (len(listed), pages))
    except Exception as e:  # noqa: BLE001
        tally.fail("list_objects_v2", describe(e))

    # copy_object and head_object.
    if load_keys:
        src_key = load_keys[3 if len(load_keys) > 3 else 0]
        try:
            s3.copy_object(Bucket=bucket, Key="copies/one", CopySource={"Bucket": bucket, "Key": src_key})
            tally.op("CopyObject")
            a = s3.get_object(Bucket=bucket, Key=src_key)["Body"].read()
            b = s3.get_object(Bucket=bucket, Key="copies/one")["Body"].read()
            if a != b:
                tally.fail("copy_object", "copy of %s differs from its source" % src_key)
            h = s3.head_object(Bucket=bucket, Key="copies/one")
            tally.op("HeadObject")
            if h["ContentLength"] != len(a):
                tally.fail("head_object copies/one", "ContentLength %d, want %d" % (h["ContentLength"], len(a)))
        except Exception as e:  # noqa: BLE001
            tally.fail("copy_object/head_object", describe(e))

    # A form upload as a web page makes one: the fields from
    # generate_presigned_post (at boto3's defaults a Signature Version 2
    # policy), the file last.
    form_key = "form/upload.txt"
    try:
        post = s3.generate_presigned_post(bucket, form_key, Conditions=[["content-length-range", 1, MIB]], ExpiresIn=600)
        data = os.urandom(100 * KIB)
        http = urllib3.PoolManager(ca_certs=os.environ.get("AWS_CA_BUNDLE"))
        fields = dict(post["fields"])
        fields["file"] = ("upload.txt", data, "application/octet-stream")
        r = http.request("POST", post["url"], fields=fields, retries=False)
        tally.op("PresignedPost")
        if r.status != 204:
            tally.fail("presigned POST", "status %d: %s" % (r.status, r.data[:300]))
        elif s3.get_object(Bucket=bucket, Key=form_key)["Body"].read() != data:
            tally.fail("presigned POST", "the object read back differs from the uploaded file")
    except Exception as e:  # noqa: BLE001
        tally.fail("presigned POST", describe(e))

    # delete_objects, 1000 keys a request, then the bucket must be empty.
    everything = load_keys + ["transfer/20MiB.bin", "copies/one", form_key]
    for i in range(0, len(everything), 1000):
        batch = everything[i:i + 1000]
        try:
            out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": False})
            tally.op("DeleteObjects")
            if out.get("Errors"):
                tally.fail("delete_objects", "errors: %s" % out["Errors"][:5])
            if len(out.get("Deleted", [])) != len(batch):
                tally.fail("delete_objects", "%d deleted of %d" % (len(out.get("Deleted", [])), len(batch)))
        except Exception as e:  # noqa: BLE001
            tally.fail("delete_objects", describe(e))
    try:
        left = s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0)
        if left:
            tally.fail("after delete_objects", "%d keys left" % left)
        s3.delete_bucket(Bucket=bucket)
        tally.op("DeleteBucket")
    except Exception as e:  # noqa: BLE001
        tally.fail("delete_bucket", describe(e))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--iterations", type=int, default=300)
    args = p.parse_args()
    tally = Tally()
    try:
        run(args, tally)
    except Exception as e:  # noqa: BLE001
        tally.fail("scenario aborted", describe(e) + "\n" + traceback.format_exc())
    json.dump({"requests": tally.requests, "ops": tally.ops, "failures": tally.failures,
               "http_errors": tally.http_errors}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
