#!/usr/bin/env bash
# Builds a local stand-in for the pinned python:3.13-slim-trixie base image from Debian's
# archive alone (debootstrap + `docker import`), for machines that reach no container registry.
#
#   images/offline-base.sh [--profile minimal|data] [TAG]
#
# minimal (default TAG code-execution-mcp/python-base:3.13-trixie): Python 3.13 alone.
# data (default TAG code-execution-mcp/python-base:3.13-trixie-data): also Debian's packages of
# the data profile's libraries (DATA_PACKAGES below: the same libraries images/python/
# requirements-data.lock pins as wheels for the registry path; Debian has no pyarrow), so the
# sandbox Dockerfile finds them installed and needs no pip.
#
# Environment: DEBIAN_MIRROR (default: debootstrap's own default mirror), FORCE=1 to rebuild an
# image that already exists. Needs root, debootstrap and a running Docker engine.
set -euo pipefail

profile=minimal
if [ "${1:-}" = --profile ]; then
  profile=${2:?"--profile needs minimal or data"}
  shift 2
fi
case "$profile" in
  minimal) tag=${1:-code-execution-mcp/python-base:3.13-trixie} ;;
  data) tag=${1:-code-execution-mcp/python-base:3.13-trixie-data} ;;
  *) echo "offline-base: unknown profile '$profile' (minimal or data)" >&2; exit 2 ;;
esac
suite=trixie
# Debian packages of the data profile (python3-matplotlib brings pillow, fonttools, kiwisolver,
# contourpy; fonts-dejavu-core gives matplotlib its default font without recommends).
DATA_PACKAGES=python3-numpy,python3-pandas,python3-scipy,python3-matplotlib,python3-pil,python3-openpyxl,python3-xlsxwriter,python3-xlrd,python3-seaborn,python3-tabulate,python3-tz,python3-dateutil,fonts-dejavu-core
# python3-pip-whl: pip as a wheel, run from the wheel by `image build --requirements` (Debian's
# python has no pip module; the wheel adds 2 MB and nothing runs it at execution time).
include=python3.13,python3,python-is-python3,ca-certificates,tzdata,python3-pip-whl
if [ "$profile" = data ]; then
  include="$include,$DATA_PACKAGES"
fi
# An image made from another package list is rebuilt: the list is its label.
recipe=$(printf '%s' "$suite:$include" | sha256sum | cut -c1-16)

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "offline-base: debootstrap is missing: apt-get install -y debootstrap" >&2
  exit 1
fi
if [ ! -e "/usr/share/debootstrap/scripts/$suite" ]; then
  echo "offline-base: this debootstrap does not know '$suite': install a newer debootstrap" >&2
  exit 1
fi

have=$(docker image inspect -f '{{index .Config.Labels "io.code-execution-mcp.offline-recipe"}}' "$tag" 2>/dev/null || true)
if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$recipe" ]; then
  echo "offline-base: $tag already present (FORCE=1 rebuilds it)"
  exit 0
fi

work=$(mktemp -d /tmp/offline-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/root"

echo "offline-base: debootstrap $suite (minbase + python3.13, profile $profile) into $root"
debootstrap --variant=minbase --include="$include" \
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
if [ "$profile" = data ]; then
  chroot "$root" python3 -c 'import numpy, pandas, scipy, matplotlib, PIL, openpyxl, xlsxwriter, xlrd, seaborn, tabulate'
fi

echo "offline-base: importing as $tag"
tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  --change "LABEL io.code-execution-mcp.offline-recipe=$recipe" \
  - "$tag" >/dev/null
echo "offline-base: built $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
