//go:build tools

// Package tools pins the upstream control plane the cluster tests run (tests/cluster_fixture.py):
// kube-apiserver, kube-controller-manager and kube-scheduler from k8s.io/kubernetes, etcd's server,
// the JobSet and Kueue managers, and kwok. scripts/cluster.sh builds these packages from the module
// cache, at exactly the versions go.mod and go.sum lock; nothing of their source is copied here.
package tools

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain" // built by ./cmd/etcd
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/jobset"
	_ "sigs.k8s.io/kueue/cmd/kueue"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
