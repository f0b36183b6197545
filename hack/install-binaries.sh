#!/usr/bin/env bash
# Builds the real control-plane binaries that the local environment and the
# end-to-end tests run, from their official Go modules (see hack/tools/*/go.mod
# for the pinned versions). Each group is rebuilt only when its go.mod/go.sum
# changes; the Go build cache makes a rebuild after a version bump incremental.
#
#   hack/install-binaries.sh                      build what is missing or stale
#   OCM_VERSION=1.2.1 hack/install-binaries.sh    another OCM release (one of hack/tools/ocm/v*)
#   BIN_DIR=/some/dir hack/install-binaries.sh
#
# OCM (registration, work, addon, placement, its CRDs) and clusteradm, built against that
# same OCM, go per OCM release into .cache/ocm/v<version>/{bin,crds}: switching
# releases never rebuilds, and never replaces files under a running environment.
# The default release is hack/tools/ocm/default-version.
#
# Where the module proxy refuses an OCM release's module zip (some proxies
# refuse v1.3.x), OCM_SOURCE_ARCHIVE names that release's source archive
# (ocm-v<version>-src.tar.gz, one top folder ocm-v<version>/, its sha256 pinned
# in hack/tools/ocm/v<version>/source-archive.sha256). It is extracted under
# .cache and replaces the module; .ci/run sets it from ../shared/ocm.
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
# database; go.sum files committed under hack/tools pin every hash instead
# (except where the proxy refuses a module zip, see hack/tools/ocm/v1.3.1).
export GONOSUMDB="${GONOSUMDB:-open-cluster-management.io,sigs.k8s.io/about-api}"
export GOFLAGS="${GOFLAGS:--mod=mod}"
export CGO_ENABLED=0

# The OCM release: OCM_VERSION accepts 1.2.1 or v1.2.1.
OCM_VERSION="${OCM_VERSION:-$(cat "$TOOLS/ocm/default-version")}"
OCM_VERSION="v${OCM_VERSION#v}"
OCM_PINS="$TOOLS/ocm/$OCM_VERSION"
[ -f "$OCM_PINS/ocm/go.mod" ] || die "OCM_VERSION=$OCM_VERSION is not a pinned OCM release; pinned: $(cd "$TOOLS/ocm" && echo v*)"
OCM_OUT="$(dirname "$BIN_DIR")/ocm/$OCM_VERSION"
OCM_MODULE=open-cluster-management.io/ocm

WORK_DIR="$(mktemp -d)"
trap 'rm -rf "$WORK_DIR"' EXIT

prebuilt() {
  local name="$1" dir
  for dir in ${CLUSTER_GATEWAY_ASSETS:-} ${KUBEBUILDER_ASSETS:-}; do
    [ -x "$dir/$name" ] && return 0
  done
  return 1
}

