"""boto3's ACL calls against a strata server, at boto3's defaults.

Run by TestACLs (test/engine/acl_test.go) with the venv of `make
pyclients`; root's credentials, region and CA bundle come from the
environment, retries are off; --alt-key/--alt-secret name a second
account (a user with policy "owner"), --root-id its canonical ID. In
bucket BUCKET (created here):

  * create_bucket with ACL authenticated-read: get_bucket_acl lists the
    AuthenticatedUsers group's READ first, then the owner's FULL_CONTROL
    under its canonical ID and display name;
  * put_object with GrantRead for the alt account: alt reads it, and
    get_object_acl shows the grant; an object without one alt cannot read
    (AccessDenied); put_object_acl(ACL=public-read) then lets an unsigned
    client read it;
  * a grant to an unknown canonical ID is refused InvalidArgument, an
    e-mail grantee UnresolvableGrantByEmailAddress;
  * BucketOwnerEnforced is refused while the bucket's ACL grants the
    public (InvalidBucketAclWithObjectOwnership), taken once it is private,
    and then a public-read object ACL is refused
    AccessControlListNotSupported and the earlier public-read object no
    longer reads unsigned.

Prints one JSON object: checks (how many passed) and failures.
"""

from checks import Tally, anonymous, arguments, client, code


def main():
    a = arguments("--alt-key", "--alt-secret", "--root-id")
    s3 = client(a.endpoint)
    alt = client(a.endpoint, aws_access_key_id=a.alt_key, aws_secret_access_key=a.alt_secret)
    anon = anonymous(a.endpoint)
    b = a.bucket
    t = Tally()
    check = t.check

    s3.create_bucket(Bucket=b, ACL="authenticated-read")
    grants = s3.get_bucket_acl(Bucket=b)["Grants"]
    check(len(grants) == 2 and grants[0]["Grantee"].get("URI") == "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
          and grants[0]["Permission"] == "READ", "bucket ACL: AuthenticatedUsers READ first: %r" % grants)
    check(len(grants) == 2 and grants[1]["Grantee"].get("ID") == a.root_id and grants[1]["Grantee"].get("DisplayName")
          and grants[1]["Permission"] == "FULL_CONTROL", "bucket ACL: the owner's canonical ID: %r" % grants)
    check(code(alt.list_objects_v2, Bucket=b) == "ok", "alt lists an authenticated-read bucket")
    check(code(anon.list_objects_v2, Bucket=b) == "AccessDenied", "anonymous lists an authenticated-read bucket")

    s3.put_object(Bucket=b, Key="shared", Body=b"shared", GrantRead='id="%s"' % a.alt_key)
    s3.put_object(Bucket=b, Key="private", Body=b"private")
    check(alt.get_object(Bucket=b, Key="shared")["Body"].read() == b"shared", "alt reads an object granted to it")
    check(code(alt.get_object, Bucket=b, Key="private") == "AccessDenied", "alt reads an object not granted to it")
    og = s3.get_object_acl(Bucket=b, Key="shared")["Grants"]
    check(any(g["Grantee"].get("ID") == a.alt_key and g["Permission"] == "READ" for g in og), "object ACL shows alt's grant: %r" % og)
    check(code(anon.get_object, Bucket=b, Key="private") == "AccessDenied", "anonymous reads a private object")
    s3.put_object_acl(Bucket=b, Key="private", ACL="public-read")
    check(anon.get_object(Bucket=b, Key="private")["Body"].read() == b"private", "anonymous reads after public-read")

    check(code(s3.put_object, Bucket=b, Key="x", Body=b"x", GrantRead='id="nobody-at-all"') == "InvalidArgument", "unknown grantee id")
    check(code(s3.put_object, Bucket=b, Key="x", Body=b"x", GrantRead='emailAddress="a@example.com"') == "UnresolvableGrantByEmailAddress",
          "e-mail grantee")

    enforced = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    s3.put_bucket_acl(Bucket=b, ACL="public-read")
    check(code(s3.put_bucket_ownership_controls, Bucket=b, OwnershipControls=enforced) == "InvalidBucketAclWithObjectOwnership",
          "BucketOwnerEnforced over a public bucket ACL")
    s3.put_bucket_acl(Bucket=b, ACL="private")
    s3.put_bucket_ownership_controls(Bucket=b, OwnershipControls=enforced)
    check(code(s3.put_object, Bucket=b, Key="y", Body=b"y", ACL="public-read") == "AccessControlListNotSupported",
          "object ACL under BucketOwnerEnforced")
    check(code(anon.get_object, Bucket=b, Key="private") == "AccessDenied", "a public-read object under BucketOwnerEnforced")
    t.done()


if __name__ == "__main__":
    main()
