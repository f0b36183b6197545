#!/usr/bin/env bash
# Builds the real control-plane binaries that the local environment and the
# end-to-end tests run, from their official Go modules (see hack/tools/*/go.mod
# for the pinned versions). Each group is rebuilt only when its go.mod/go.sum
# changes; the Go build cache makes a rebuild after a version bump incremental.
#
#   hack/install-binaries.sh            build what is missing or stale
#   BIN_DIR=/some/dir hack/install-binaries.sh
#
# Prebuilt binaries: set KUBEBUILDER_ASSETS (envtest convention: kube-apiserver,
# etcd, kubectl) and/or CLUSTER_GATEWAY_ASSETS (any of the binaries below);
# a binary found there is not built.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-$ROOT/.cache/bin}"
TOOLS="$ROOT/hack/tools"
mkdir -p "$BIN_DIR"

log() { printf '[binaries %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[binaries] error: %s\n' "$*" >&2; exit 1; }

# Checked only when something must be built: prebuilt binaries need no Go.
require_go() {
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go 1.26 or later (https://go.dev/doc/install), or set KUBEBUILDER_ASSETS / CLUSTER_GATEWAY_ASSETS to prebuilt binaries"
  local minor
  minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
  [ "${minor:-0}" -ge 25 ] || die "Go $(go env GOVERSION) is too old: these modules need Go 1.25 or later"
}

# Some OCM releases are served by the module proxy but absent from the checksum
# database; go.sum files committed under hack/tools pin every hash instead.
export GONOSUMDB="${GONOSUMDB:-open-cluster-management.io,sigs.k8s.io/about-api}"
export GOFLAGS="${GOFLAGS:--mod=mod}"
export CGO_ENABLED=0

prebuilt() {
  local name="$1" dir
  for dir in ${CLUSTER_GATEWAY_ASSETS:-} ${KUBEBUILDER_ASSETS:-}; do
    [ -x "$dir/$name" ] && return 0
  done
  return 1
}

# build GROUP LDFLAGS PACKAGE...
build() {
  local group="$1" ldflags="$2"; shift 2
  local dir="$TOOLS/$group" stamp="$BIN_DIR/.$group.stamp" want missing=() pkg name
  want="$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$ldflags $*") | sha256sum | cut -c1-16)"
  for pkg in "$@"; do
    name="$(basename "$pkg")"
    prebuilt "$name" && continue
    if [ ! -x "$BIN_DIR/$name" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then missing+=("$pkg"); fi
  done
  if [ ${#missing[@]} -eq 0 ]; then log "$group: up to date"; return; fi
  require_go
  log "$group: building ${missing[*]##*/} (first build of this group takes minutes)"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$BIN_DIR/" "${missing[@]}") \
    || die "building $group failed (see the Go output above)"
  echo "$want" > "$stamp"
  log "$group: built in $((SECONDS - start))s"
}

KUBE_VERSION="$(grep -oE 'k8s.io/kubernetes v[0-9.]+' "$TOOLS/kube/go.mod" | head -1 | cut -d' ' -f2)"
KUBE_MINOR="$(echo "$KUBE_VERSION" | cut -d. -f2)"
VERSION_PKG=k8s.io/component-base/version
build kube "-X $VERSION_PKG.gitVersion=$KUBE_VERSION -X $VERSION_PKG.gitMajor=1 -X $VERSION_PKG.gitMinor=$KUBE_MINOR -X $VERSION_PKG.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
build etcd "" cluster-gateway.local/hack/tools/etcd
build ocm "" open-cluster-management.io/ocm/cmd/registration open-cluster-management.io/ocm/cmd/work open-cluster-management.io/ocm/cmd/addon
build clusteradm "" open-cluster-management.io/clusteradm/cmd/clusteradm
HELM_VERSION="$(grep -oE 'helm.sh/helm/v3 v[0-9.]+' "$TOOLS/helm/go.mod" | head -1 | cut -d' ' -f2)"
build helm "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm.sh/helm/v3/cmd/helm


# OCM's CRDs, exactly as the OCM release ships them (hub: cluster-manager;
# managed clusters: klusterlet), copied from the same module the binaries
# were built from. With prebuilt binaries, OCM_CRDS may point at them instead.
CRD_DIR="$(dirname "$BIN_DIR")/ocm-crds"
crd_want="$(cat "$TOOLS/ocm/go.mod" "$TOOLS/ocm/go.sum" | sha256sum | cut -c1-16)"
if [ -n "${OCM_CRDS:-}" ]; then
  log "OCM CRDs: using OCM_CRDS=$OCM_CRDS"
elif [ "$(cat "$CRD_DIR/.stamp" 2>/dev/null)" = "$crd_want" ]; then
  log "OCM CRDs: up to date"
else
  require_go
  OCM_DIR="$(cd "$TOOLS/ocm" && go list -m -f '{{.Dir}}' open-cluster-management.io/ocm)"
  rm -rf "$CRD_DIR" && mkdir -p "$CRD_DIR/hub" "$CRD_DIR/managed"
  cp "$OCM_DIR"/manifests/cluster-manager/hub/crds/*.yaml "$CRD_DIR/hub/"
  cp "$OCM_DIR"/manifests/klusterlet/managed/*crd.yaml "$CRD_DIR/managed/"
  chmod -R u+w "$CRD_DIR"
  echo "$crd_want" > "$CRD_DIR/.stamp"
  log "OCM CRDs copied to $CRD_DIR"
fi
log "all binaries in $BIN_DIR"
