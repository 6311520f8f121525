#!/usr/bin/env bash
# Builds the agent image from the repository's Dockerfile with podman (buildah
# inside), on the base that scripts/image/base.sh provides (the official
# node:X-SUITE-slim when a registry is reachable, else the same content made
# locally), passed through the Dockerfile's NODE_IMAGE build argument.
#
#   scripts/image/build.sh [--tag NAME:TAG] [--iidfile FILE]
#
# Default tag: localhost/nft-netpol-agent:<package.json version>. RUN steps
# use the host network (npm ci, apt-get); no podman network is created. Layers
# are cached in the project's store (scripts/image/storage.conf): a rebuild
# with unchanged inputs takes seconds. Prints the image ID on stdout.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/../.."
version=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' package.json | head -n1)
tag="localhost/nft-netpol-agent:$version"
iidfile=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tag)
      tag=$2
      shift 2
      ;;
    --iidfile)
      iidfile=$2
      shift 2
      ;;
    *)
      echo "usage: $0 [--tag NAME:TAG] [--iidfile FILE]" >&2
      exit 2
      ;;
  esac
done
for cmd in podman buildah debootstrap; do
  command -v "$cmd" >/dev/null || {
    echo "build: $cmd is not installed (scripts/setup.sh installs it)" >&2
    exit 1
  }
done

base=$(scripts/image/base.sh)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
tmp=$(mktemp)
trap 'rm -rf "$tmp" "$tmp.home"' EXIT
# A machine whose npm trusts an extra CA (a TLS-inspecting egress proxy) lends
# that trust to the npm of the RUN steps: a scratch directory holding the CA
# and an .npmrc naming it is mounted over /root (HOME of uid 0) during RUN
# steps only. /root exists in the base, so no mount point lands in a layer
# (npm's cache goes to the scratch directory too).
trust=()
cafile=$(npm config get cafile 2>/dev/null || true)
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -r "$cafile" ]; then
  mkdir -p "$tmp.home"
  cp "$cafile" "$tmp.home/build-ca.crt"
  printf 'cafile=/root/build-ca.crt\n' >"$tmp.home/.npmrc"
  trust=(--volume "$tmp.home:/root")
fi
start=$SECONDS
echo "build: $tag on $base" >&2
scripts/image/podman.sh build --network host --layers --pull=false "${trust[@]}" \
  --build-arg "NODE_IMAGE=$base" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
  --iidfile "$tmp" --tag "$tag" --file Dockerfile . >&2
echo "build: done in $((SECONDS - start)) s" >&2
[ -z "$iidfile" ] || cp "$tmp" "$iidfile"
cat "$tmp"
echo
