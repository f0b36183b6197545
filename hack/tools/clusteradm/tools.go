//go:build tools

// Package tools pins clusteradm. clusteradm v1.3.1 requires ocm v1.3.1, whose
// source the module proxy does not serve; go.mod replaces it with v1.2.1,
// the OCM release this project runs (see ../ocm).
package tools

import _ "open-cluster-management.io/clusteradm/cmd/clusteradm"
