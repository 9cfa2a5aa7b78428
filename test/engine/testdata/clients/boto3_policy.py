"""boto3's bucket policy calls against a strata server, at boto3's defaults.

Run by TestBucketPolicyConditions (test/engine/policyconditions_test.go)
with the venv of `make pyclients`; root's credentials, region and CA
bundle come from the environment, retries are off. On bucket BUCKET
(which holds docs/a.txt, and a public policy by now):

  * get_bucket_policy gives the document back as it was written;
  * an unsigned client reads docs/a.txt, not tmp/b.txt (AccessDenied);
  * a policy with an unknown condition key, a resource in another bucket
    or an Allow with NotPrincipal is refused MalformedPolicy, and the
    policy in force is unchanged;
  * delete_bucket_policy, then get answers NoSuchBucketPolicy and the
    unsigned client is refused again.

Prints one JSON object: checks (how many passed) and failures.
"""

import json

from checks import Tally, anonymous, arguments, client, code


def main():
    a = arguments()
    s3 = client(a.endpoint)
    anon = anonymous(a.endpoint)
    b = a.bucket
    t = Tally()
    check = t.check

    before = s3.get_bucket_policy(Bucket=b)["Policy"]
    check('"Action":"*"' in before.replace(" ", ""), "policy read back as written: %s" % before)
    check(code(anon.get_object, Bucket=b, Key="docs/a.txt") == "ok", "anonymous GET allowed by the policy")
    check(code(anon.get_object, Bucket=b, Key="tmp/b.txt") == "AccessDenied", "anonymous GET outside the policy's resources")

    def policy(statement):
        return json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    refused = {
        "unknown condition key": policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                                         "Resource": "arn:aws:s3:::%s/*" % b, "Condition": {"StringEquals": {"s3:colour": "red"}}}),
        "another bucket": policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::elsewhere/*"}),
        "Allow with NotPrincipal": policy({"Effect": "Allow", "NotPrincipal": {"AWS": "*"}, "Action": "s3:GetObject",
                                           "Resource": "arn:aws:s3:::%s/*" % b}),
    }
    for what, doc in refused.items():
        check(code(s3.put_bucket_policy, Bucket=b, Policy=doc) == "MalformedPolicy", "%s refused MalformedPolicy" % what)
    check(s3.get_bucket_policy(Bucket=b)["Policy"] == before, "the policy in force is unchanged")

    s3.delete_bucket_policy(Bucket=b)
    check(code(s3.get_bucket_policy, Bucket=b) == "NoSuchBucketPolicy", "no policy after delete")
    check(code(anon.get_object, Bucket=b, Key="docs/a.txt") == "AccessDenied", "anonymous GET after the policy is gone")
    t.done()


if __name__ == "__main__":
    main()
