package iam

// Managed policies: the three of AWS's the conformance suite and common
// tooling attach, built in with AWS's documents (less the actions of
// services Strata does not serve). Policies of the account's own
// (CreatePolicy) are not kept yet; attaching any other ARN is refused as
// not attachable.

// AWS's managed policies' ARNs.
const (
	ArnS3FullAccess     = "arn:aws:iam::aws:policy/AmazonS3FullAccess"
	ArnS3ReadOnlyAccess = "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"
	ArnIAMReadOnly      = "arn:aws:iam::aws:policy/IAMReadOnlyAccess"
)

var managed = map[string]string{
	ArnS3FullAccess: `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`,
	ArnS3ReadOnlyAccess: `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",` +
		`"Action":["s3:Get*","s3:List*"],"Resource":"*"}]}`,
	ArnIAMReadOnly: `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",` +
		`"Action":["iam:GenerateCredentialReport","iam:Get*","iam:List*"],"Resource":"*"}]}`,
}

// ManagedPolicy returns a managed policy's document by its ARN.
func ManagedPolicy(arn string) (string, bool) {
	doc, ok := managed[arn]
	return doc, ok
}
