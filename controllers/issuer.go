package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// ClusterIssuer reads this cluster's ServiceAccount token issuer from the
// API server's OIDC discovery document (served to every authenticated
// ServiceAccount by the default ClusterRole
// system:service-account-issuer-discovery).
func ClusterIssuer(cfg *rest.Config) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return "", err
		}
		raw, err := dc.RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("GET /.well-known/openid-configuration: %w", err)
		}
		var doc struct {
			Issuer string `json:"issuer"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return "", fmt.Errorf("the API server's discovery document: %w", err)
		}
		if doc.Issuer == "" {
			return "", errors.New("the API server's discovery document names no issuer")
		}
		return doc.Issuer, nil
	}
}
