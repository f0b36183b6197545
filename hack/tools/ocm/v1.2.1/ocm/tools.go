//go:build tools

// Package tools pins the Open Cluster Management v1.2.1 commands that hack/ builds:
// the hub side (registration controller, placement scheduler, addon manager and its conversion
// webhook) and the klusterlet agents (registration, work).
package tools

import (
	_ "open-cluster-management.io/ocm/cmd/addon"
	_ "open-cluster-management.io/ocm/cmd/placement"
	_ "open-cluster-management.io/ocm/cmd/registration"
	_ "open-cluster-management.io/ocm/cmd/work"
)
