#!/usr/bin/env bash
# Idle footprint of every process the project ships (gateway, addon manager, agents), as `npm start` runs them:
# starts the local environment, waits until it is ready plus IDLE seconds (default 60), then prints each
# process's VmRSS and its CPU use over the next 30 s (percent of one core), and stops the environment.
#   bash e2e/bench/footprint.sh          (= npm run bench:footprint; needs npm ci)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
log="$(mktemp)"
node_modules/.bin/node hack/local-up.ts >"$log" 2>&1 &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 180); do grep -q '] ready: ' "$log" && break; sleep 1; done
grep -q '] ready: ' "$log" || { cat "$log"; echo "the environment did not become ready" >&2; exit 1; }
sleep "${IDLE:-60}"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
printf '%-10s %8s %8s %14s\n' process pid 'RSS MB' 'CPU % (30 s)'
declare -A before
pids=()
for pattern in manager/gateway/main.ts manager/addon/main.ts agent/main.ts; do
  for pid in $(pgrep -f "node.*$pattern" || true); do before[$pid]=$(ticks "$pid"); pids+=("$pid:$pattern"); done
done
sleep 30
for entry in "${pids[@]}"; do
  pid=${entry%%:*}; pattern=${entry#*:}
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  cpu=$(( ($(ticks "$pid") - before[$pid]) * 100 / 30 ))  # clock ticks (1/100 s) per 30 s, as hundredths of a %
  name=$(case $pattern in manager/gateway*) echo gateway;; manager/addon*) echo manager;; *) echo agent;; esac)
  printf '%-10s %8s %8s %11s.%02d\n' "$name" "$pid" "$((rss / 1024))" "$((cpu / 100))" "$((cpu % 100))"
done
