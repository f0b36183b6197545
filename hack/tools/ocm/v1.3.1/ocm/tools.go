//go:build tools

// Package tools pins the Open Cluster Management v1.3.1 commands that hack/
// builds: the hub side (registration controller, placement scheduler, addon manager and its
// conversion webhook) and the klusterlet agents (registration, work).
//
// The module proxy may refuse OCM v1.3.1's module zip (it serves the go.mod),
// so go.sum pins only the go.mod hash of open-cluster-management.io/ocm; where
// the proxy refuses the zip, hack/install-binaries.sh builds from the source
// archive (OCM_SOURCE_ARCHIVE, checked against ../source-archive.sha256).
package tools

import (
	_ "open-cluster-management.io/ocm/cmd/addon"
	_ "open-cluster-management.io/ocm/cmd/placement"
	_ "open-cluster-management.io/ocm/cmd/registration"
	_ "open-cluster-management.io/ocm/cmd/work"
)
