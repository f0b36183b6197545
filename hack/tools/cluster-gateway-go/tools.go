//go:build tools

// Package tools pins the Go original, github.com/oam-dev/cluster-gateway, for
// `npm run bench:compare` (e2e/bench/compare.ts), which builds its
// cmd/apiserver into .cache/ only when asked: never in npm test or .ci/run.
package tools

import (
	_ "github.com/oam-dev/cluster-gateway/cmd/apiserver"
)
