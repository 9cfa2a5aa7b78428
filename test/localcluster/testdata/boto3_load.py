"""A boto3 client at its defaults (standard retry mode, checksums, TLS
verified against the tenant's CA) writing and reading objects until the file
named by STOP_FILE exists; prints one JSON line of figures. Round i writes
boto3/<i> (six digits), 4096 + i%7 bytes of chr(ord("a") + i%26); the
figures name the rounds begun and those whose PUT failed, so the caller
knows every acknowledged object.

Environment: S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_CA_BUNDLE, BUCKET, STOP_FILE.
"""
import json
import os
import sys

import boto3
import botocore.exceptions
from botocore.config import Config

s3 = boto3.client(
    "s3",
    endpoint_url=os.environ["S3_ENDPOINT"],
    region_name="us-east-1",
    config=Config(retries={"mode": "standard"}, s3={"addressing_style": "path"}),
)
bucket = os.environ["BUCKET"]
stop = os.environ["STOP_FILE"]
figures = {"requests": 0, "failed": 0, "retried_attempts": 0, "objects": 0, "errors": [],
           "rounds": 0, "put_failed": []}


def call(fn, **kw):
    figures["requests"] += 1
    try:
        out = fn(**kw)
    except Exception as e:  # every failure counts, whatever its kind
        figures["failed"] += 1
        meta = getattr(e, "response", {}) or {}
        figures["retried_attempts"] += meta.get("ResponseMetadata", {}).get("RetryAttempts", 0)
        if len(figures["errors"]) < 5:
            figures["errors"].append("%s: %s" % (fn.__name__, e))
        return None
    figures["retried_attempts"] += out["ResponseMetadata"].get("RetryAttempts", 0)
    return out


def get_body(**kw):
    """GET an object and read its body. A body cut off (the server
    answering it was killed mid-answer) is not retried by botocore, which
    retries requests, not streams: it is read again once, counted as a
    retried attempt, as an application would."""
    for attempt in range(2):
        out = s3.get_object(**kw)
        try:
            data = out["Body"].read()
        except botocore.exceptions.ResponseStreamingError:
            if attempt == 1:
                raise
            figures["retried_attempts"] += 1
            continue
        return {"Body": data, "ResponseMetadata": out["ResponseMetadata"]}


call(s3.create_bucket, Bucket=bucket)
i = 0
while not os.path.exists(stop):
    key = "boto3/%06d" % i
    body = bytes([ord("a") + i % 26]) * (4096 + i % 7)
    i += 1
    figures["rounds"] = i
    if call(s3.put_object, Bucket=bucket, Key=key, Body=body) is None:
        figures["put_failed"].append(i - 1)
        continue
    figures["objects"] += 1
    got = call(get_body, Bucket=bucket, Key=key)
    if got is not None and got["Body"] != body:
        figures["failed"] += 1
        figures["errors"].append("GET %s: wrong bytes" % key)
    call(s3.head_object, Bucket=bucket, Key=key)
    if i % 10 == 0:
        call(s3.list_objects_v2, Bucket=bucket, Prefix="boto3/", MaxKeys=10)
json.dump(figures, sys.stdout)
print()
