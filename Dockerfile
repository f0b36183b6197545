# syntax=docker/dockerfile:1
#
# One image, three entry points (the chart and the agent's ManifestWork name the command):
#   node /app/manager/addon/main.ts     the addon manager (hub)
#   node --max-semi-space-size=2 --expose-gc /app/manager/gateway/main.ts   the gateway (hub; the default command)
#   node --no-opt --no-maglev --max-semi-space-size=1 --v8-pool-size=1 /app/agent/main.ts   the agent (managed clusters)
# Node 24 runs the TypeScript sources directly (type stripping): nothing is compiled, and the image
# holds the sources, production dependencies and Node's compile cache, which keeps the agent under its
# memory budget (docs/benchmarks-log.md, "Agent footprint").
#
# Build (see docs/image.md):
#   docker build -t ghcr.io/oam-dev/cluster-gateway-ts:$(node -p "require('./package.json').version") .
# For a reproducible build, pin the base image by digest:
#   docker build --build-arg NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:<digest> ...
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# Production dependencies only, exactly as package-lock.json pins them; no install scripts run.
FROM ${NODE_IMAGE} AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# The sources the three programs load (no tests, no hack/ or e2e/), and the compile cache they fill.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY package.json ./
COPY shared ./shared
COPY manager ./manager
COPY agent ./agent
RUN find shared manager agent \( -name '*.test.ts' -o -name 'test-kit.ts' -o -name 'test-fixtures.ts' -o -name 'testing.ts' -o -name '*.md' \) -delete \
 && mkdir -p /app/.cache/node-compile-cache && chown 65532:65532 /app/.cache/node-compile-cache
# Node names its compile-cache folder after the V8 flags and the user id (v24.x-x64-<hash of flags>-<uid>):
# a cache filled as root, or without a program's own flags, is never found by the pods. So each program
# fills it as the pods run it: user 65532, the same Node flags (the gateway's as the manager's Deployment
# of it sets them, manager/addon/gateway-deploy/workload.ts; the agent's as its ManifestWork does,
# manager/addon/deploy/agent-manifests.ts). The agent imports tunnel/impersonation.ts only with the
# no-credential trust model, which --help does not load: running that module warms it.
USER 65532:65532
ENV NODE_COMPILE_CACHE=/app/.cache/node-compile-cache
RUN node manager/addon/main.ts --help > /dev/null \
 && node --max-semi-space-size=2 --expose-gc manager/gateway/main.ts --help > /dev/null \
 && node --no-opt --no-maglev --max-semi-space-size=1 --v8-pool-size=1 agent/main.ts --help > /dev/null \
 && node --no-opt --no-maglev --max-semi-space-size=1 --v8-pool-size=1 agent/tunnel/impersonation.ts \
 && chmod -R a+rX /app/.cache/node-compile-cache

FROM ${NODE_IMAGE}
LABEL org.opencontainers.image.source="https://github.com/oam-dev/cluster-gateway-ts" \
      org.opencontainers.image.description="cluster-gateway: addon manager, gateway and agent" \
      org.opencontainers.image.licenses="Apache-2.0"
# npm and corepack are not needed at run time: fewer files, fewer CVEs to track.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack
WORKDIR /app
# Owned by root and read-only to the process: the pods run with readOnlyRootFilesystem anyway.
COPY --from=build /app /app
ENV NODE_ENV=production \
    NODE_COMPILE_CACHE=/app/.cache/node-compile-cache
# The chart's and the agent's securityContext run as 65532 too (runAsNonRoot needs a numeric user).
USER 65532:65532
ENTRYPOINT ["node"]
# The gateway's Node flags as the manager's Deployment sets them (manager/addon/gateway-deploy/workload.ts).
CMD ["--max-semi-space-size=2", "--expose-gc", "/app/manager/gateway/main.ts"]
