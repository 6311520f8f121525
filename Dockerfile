# syntax=docker/dockerfile:1
# nft-netpol-agent image: Node.js LTS on Debian 12 (bookworm) slim, with
# Debian's nftables (1.0.6, the version the agent is tested with), conntrack
# (removes conntrack entries of deleted pod IPs), tcpdump (reads the NFLOG
# group of --log-denied) and tini as PID 1.
#
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/nft-netpol-agent/nft-netpol-agent:0.1.0 .
#
# The base image is pinned by tag. For reproducible release builds pin it by
# digest as well: --build-arg NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:<digest>
# (`docker buildx imagetools inspect node:24.21.0-bookworm-slim` prints it).
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# --- build: compile TypeScript to dist/ with the locked dev dependencies.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- prod-deps: only the production dependencies, from the same lockfile.
# Type declarations and source maps are never loaded at run time (40 MB of
# the 86 MB, most of it @kubernetes/client-node's): they stay out.
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
    && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete

# --- runtime
FROM ${NODE_IMAGE}
# nftables: the nft binary the agent drives. conntrack: optional clean-up of
# stale connections. tcpdump: with --log-denied, reads the deny path's NFLOG
# group and hands the agent a pcap stream (plain Node cannot open
# nfnetlink_log). tini: PID 1, forwards SIGTERM to node and reaps the nft and
# tcpdump child processes. The package manager tooling of the base image (npm,
# corepack, yarn) is not needed at run time and is removed.
RUN apt-get update \
    && apt-get install -y --no-install-recommends nftables conntrack tcpdump tini \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /opt/yarn-* \
    /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
# The CLI by its name, for `kubectl exec ... -- nft-netpol-agent denied -f`
# (and the other commands) without a shell.
COPY bin ./bin
RUN ln -s /app/bin/nft-netpol-agent.js /usr/bin/nft-netpol-agent
# Labels last: a new VERSION or REVISION does not invalidate the layers above.
ARG NODE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="nft-netpol-agent" \
    org.opencontainers.image.description="Kubernetes NetworkPolicy enforcer that programs each node's firewall with nftables" \
    org.opencontainers.image.source="https://github.com/nft-netpol-agent/nft-netpol-agent" \
    org.opencontainers.image.documentation="https://github.com/nft-netpol-agent/nft-netpol-agent/blob/main/docs/operations.md" \
    org.opencontainers.image.licenses="Apache-2.0" \
    org.opencontainers.image.version="${VERSION}" \
    org.opencontainers.image.revision="${REVISION}" \
    org.opencontainers.image.base.name="${NODE_IMAGE}"
# Memory (docs/operations.md, NODE_OPTIONS): the young generation capped at
# 2 x 8 MiB and two glibc malloc arenas. The DaemonSet sets both again, with
# the heap limit that fits its memory limit. NFTNP_COMMIT: the commit that
# `--version`, the agent's start line and nftnp_build_info report (the image
# has no .git to ask).
ENV NODE_ENV=production \
    NFTNP_COMMIT=${REVISION} \
    NODE_OPTIONS=--max-semi-space-size=8 \
    MALLOC_ARENA_MAX=2
# uid 0 on purpose, as in daemonset/daemonset.yaml: nft needs CAP_NET_ADMIN
# in its effective set, which a non-root user gets only from file
# capabilities, and those are ignored under no_new_privs
# (allowPrivilegeEscalation: false). The DaemonSet drops every capability
# but NET_ADMIN and mounts the root filesystem read-only.
USER 0:0
EXPOSE 9742
# Exec form: no shell at run time.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/cli/main.js"]
CMD ["run"]
