#!/usr/bin/env bash
# Builds the project's image from the repository's Dockerfile with podman, as a user's build would,
# on a Node base image made on this machine (no image registry is reachable here):
#
#   base   Debian bookworm (debootstrap minbase, Debian's packages) + the Node binary and npm from the
#          npm registry (the versions package-lock.json pins), laid out as the official node image
#          (/usr/local/bin/node, /usr/local/lib/node_modules/npm). It carries this machine's CA
#          bundle as NODE_EXTRA_CA_CERTS, which npm inside the build needs to trust the registry.
#   image  `podman build --build-arg NODE_IMAGE=<base> .`: the Dockerfile is the one that builds the
#          published image elsewhere on node:24-bookworm-slim.
#
# Both are cached by the content they are built from: an unchanged tree does not rebuild. Prints the
# image reference on its last line and writes it, with the path of a `podman save` archive that
# containerd imports (hack/localenv/containerd.ts), to .cache/image/current.json.
#
#   bash hack/image/build.sh            build what is missing, print the image reference
#   IMAGE_REBUILD=1 bash hack/image/build.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
CACHE="$ROOT/.cache/image"
mkdir -p "$CACHE"
log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[image] error: %s\n' "$*" >&2; exit 1; }

for tool in podman debootstrap gcc; do
  command -v "$tool" >/dev/null || die "$tool is not installed: apt-get install podman debootstrap (hack/install-packages.sh installs all the environment needs)"
done
NODE_BIN="$ROOT/node_modules/node/bin/node"
[ -x "$NODE_BIN" ] || die "no Node in node_modules: run npm ci first"
NODE_VERSION="$("$NODE_BIN" -p process.versions.node)"
NPM_VERSION="$(npm --version)"
CA_BUNDLE="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
[ -f "$CA_BUNDLE" ] || die "no CA bundle at $CA_BUNDLE (set NODE_EXTRA_CA_CERTS)"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# The flags every podman call needs on these machines: runc (crun refuses hybrid cgroups) and explicit
# limits (the machine's hard nofile limit is lower than podman's default, and setrlimit fails).
PODMAN_RUN_FLAGS=(--runtime runc --ulimit nofile=20000:20000 --ulimit nproc=4096:4096)

key() { sha256sum | cut -c1-16; }

# --- base -------------------------------------------------------------------------------------------
# Bump the recipe's number when the steps below change what the base holds.
base_key="$( { echo "recipe 1: bookworm minbase $DEBIAN_MIRROR node $NODE_VERSION npm $NPM_VERSION"; cat "$CA_BUNDLE"; } | key)"
BASE="localhost/cluster-gateway-node-base:$NODE_VERSION-$base_key"
if [ -z "${IMAGE_REBUILD:-}" ] && podman image exists "$BASE"; then
  log "base $BASE: up to date"
else
  log "base $BASE: debootstrap bookworm (minbase), Node $NODE_VERSION, npm $NPM_VERSION"
  start=$SECONDS
  rootfs="$CACHE/rootfs-bookworm"
  if [ ! -f "$rootfs/.complete" ]; then
    rm -rf "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
      || die "debootstrap failed: see $CACHE/debootstrap.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    touch "$rootfs/.complete"
  fi
  staging="$CACHE/base-staging"
  rm -rf "$staging" && cp -a "$rootfs" "$staging" && rm -f "$staging/.complete"
  mkdir -p "$staging/usr/local/bin" "$staging/usr/local/lib/node_modules/npm" "$staging/etc/ssl/certs"
  cp "$NODE_BIN" "$staging/usr/local/bin/node"
  (cd "$CACHE" && rm -f npm-*.tgz && npm pack --silent "npm@$NPM_VERSION" >/dev/null)
  tar -xzf "$CACHE/npm-$NPM_VERSION.tgz" -C "$staging/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$staging/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$staging/usr/local/bin/npx"
  cp "$CA_BUNDLE" "$staging/etc/ssl/certs/ca-certificates.crt"
  tar -C "$staging" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["node"]' - "$BASE" >/dev/null
  rm -rf "$staging"
  podman images --format '{{.Repository}}:{{.Tag}}' localhost/cluster-gateway-node-base | grep -vxF "$BASE" \
    | xargs -r podman rmi >/dev/null 2>&1 || true
  log "base built in $((SECONDS - start))s"
