package s3front

import (
	"net/http"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/health"
)

// Routes are the non-S3 endpoints of a strata process (server or gateway):
// health, metrics, and the admin API when c also implements admin.Informer
// (heal endpoints when it is an admin.Node; the user listing of users).
func Routes(c health.Checker, metricsHandler http.Handler, users admin.Users, rootAccess, rootSecret string, adminOverHTTP bool) []Route {
	routes := []Route{
		{Method: "GET", Path: health.PathLive, Handler: health.Live()},
		{Method: "GET", Path: health.PathReady, Handler: health.Ready(c)},
		{Method: "GET", Path: health.PathCluster, Handler: health.Cluster(c)},
		{Method: "GET", Path: "/strata/metrics", Handler: metricsHandler},
	}
	if a, ok := c.(admin.Informer); ok {
		h := admin.Handler(a, users, rootAccess, rootSecret, adminOverHTTP)
		routes = append(routes,
			Route{Method: "GET", Path: adminapi.Prefix + "*", Handler: h},
			Route{Method: "POST", Path: adminapi.Prefix + "*", Handler: h},
			Route{Method: "DELETE", Path: adminapi.Prefix + "*", Handler: h})
	}
	return routes
}
