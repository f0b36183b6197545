//go:build tools

// Package tools pins the Kubernetes commands that hack/ builds: the control plane and, for the
// environment's real nodes, the kubelet and the scheduler.
// k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
// with local paths; go.mod here replaces each one with its published tag.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