# OCM's source tree for $OCM_VERSION, resolved once, on first need, into
# OCM_SRC: the module the proxy serves, else the extracted OCM_SOURCE_ARCHIVE.
# OCM_REPLACE says whether builds must replace the module with that tree.
OCM_SRC="" OCM_REPLACE=""
resolve_ocm_source() {
  [ -n "$OCM_SRC" ] && return
  require_go
  local json
  # Asked outside any module, so no go.mod or go.sum changes.
  if json="$(cd "$WORK_DIR" && go mod download -json "$OCM_MODULE@$OCM_VERSION" 2>&1)"; then
    OCM_SRC="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
    OCM_REPLACE=""
    log "OCM $OCM_VERSION: source from the Go module proxy"
    return
  fi
  local refusal
  refusal="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",*$/\1/p' | sed 's/\\n.*//')"
  [ -n "${OCM_SOURCE_ARCHIVE:-}" ] || die "the Go module proxy does not serve $OCM_MODULE@$OCM_VERSION (${refusal:-$json}).
  Set OCM_SOURCE_ARCHIVE to its source archive, ocm-$OCM_VERSION-src.tar.gz (.ci/run sets it when the
  project's shared/ocm folder is beside the clone), or choose a release the proxy serves, e.g. OCM_VERSION=1.2.1."
  extract_ocm_archive "$OCM_SOURCE_ARCHIVE"
  OCM_REPLACE=1
  log "OCM $OCM_VERSION: the module proxy refuses it, source from $OCM_SOURCE_ARCHIVE"
}

# Extracts the archive into .cache/ocm/v<version>/src, again only when it
# differs from the extracted one; checks it against the pinned sha256.
extract_ocm_archive() {
  local archive="$1" sum pinned dest="$OCM_OUT/src" tmp
  [ -f "$archive" ] || die "OCM_SOURCE_ARCHIVE=$archive: no such file"
  sum="$(sha256sum "$archive" | cut -d' ' -f1)"
  pinned="$(cut -d' ' -f1 "$OCM_PINS/source-archive.sha256" 2>/dev/null || true)"
  [ -n "$pinned" ] || die "no pinned source archive for OCM $OCM_VERSION ($OCM_PINS/source-archive.sha256)"
  [ "$sum" = "$pinned" ] || die "OCM_SOURCE_ARCHIVE=$archive is not the pinned ocm-$OCM_VERSION-src.tar.gz (sha256 $sum, pinned $pinned in ${OCM_PINS#"$ROOT/"}/source-archive.sha256)"
  if [ "$(cat "$dest/.archive-sha256" 2>/dev/null)" != "$sum" ]; then
    tmp="$OCM_OUT/src.extracting"
    rm -rf "$tmp" && mkdir -p "$tmp"
    tar -xzf "$archive" -C "$tmp"
    [ -f "$tmp/ocm-$OCM_VERSION/go.mod" ] || die "$archive has no ocm-$OCM_VERSION/go.mod"
    grep -qx "module $OCM_MODULE" "$tmp/ocm-$OCM_VERSION/go.mod" || die "$archive is not the source of $OCM_MODULE"
    echo "$sum" > "$tmp/ocm-$OCM_VERSION/.archive-sha256"
    rm -rf "$dest" && mv "$tmp/ocm-$OCM_VERSION" "$dest" && rm -rf "$tmp"
  fi
  OCM_SRC="$dest"
}

# build [--ocm] GROUP MODULE_DIR OUT_DIR LDFLAGS PACKAGE...
# Builds into OUT_DIR the packages whose binary is missing there or whose pin
# (MODULE_DIR's go.mod and go.sum) changed since the last build. With --ocm the
# module depends on OCM $OCM_VERSION: it builds from a copy of go.mod/go.sum
# (so the committed ones never change) that, where the proxy refuses OCM,
# replaces the module with the extracted source.
build() {
  local with_ocm=""
  if [ "$1" = --ocm ]; then with_ocm=1; shift; fi
  local group="$1" dir="$2" out="$3" ldflags="$4"; shift 4
  local stamp="$out/.$group.stamp" want missing=() pkg name modflags=()
  want="$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$ldflags $*") | sha256sum | cut -c1-16)"
  for pkg in "$@"; do
    name="$(basename "$pkg")"
    prebuilt "$name" && continue
    if [ ! -x "$out/$name" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then missing+=("$pkg"); fi
  done
  if [ ${#missing[@]} -eq 0 ]; then log "$group: up to date"; return; fi
  require_go
  if [ -n "$with_ocm" ]; then
    resolve_ocm_source
    mkdir -p "$WORK_DIR/$group"
    cp "$dir/go.mod" "$WORK_DIR/$group/go.mod" && cp "$dir/go.sum" "$WORK_DIR/$group/go.sum"
    [ -z "$OCM_REPLACE" ] || go mod edit -replace="$OCM_MODULE=$OCM_SRC" "$WORK_DIR/$group/go.mod"
    modflags=("-modfile=$WORK_DIR/$group/go.mod")
  fi
  mkdir -p "$out"
  log "$group: building ${missing[*]##*/} (first build of this group takes minutes)"
  local start=$SECONDS
  (cd "$dir" && go build "${modflags[@]}" -trimpath -ldflags "-s -w $ldflags" -o "$out/" "${missing[@]}") \
    || die "building $group failed (see the Go output above)"
  echo "$want" > "$stamp"
  log "$group: built in $((SECONDS - start))s"
}

KUBE_VERSION="$(grep -oE 'k8s.io/kubernetes v[0-9.]+' "$TOOLS/kube/go.mod" | head -1 | cut -d' ' -f2)"
KUBE_MINOR="$(echo "$KUBE_VERSION" | cut -d. -f2)"
VERSION_PKG=k8s.io/component-base/version
build kube "$TOOLS/kube" "$BIN_DIR" "-X $VERSION_PKG.gitVersion=$KUBE_VERSION -X $VERSION_PKG.gitMajor=1 -X $VERSION_PKG.gitMinor=$KUBE_MINOR -X $VERSION_PKG.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler
build etcd "$TOOLS/etcd" "$BIN_DIR" "" cluster-gateway.local/hack/tools/etcd
HELM_VERSION="$(grep -oE 'helm.sh/helm/v3 v[0-9.]+' "$TOOLS/helm/go.mod" | head -1 | cut -d' ' -f2)"
build helm "$TOOLS/helm" "$BIN_DIR" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm.sh/helm/v3/cmd/helm
build --ocm ocm "$OCM_PINS/ocm" "$OCM_OUT/bin" "" \
  "$OCM_MODULE/cmd/registration" "$OCM_MODULE/cmd/work" "$OCM_MODULE/cmd/addon" "$OCM_MODULE/cmd/placement"
build --ocm clusteradm "$OCM_PINS/clusteradm" "$OCM_OUT/bin" "" open-cluster-management.io/clusteradm/cmd/clusteradm

# OCM's CRDs, exactly as the OCM release ships them (hub: cluster-manager;
# managed clusters: klusterlet), copied from the source the binaries were
# built from. With prebuilt binaries, OCM_CRDS may point at them instead.
CRD_DIR="$OCM_OUT/crds"
crd_want="$(cat "$OCM_PINS/ocm/go.mod" "$OCM_PINS/ocm/go.sum" | sha256sum | cut -c1-16)"
if [ -n "${OCM_CRDS:-}" ]; then
  log "OCM CRDs: using OCM_CRDS=$OCM_CRDS"
elif [ "$(cat "$CRD_DIR/.stamp" 2>/dev/null)" = "$crd_want" ]; then
  log "OCM $OCM_VERSION CRDs: up to date"
else
  resolve_ocm_source
  rm -rf "$CRD_DIR.new" && mkdir -p "$CRD_DIR.new/hub" "$CRD_DIR.new/managed"
  cp "$OCM_SRC"/manifests/cluster-manager/hub/crds/*.yaml "$CRD_DIR.new/hub/"
  cp "$OCM_SRC"/manifests/klusterlet/managed/*crd.yaml "$CRD_DIR.new/managed/"
  chmod -R u+w "$CRD_DIR.new"
  echo "$crd_want" > "$CRD_DIR.new/.stamp"
  rm -rf "$CRD_DIR" && mv "$CRD_DIR.new" "$CRD_DIR"
  log "OCM $OCM_VERSION CRDs copied to $CRD_DIR"
fi
log "all binaries in $BIN_DIR (OCM $OCM_VERSION and clusteradm in $OCM_OUT/bin)"
