//go:build tools

// Package tools pins helm, used to install this project's chart.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
