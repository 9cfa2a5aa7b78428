package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// OIDCProvider is an OpenID Connect issuer the tenant's STS accepts
// tokens of, for the client IDs (audiences) named.
type OIDCProvider struct {
	URL       string
	ClientIDs []string
}

// EnsureOIDCProviders registers each provider with the tenant through its
// IAM API (root's account), adding client IDs a registered one lacks; it
// returns their ARNs in order. Providers registered otherwise are left as
// they are.
func (c HTTPClient) EnsureOIDCProviders(ctx context.Context, ep Endpoint, providers []OIDCProvider) ([]string, error) {
	hc, err := c.httpClient(ep)
	if err != nil {
		return nil, err
	}
	cl := c.iamClient(ep, hc)
	listed, err := cl.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	if err != nil {
		return nil, fmt.Errorf("listing OIDC providers: %w", err)
	}
	arns := make([]string, 0, len(providers))
	for _, p := range providers {
		arn := ""
		for _, l := range listed.OpenIDConnectProviderList {
			got, err := cl.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: l.Arn})
			if err == nil && aws.ToString(got.Url) == p.URL {
				arn = aws.ToString(l.Arn)
				for _, id := range p.ClientIDs {
					if slices.Contains(got.ClientIDList, id) {
						continue
					}
					if _, err := cl.AddClientIDToOpenIDConnectProvider(ctx, &iam.AddClientIDToOpenIDConnectProviderInput{
						OpenIDConnectProviderArn: l.Arn, ClientID: aws.String(id)}); err != nil {
						return nil, fmt.Errorf("OIDC provider %s: adding client ID %s: %w", p.URL, id, err)
					}
				}
				break
			}
		}
		if arn == "" {
			out, err := cl.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String(p.URL), ClientIDList: p.ClientIDs})
			if err != nil {
				return nil, fmt.Errorf("registering OIDC provider %s: %w", p.URL, err)
			}
			arn = aws.ToString(out.OpenIDConnectProviderArn)
		}
		arns = append(arns, arn)
	}
	return arns, nil
}
