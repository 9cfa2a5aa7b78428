package gateway

import "github.com/prometheus/client_golang/prometheus"

// The volume's large directories (engine/posix finds them): listing them
// and writing into them is slow, so they are exported (docs/gateway.md).

// exportedLargeDirs bounds the per-directory series: the largest ones.
const exportedLargeDirs = 20

var (
	descLargeDirs = prometheus.NewDesc("strata_gateway_large_directories",
		"Directories with at least strata_gateway_large_directory_threshold entries (listing them and writing into them is slow).", nil, nil)
	descDirEntries = prometheus.NewDesc("strata_gateway_large_directory_entries",
		"Entries of a directory past the threshold (the 20 largest), as bucket/prefix.", []string{"directory"}, nil)
	descDirThreshold = prometheus.NewDesc("strata_gateway_large_directory_threshold",
		"Entries from which a directory is reported as large (--large-dir-threshold).", nil, nil)
)
