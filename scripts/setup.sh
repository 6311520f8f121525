#!/usr/bin/env bash
# One-time setup on Debian: system packages the tests use (.ci/apt-packages),
# a Node.js >= 22.19 (the system one, or the LTS from the npm registry into
# .tools/), and the npm dependencies from the lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t pkgs < <(grep -vE '^\s*(#|$)' .ci/apt-packages)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root: sudo $0)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bin=$(bash scripts/bootstrap-node.sh)
export PATH="$bin:$PATH"
echo "setup: node $(node --version) from $bin"
npm ci --no-audit --no-fund --loglevel=error
case "$bin" in
  "$PWD"/.tools/*) echo "setup: this machine's node is older than 22.19; use the bootstrapped one: export PATH=\"$bin:\$PATH\"" ;;
esac
