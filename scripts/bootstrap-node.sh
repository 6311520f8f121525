#!/usr/bin/env bash
# Ensures a Node.js >= 22.19 is available. Prints the bin directory to put first on PATH.
# If the system node is too old, installs the current LTS from the npm registry
# (the `node` package) into .tools/ of this repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
want_major=22; want_minor=19
ok() { "$1" -e "const [a,b]=process.versions.node.split('.').map(Number);process.exit(a>$want_major||(a===$want_major&&b>=$want_minor)?0:1)" 2>/dev/null; }
if command -v node >/dev/null && ok node; then dirname "$(command -v node)"; exit 0; fi
bin="$root/.tools/node_modules/.bin"
if [ -x "$bin/node" ] && ok "$bin/node"; then echo "$bin"; exit 0; fi
command -v npm >/dev/null || { echo "bootstrap-node: npm is needed to install Node.js (apt-get install npm)" >&2; exit 1; }
mkdir -p "$root/.tools"
npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$root/.tools" node@24 >&2
ok "$bin/node" || { echo "bootstrap-node: installed node is not >= $want_major.$want_minor" >&2; exit 1; }
echo "$bin"
