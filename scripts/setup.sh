#!/usr/bin/env bash
# One-time setup on Debian: the system packages the tests use
# (.ci/apt-packages, plus npm if there is none) and the npm dependencies from
# the lockfile. Node.js itself comes from the lockfile too: the `node`
# devDependency puts the current LTS binary in node_modules/.bin, which npm
# scripts put first on PATH, so `npm test` and `npm run ...` run on Node 24
# whatever Node the machine has (Debian 12 ships 18).
# podman, buildah, runc and debootstrap build and run the container image in
# the image tests; their engine and storage settings are files of the
# repository (scripts/image/containers.conf, storage.conf), which
# scripts/image/podman.sh passes to every podman and buildah call: nothing is
# written to /etc/containers. Recommends stay out (crun among them: it refuses
# this kernel's hybrid cgroup mounts; runc is the runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t pkgs < <(grep -vE '^\s*(#|$)' .ci/apt-packages)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
npm ci --no-audit --no-fund --loglevel=error
echo "setup: done; npm scripts run on $(node_modules/.bin/node --version) from node_modules/.bin"
