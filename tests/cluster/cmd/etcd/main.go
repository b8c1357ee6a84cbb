// Command etcd is etcd's server, from go.etcd.io/etcd/server/v3 at the version go.mod pins: the same
// call etcd's own main package makes (this module cannot import that one: it is etcd's root module,
// which pins other versions of the libraries k8s.io/kubernetes shares with the server).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
