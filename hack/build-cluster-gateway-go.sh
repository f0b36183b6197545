#!/usr/bin/env bash
# Builds the Go original, github.com/oam-dev/cluster-gateway's cmd/apiserver,
# at the version pinned in hack/tools/cluster-gateway-go/go.mod, into
# .cache/cluster-gateway-go/apiserver, for `npm run bench:compare` only: no
# test, npm test or .ci/run needs it. Rebuilt only when the pin changes.
#
#   bash hack/build-cluster-gateway-go.sh        (prints the binary's path last)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PINS="$ROOT/hack/tools/cluster-gateway-go"
OUT="$ROOT/.cache/cluster-gateway-go"
BIN="$OUT/apiserver"

command -v go >/dev/null 2>&1 || { echo "no Go toolchain on PATH: install Go to build the Go original" >&2; exit 1; }
want="$(cat "$PINS/go.mod" "$PINS/go.sum" | sha256sum | cut -c1-16)"
if [ -x "$BIN" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$want" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$OUT"
version="$(grep -oE 'github.com/oam-dev/cluster-gateway v[^ ]+' "$PINS/go.mod" | head -1 | cut -d' ' -f2)"
echo "[cluster-gateway-go] building github.com/oam-dev/cluster-gateway/cmd/apiserver $version (first build takes minutes)" >&2
start=$SECONDS
(cd "$PINS" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$BIN" github.com/oam-dev/cluster-gateway/cmd/apiserver)
echo "$want" > "$OUT/.stamp"
echo "[cluster-gateway-go] built in $((SECONDS - start))s" >&2
echo "$BIN"
