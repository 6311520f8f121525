#!/usr/bin/env bash
# The base image for the Dockerfile's NODE_IMAGE build argument; prints its
# reference on stdout (everything else goes to stderr).
#
# The official base is the Dockerfile's default (ARG NODE_IMAGE=node:X-SUITE-slim).
# NODE_BASE=auto (default) uses it when it is in the store or can be pulled;
# otherwise (no registry reachable, as in CI) it makes the same content
# locally and caches it in the store:
#   - Debian SUITE, minimal (debootstrap --variant=minbase), from the Debian
#     archive this machine's apt is configured with (read at run time), slimmed
#     the way debian:SUITE-slim is (no docs, man pages, locales);
#   - Node.js X: bin/node, include/ and share/ of the npm registry's
#     node-linux-ARCH@X package (what the `node` devDependency installs);
#   - npm: the version Node.js X bundles (its changelog's last npm upgrade),
#     from the npm registry's `npm` package, in /usr/local/lib/node_modules/npm;
#   - the `node` user (uid 1000), ENV NODE_VERSION and PATH, CMD ["node"].
# Yarn and corepack of the official image are left out (the runtime stage
# removes them anyway). NODE_BASE=official or NODE_BASE=local forces a side.
# The local base is rebuilt when this script changes (label nft-netpol.recipe).
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/../.."
podman() { scripts/image/podman.sh "$@"; }
log() { echo "base: $*" >&2; }

official=$(sed -n 's/^ARG NODE_IMAGE=//p' Dockerfile)
tag=${official#node:}
tag=${tag%%@*}
node_version=${tag%%-*}
suite=${tag#*-}
suite=${suite%-slim}
if [[ ! $official =~ ^node:[0-9]+\.[0-9]+\.[0-9]+-[a-z]+-slim(@sha256:[0-9a-f]{64})?$ ]]; then
  log "Dockerfile: ARG NODE_IMAGE=$official is not node:X.Y.Z-SUITE-slim[@sha256:...]"
  exit 1
fi
locked=$(sed -n '/"node_modules\/node": {/,/}/s/^ *"version": "\([^"]*\)".*/\1/p' package-lock.json | head -n1)
if [ "$locked" != "$node_version" ]; then
  log "Dockerfile NODE_IMAGE is Node.js $node_version but package-lock.json locks node $locked: make them the same"
  exit 1
fi

mode=${NODE_BASE:-auto}
remote="docker.io/library/$official"
case "$mode" in
  auto | official)
    if podman image exists "$remote"; then
      echo "$remote"
      exit 0
    fi
    if podman pull -q "$remote" >&2 2>/dev/null; then
      echo "$remote"
      exit 0
    fi
    if [ "$mode" = official ]; then
      log "cannot pull $remote"
      exit 1
    fi
    log "$remote cannot be pulled here: using a locally made base with the same content"
    ;;
  local) ;;
  *)
    log "NODE_BASE must be auto, official or local (is $mode)"
    exit 2
    ;;
esac

darch=$(dpkg --print-architecture)
case "$darch" in
  amd64) narch=x64 ;;
  arm64) narch=arm64 ;;
  ppc64el) narch=ppc64le ;;
  s390x) narch=s390x ;;
  *)
    log "no Node.js package for Debian architecture $darch"
    exit 1
    ;;
esac
recipe=$(sha256sum "$self" | cut -c1-16)
local_ref="localhost/nft-netpol-node-base:$tag"

# One maker at a time (parallel test runs share the store).
exec 9>/run/lock/nft-netpol-node-base.lock
flock 9
have=$(podman image inspect --format '{{index .Labels "nft-netpol.recipe"}}' "$local_ref" 2>/dev/null || true)
if [ "$have" = "$recipe" ]; then
  echo "$local_ref"
  exit 0
fi

# The Debian archive(s) apt is configured with for SUITE, SUITE-updates, SUITE-security.
declare -A suites_of=()
while read -r uri release target; do
  [ "$target" = deb ] || continue
  case "$release" in "$suite" | "$suite"-updates | "$suite"-security) ;; *) continue ;; esac
  suites_of[$uri]="${suites_of[$uri]:-}${suites_of[$uri]:+ }$release"
done < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' | sort -u)
mirror=""
for uri in "${!suites_of[@]}"; do
  for s in ${suites_of[$uri]}; do [ "$s" = "$suite" ] && mirror=$uri; done
done
if [ -z "$mirror" ]; then
  log "apt is configured with no Debian $suite archive (see /etc/apt/sources.list and /etc/apt/sources.list.d/)"
  exit 1
fi

work=$(mktemp -d /var/tmp/nft-netpol-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
start=$SECONDS
log "debootstrap --variant=minbase $suite from $mirror"
include=()
[[ $mirror == https:* ]] && include=(--include=ca-certificates)
debootstrap --variant=minbase --arch="$darch" "${include[@]}" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}

# Slim as debian:SUITE-slim: dpkg keeps documentation out of later installs, and the present copies go.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
find "$rootfs/usr/share/locale" -mindepth 1 -not -name locale.alias -not -type d -delete
find "$rootfs/usr/share/locale" -mindepth 1 -type d -empty -delete
rm -rf "$rootfs"/usr/share/{groff,info,linda,lintian,man}/*
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
# The same archives as the host, in the deb822 form the official image uses.
rm -f "$rootfs/etc/apt/sources.list"
for uri in $(printf '%s\n' "${!suites_of[@]}" | sort); do
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
    "$uri" "${suites_of[$uri]}"
done >"$rootfs/etc/apt/sources.list.d/debian.sources"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
: >"$rootfs/etc/machine-id"

# Node.js and npm from the npm registry.
log "node-linux-$narch@$node_version from the npm registry"
(cd "$work" && npm pack --loglevel=error --pack-destination "$work" "node-linux-$narch@$node_version" >/dev/null)
tar -xzf "$work/node-linux-$narch-$node_version.tgz" -C "$rootfs/usr/local" --strip-components=1 --no-same-owner \
  package/bin package/include package/share
npm_version=$(tar -xzOf "$work/node-linux-$narch-$node_version.tgz" package/CHANGELOG.md |
  sed -n 's/.*\(upgrade\|update\) npm to \([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\).*/\2/p' | head -n1)
if [ -z "$npm_version" ]; then
  log "cannot tell which npm Node.js $node_version bundles (its CHANGELOG.md names no npm upgrade)"
  exit 1
fi
log "npm@$npm_version (bundled with Node.js $node_version) from the npm registry"
(cd "$work" && npm pack --loglevel=error --pack-destination "$work" "npm@$npm_version" >/dev/null)
mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/npm-$npm_version.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
chroot "$rootfs" /usr/local/bin/node --version >/dev/null

log "importing $local_ref"
tar --numeric-owner -C "$rootfs" -c . | podman import -q \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV NODE_VERSION=$node_version" \
  --change 'CMD ["node"]' \
  --change "LABEL nft-netpol.recipe=$recipe" \
  --change "LABEL nft-netpol.same-content-as=$official" \
  --change "LABEL nft-netpol.npm-version=$npm_version" \
  - "$local_ref" >/dev/null
log "made $local_ref in $((SECONDS - start)) s"
echo "$local_ref"
