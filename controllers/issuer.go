package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// The discovery document, granted to the operator itself: the default
// ClusterRole system:service-account-issuer-discovery is bound to
// ServiceAccounts only, and an operator running under another identity
// (the local cluster's, a user's kubeconfig) was refused it.
// +kubebuilder:rbac:urls=/.well-known/openid-configuration,verbs=get

// ClusterIssuer reads this cluster's ServiceAccount token issuer from the
// API server's OIDC discovery document.
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