fi

# --- pause ------------------------------------------------------------------------------------------
# The pod sandbox image, which no registry serves here: Kubernetes' own pause.c from the pinned module,
# compiled statically into a one-file image.
KUBE_VERSION="$(grep -oE 'k8s.io/kubernetes v[0-9.]+' hack/tools/kube/go.mod | head -1 | cut -d' ' -f2)"
PAUSE="localhost/pause:$KUBE_VERSION"
PAUSE_ARCHIVE="$CACHE/pause-$KUBE_VERSION.tar"
if [ -z "${IMAGE_REBUILD:-}" ] && podman image exists "$PAUSE" && [ -f "$PAUSE_ARCHIVE" ]; then
  log "$PAUSE: up to date"
else
  kube_dir="$(cd hack/tools/kube && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
  rm -rf "$CACHE/pause-rootfs" && mkdir -p "$CACHE/pause-rootfs"
  gcc -Os -static -DVERSION="$KUBE_VERSION" -o "$CACHE/pause-rootfs/pause" "$kube_dir/build/pause/linux/pause.c"
  strip "$CACHE/pause-rootfs/pause"
  tar -C "$CACHE/pause-rootfs" -c pause | podman import --change 'ENTRYPOINT ["/pause"]' - "$PAUSE" >/dev/null
  podman save -o "$PAUSE_ARCHIVE.partial" "$PAUSE" >/dev/null && mv "$PAUSE_ARCHIVE.partial" "$PAUSE_ARCHIVE"
  rm -rf "$CACHE/pause-rootfs"
  log "$PAUSE built"
fi

# --- image ------------------------------------------------------------------------------------------
# What the Dockerfile copies: its own text, the manifests and every tracked or new source file of the
# three program folders (git's view, so editor leftovers and ignored files do not count).
image_key="$( {
  echo "$BASE"
  cat Dockerfile package.json package-lock.json
  git ls-files -co --exclude-standard -z shared manager agent | sort -z | xargs -0 sha256sum
} | key)"
IMAGE="localhost/cluster-gateway-ts:dev-$image_key"
ARCHIVE="$CACHE/cluster-gateway-ts-$image_key.tar"
if [ -z "${IMAGE_REBUILD:-}" ] && podman image exists "$IMAGE" && [ -f "$ARCHIVE" ]; then
  log "$IMAGE: up to date"
else
  log "$IMAGE: podman build (Dockerfile, NODE_IMAGE=$BASE)"
  start=$SECONDS
  podman build "${PODMAN_RUN_FLAGS[@]}" --network host --pull=never \
    --build-arg "NODE_IMAGE=$BASE" -t "$IMAGE" -f Dockerfile . >"$CACHE/build.log" 2>&1 \
    || { tail -30 "$CACHE/build.log" >&2; die "podman build failed: see $CACHE/build.log"; }
  # Earlier builds of this tree's image: one image and one archive are kept.
  rm -f "$CACHE"/cluster-gateway-ts-*.tar
  podman images --format '{{.Repository}}:{{.Tag}}' localhost/cluster-gateway-ts | grep -vxF "$IMAGE" \
    | xargs -r podman rmi >/dev/null 2>&1 || true
  podman image prune -f >/dev/null 2>&1 || true
  podman save -o "$ARCHIVE.partial" "$IMAGE" >/dev/null && mv "$ARCHIVE.partial" "$ARCHIVE"
  log "built in $((SECONDS - start))s"
fi
printf '{"image":"%s","archive":"%s","pause":"%s","pauseArchive":"%s","base":"%s"}\n' \
  "$IMAGE" "$ARCHIVE" "$PAUSE" "$PAUSE_ARCHIVE" "$BASE" >"$CACHE/current.json"
echo "$IMAGE"
