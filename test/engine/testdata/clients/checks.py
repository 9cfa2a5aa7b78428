"""What the boto3 scenario scripts of test/engine share: the clients, at
boto3's defaults with retries off (credentials, region and CA bundle from
the environment), and the tally the Go test reads: one JSON object,
{"checks": N, "failures": [...]}, printed by done()."""

import argparse
import json

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

NO_RETRIES = {"max_attempts": 1, "mode": "standard"}


def arguments(*extra):
    """--endpoint and --bucket, plus the named extra flags (all required)."""
    ap = argparse.ArgumentParser()
    for name in ("--endpoint", "--bucket") + extra:
        ap.add_argument(name, required=True)
    return ap.parse_args()


def client(endpoint, **credentials):
    """A signed client (root's keys from the environment unless given)."""
    return boto3.client("s3", endpoint_url=endpoint, config=Config(retries=NO_RETRIES), **credentials)


def anonymous(endpoint):
    """A client that signs nothing."""
    return boto3.client("s3", endpoint_url=endpoint, config=Config(signature_version=UNSIGNED, retries=NO_RETRIES))


def code(fn, **kw):
    """The S3 error code of a call, or "ok"."""
    try:
        fn(**kw)
    except ClientError as e:
        return e.response["Error"]["Code"]
    return "ok"


class Tally:
    def __init__(self):
        self.out = {"checks": 0, "failures": []}

    def check(self, ok, what):
        if ok:
            self.out["checks"] += 1
        else:
            self.out["failures"].append(what)

    def done(self):
        print(json.dumps(self.out))
