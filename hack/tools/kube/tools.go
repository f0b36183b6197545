//go:build tools

// Package tools pins the Kubernetes control-plane commands that hack/ builds.
// k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
// with local paths; go.mod here replaces each one with its published tag.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
