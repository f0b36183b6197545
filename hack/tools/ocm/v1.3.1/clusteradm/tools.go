//go:build tools

// Package tools pins clusteradm v1.3.1, built against the OCM release beside
// it (../ocm). The module proxy may refuse OCM v1.3.1's module zip, so go.sum
// pins only its go.mod: hack/install-binaries.sh then builds from the source
// archive (OCM_SOURCE_ARCHIVE, checked against ../source-archive.sha256).
package tools

import _ "open-cluster-management.io/clusteradm/cmd/clusteradm"
