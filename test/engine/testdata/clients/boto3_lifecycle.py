"""boto3's lifecycle calls against a strata server, at boto3's defaults.

Run by TestLifecycle (test/engine/lifecycle_test.go) with the venv of
`make pyclients`; credentials, region and CA bundle come from the
environment, retries are off. In bucket BUCKET (created here):

  * put_bucket_lifecycle_configuration (a rule without ID, one with), then
    get_bucket_lifecycle_configuration gives the rules back, IDs included;
  * put_object, head_object and get_object of a key a rule expires carry
    Expiration (x-amz-expiration) naming that rule; a key no rule expires
    carries none;
  * a rule with Days 0 is refused InvalidArgument, a transition
    InvalidStorageClass, and the stored rules are unchanged;
  * delete_bucket_lifecycle, then get answers NoSuchLifecycleConfiguration.

Prints one JSON object: checks (how many passed) and failures.
"""

from botocore.exceptions import ClientError

from checks import Tally, arguments, client


def main():
    a = arguments()
    s3 = client(a.endpoint)
    b = a.bucket
    t = Tally()
    check = t.check

    def refused(code, **kw):
        try:
            s3.put_bucket_lifecycle_configuration(Bucket=b, **kw)
        except ClientError as e:
            return e.response["Error"]["Code"] == code
        return False

    s3.create_bucket(Bucket=b)
    rules = [
        {"Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 30}},
        {"ID": "uploads", "Filter": {}, "Status": "Enabled",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    check(len(got) == 2, "two rules given back: %r" % got)
    logs_id = got[0].get("ID", "")
    check(len(logs_id) > 0, "the rule without ID was given one: %r" % got[0])
    check(got[0].get("Expiration") == {"Days": 30} and got[0].get("Filter") == {"Prefix": "logs/"},
          "rule given back as written: %r" % got[0])
    check(got[1].get("ID") == "uploads" and got[1].get("AbortIncompleteMultipartUpload") == {"DaysAfterInitiation": 7},
          "second rule given back as written: %r" % got[1])

    want = 'rule-id="%s"' % logs_id
    r = s3.put_object(Bucket=b, Key="logs/app.log", Body=b"line\n")
    check(want in r.get("Expiration", ""), "put_object Expiration: %r" % r.get("Expiration"))
    r = s3.head_object(Bucket=b, Key="logs/app.log")
    check(want in r.get("Expiration", "") and "expiry-date=" in r.get("Expiration", ""),
          "head_object Expiration: %r" % r.get("Expiration"))
    r = s3.get_object(Bucket=b, Key="logs/app.log")
    r["Body"].read()
    check(want in r.get("Expiration", ""), "get_object Expiration: %r" % r.get("Expiration"))
    r = s3.put_object(Bucket=b, Key="data/keep.bin", Body=b"x")
    check("Expiration" not in r, "a key no rule expires got Expiration: %r" % r.get("Expiration"))

    check(refused("InvalidArgument", LifecycleConfiguration={"Rules": [
        {"ID": "zero", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 0}}]}),
        "Days 0 not refused with InvalidArgument")
    check(refused("InvalidStorageClass", LifecycleConfiguration={"Rules": [
        {"ID": "cold", "Filter": {}, "Status": "Enabled", "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}]}),
        "a transition not refused with InvalidStorageClass")
    check(len(s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]) == 2, "a refused document changed the rules")

    s3.delete_bucket_lifecycle(Bucket=b)
    try:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
        check(False, "rules still there after delete_bucket_lifecycle")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "NoSuchLifecycleConfiguration", "after delete: %s" % e)
    r = s3.head_object(Bucket=b, Key="logs/app.log")
    check("Expiration" not in r, "Expiration still sent without rules: %r" % r.get("Expiration"))
    t.done()


if __name__ == "__main__":
    main()
