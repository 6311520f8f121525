#!/usr/bin/env bash
# podman (or buildah: `podman.sh --buildah ...`) with the project's engine and
# storage settings (containers.conf, storage.conf beside this file), so the
# build script, the tests and a person at the terminal use the same store:
#   scripts/image/podman.sh images
#   scripts/image/podman.sh run --rm IMAGE --help
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CONTAINERS_CONF="$here/containers.conf"
export CONTAINERS_STORAGE_CONF="$here/storage.conf"
if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
  echo "podman.sh: the kernel has no overlay filesystem, which storage.conf uses" >&2
  exit 1
fi
if [ "${1:-}" = "--buildah" ]; then
  shift
  exec buildah "$@"
fi
exec podman "$@"
