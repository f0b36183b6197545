//go:build tools

// Package tools pins clusteradm for OCM v1.2.1. clusteradm v1.3.1 requires
// ocm v1.3.1; go.mod replaces ocm with v1.2.1 so that clusteradm is built
// against the OCM release beside it (../ocm).
package tools

import _ "open-cluster-management.io/clusteradm/cmd/clusteradm"
