#!/usr/bin/env bash
# The Debian packages the environment's real nodes and the image build need, installed only when one is
# missing: containerd and runc (the container runtime every node's kubelet talks to), the CNI plugins
# (the pods' bridge), iptables (the kubernetes Service's NAT), podman and debootstrap (the image and its
# local Node base, hack/image/build.sh). Needs root, as the nodes do.
set -euo pipefail
log() { printf '[packages %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# command or file -> the package that provides it
declare -A wanted=(
  [containerd]=containerd [ctr]=containerd [runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables [ip]=iproute2 [podman]=podman [debootstrap]=debootstrap [gcc]=gcc
)
missing=()
for what in "${!wanted[@]}"; do
  if [[ "$what" == /* ]]; then [ -e "$what" ] && continue; else command -v "$what" >/dev/null && continue; fi
  missing+=("${wanted[$what]}")
done
if [ ${#missing[@]} -eq 0 ]; then log "all present"; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "[packages] missing ${missing[*]}: run as root, or: sudo apt-get install ${missing[*]}" >&2; exit 1; }
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || apt-get update
# Debian's containerd package starts a system containerd where systemd runs; the environment runs its
# own per node and never uses it.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed"
