#!/usr/bin/env bash
# Builds a local stand-in for the pinned python:3.13-slim-trixie base image from Debian's
# archive alone (debootstrap + `docker import`), for machines that reach no container registry.
#
#   images/offline-base.sh [TAG]        default TAG: code-execution-mcp/python-base:3.13-trixie
#
# Environment: DEBIAN_MIRROR (default: debootstrap's own default mirror), FORCE=1 to rebuild an
# image that already exists. Needs root, debootstrap and a running Docker engine.
set -euo pipefail

tag=${1:-code-execution-mcp/python-base:3.13-trixie}
suite=trixie

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "offline-base: $tag already present (FORCE=1 rebuilds it)"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "offline-base: debootstrap is missing: apt-get install -y debootstrap" >&2
  exit 1
fi
if [ ! -e "/usr/share/debootstrap/scripts/$suite" ]; then
  echo "offline-base: this debootstrap does not know '$suite': install a newer debootstrap" >&2
  exit 1
fi

work=$(mktemp -d /tmp/offline-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/root"

echo "offline-base: debootstrap $suite (minbase + python3.13) into $root"
debootstrap --variant=minbase --include=python3.13,python3,python-is-python3,ca-certificates,tzdata \
  "$suite" "$root" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "offline-base: debootstrap failed (log above)" >&2
  exit 1
}

# Slim it the way the official slim images are: no package lists, caches, docs or man pages.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/tmp/*
chroot "$root" python3 -c 'import sys; assert sys.version_info[:2] == (3, 13), sys.version'

echo "offline-base: importing as $tag"
tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  - "$tag" >/dev/null
echo "offline-base: built $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
