package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/strata-storage/strata/engine/adminapi"
)

// The admin API authenticates with AWS Signature Version 4 made with the
// root credentials: the secret never crosses the wire, and a signed
// request is good for maxSigV4Skew around its time. engine/adminclient
// signs this way (adminapi.Sign).

const (
	sigV4Scheme = "AWS4-HMAC-SHA256"
	emptySHA256 = adminapi.EmptySHA256
	// maxSigV4Skew bounds the difference between a request's signing time
	// and the server's clock, as S3 does.
	maxSigV4Skew = 15 * time.Minute
	amzDate      = "20060102T150405Z"
)

// verifySigV4 checks that r carries a valid signature by the root
// credentials, made within maxSigV4Skew of now, over no body.
func verifySigV4(r *http.Request, access, secret string, now time.Time) error {
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(r.Header.Get("Authorization"), sigV4Scheme+" "), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			fields[k] = v
		}
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return errors.New("malformed signature")
	}
	if subtle.ConstantTimeCompare([]byte(scope[0]), []byte(access)) != 1 {
		return errors.New("not the root credentials")
	}
	at, err := time.Parse(amzDate, r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != scope[1] {
		return errors.New("missing or inconsistent X-Amz-Date")
	}
	if d := now.Sub(at); d > maxSigV4Skew || d < -maxSigV4Skew {
		return fmt.Errorf("signed %s away from the server's clock", d.Round(time.Second))
	}
	if r.Header.Get("X-Amz-Content-Sha256") != emptySHA256 || r.ContentLength > 0 {
		return errors.New("admin requests carry no body")
	}
	if n, _ := io.ReadFull(r.Body, make([]byte, 1)); n > 0 {
		return errors.New("admin requests carry no body")
	}
	// Sign the same request again, with only the headers the client signed.
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	again.Host = r.Host
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" && h != "x-amz-date" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: access, SecretAccessKey: secret},
		again, emptySHA256, scope[3], scope[2], at); err != nil {
		return err
	}
	_, want, _ := strings.Cut(again.Header.Get("Authorization"), "Signature=")
	if subtle.ConstantTimeCompare([]byte(want), []byte(fields["Signature"])) != 1 {
		return errors.New("signature does not match")
	}
	return nil
}
