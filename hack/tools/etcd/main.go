// Command etcd is the upstream etcd server, built from go.etcd.io/etcd/server/v3.
// The etcd repository's own main module carries replace directives, so it
// cannot be installed with `go install`; this three-line wrapper can.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
