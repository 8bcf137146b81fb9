#!/usr/bin/env bash
# A private Docker engine with gVisor's runsc registered, for running the server and its tests
# under `--runtime runsc` without touching the host's engine. Root only.
#
#   tests/engines/gvisor.sh up [DIR]     start it (DIR: /tmp/cem-gvisor), load the sandbox
#                                         images from the host's engine, print
#                                         DOCKER_HOST=unix://DIR/run/docker.sock as the last line
#   tests/engines/gvisor.sh down [DIR]   stop it and remove everything `up` made; safe to repeat
#
# The engine runs in network, mount and UTS namespaces of its own: a dockerd in the host's
# network namespace deletes the host's docker0, even with `--bridge none`. In its mount
# namespace it gets the cgroup hierarchies `ip netns exec` hides and its own /run (DIR/run),
# which is where its socket is. It uses the host's `runsc` package (Debian's, installed when
# missing), registered as README's "Engines" section says:
#   --network=none  runsc refuses to start containers "with network enabled in root network
#                   namespace" on kernels that show network sysctls everywhere (gVisor #10704);
#                   the sandbox has no network anyway.
#   --oci-seccomp   without it runsc ignores the sandbox's seccomp profile.
# Only the ptrace platform is used: it needs no virtualisation. Two faulty registrations are
# there for tests/gvisor.rs: `runsc-networked`, without --network=none (on such kernels every
# start under it fails after runsc created the sandbox, the failure whose leftovers the server
# ends), and `runsc-no-seccomp`, without --oci-seccomp (which `serve` refuses).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=namespaced.sh
. "$here/namespaced.sh"
cmd=${1:?usage: gvisor.sh up|down [DIR]}
dir=${2:-/tmp/cem-gvisor}
netns_file="$dir/netns"

[ "$(id -u)" = 0 ] || { echo "gvisor.sh: run as root (it starts a dockerd)" >&2; exit 1; }

sock() { echo "$dir/run/docker.sock"; }
private_docker() { docker -H "unix://$(sock)" "$@"; }

# Runs inside `ip netns exec NS unshare --mount --uts`: the cgroup hierarchies, the engine's
# own /run, then dockerd (which starts its own containerd under that /run).
entry() {
  mount_cgroups
  hostname cem-gvisor
  ip link set lo up
  mount --bind "$dir/run" /run
  exec dockerd --config-file "$dir/daemon.json" --data-root "$dir/docker" \
    -H unix:///run/docker.sock --exec-root /run/docker --pidfile /run/docker.pid \
    --cgroup-parent "/$(cat "$netns_file")" >"$dir/dockerd.log" 2>&1
}

up() {
  if [ -e "$netns_file" ]; then
    echo "gvisor.sh: $dir already holds an engine (gvisor.sh down $dir first)" >&2
    exit 1
  fi
  local runsc
  runsc=$(command -v runsc || true)
  if [ -z "$runsc" ]; then
    echo "gvisor.sh: installing runsc from Debian's archive" >&2
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q runsc >&2
    runsc=$(command -v runsc)
  fi
  mkdir -p "$dir/run" "$dir/docker"
  local ns
  ns="cem-gvisor-$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')"
  echo "$ns" >"$netns_file"
  cat >"$dir/daemon.json" <<EOF
{
  "storage-driver": "overlay2",
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false,
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m"},
  "runtimes": {
    "runsc": {"path": "$runsc", "runtimeArgs": ["--network=none", "--oci-seccomp", "--host-uds=open"]},
    "runsc-networked": {"path": "$runsc", "runtimeArgs": ["--oci-seccomp"]},
    "runsc-no-seccomp": {"path": "$runsc", "runtimeArgs": ["--network=none"]}
  }
}
EOF
  # Mounts made on the host after the engine started (a workspace's loop-mounted quota, made
  # by the server under /tmp where the tests keep their directories) must reach the engine, as
  # they would an engine in the host's mount namespace: /tmp becomes a shared mount (a bind of
  # itself unless it is a mount already) that the engine's namespace follows as a slave, so
  # nothing the engine mounts comes back.
  if ! mountpoint -q /tmp; then
    mount --bind /tmp /tmp
    touch "$dir/tmp-bound"
  fi
  findmnt -no PROPAGATION /tmp >"$dir/tmp-propagation"
  mount --make-shared /tmp
  ip netns add "$ns"
  setsid ip netns exec "$ns" unshare --mount --uts --propagation slave -- \
    bash -c 'echo $$ > "$1/entry.pid"; exec bash "$0" _entry "$1"' "$here/gvisor.sh" "$dir" \
    >"$dir/entry.log" 2>&1 </dev/null &
  if ! wait_for "the private engine" 120 private_docker version; then
    tail -n 30 "$dir/dockerd.log" >&2 || true
    exit 1
  fi
  # The sandbox images the host's engine has (both profiles, whichever were built).
  local images
  images=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^code-execution-mcp-sandbox:' || true)
  if [ -z "$images" ]; then
    echo "gvisor.sh: the host's engine has no sandbox image: build it first (README, \"The sandbox image\")" >&2
    exit 1
  fi
  # shellcheck disable=SC2086
  docker save $images | private_docker load -q >&2
  echo "DOCKER_HOST=unix://$(sock)"
}

down() {
  [ -e "$netns_file" ] || { rm -rf "$dir"; return 0; }
  local ns
  ns=$(cat "$netns_file")
  # gVisor's sandboxes and gofers run in namespaces of their own: ask runsc to end every
  # container it still knows under the engine's state root, then end what the namespace runs
  # (dockerd, containerd, shims) and what the engine's cgroups hold.
  local root="$dir/run/docker/runtime-runsc/moby"
  if [ -d "$root" ]; then
    local id
    for id in $(runsc --root "$root" list -quiet 2>/dev/null || true); do
      runsc --root "$root" delete -force "$id" >/dev/null 2>&1 || true
    done
  fi
  local pids
  pids="$(ip netns pids "$ns" 2>/dev/null || true) $(cat /sys/fs/cgroup/*/"$ns"/*/cgroup.procs /sys/fs/cgroup/*/"$ns"/cgroup.procs 2>/dev/null || true)"
  # shellcheck disable=SC2086
  [ -z "${pids// }" ] || kill -9 $pids 2>/dev/null || true
  wait_for "the engine's processes to end" 60 bash -c "[ -z \"\$(ip netns pids $ns)\" ]" || true
  ip netns del "$ns" 2>/dev/null || true
  local d
  for d in /sys/fs/cgroup/*/"$ns"; do
    [ -d "$d" ] && { find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
  done
  # /tmp as it was: unbound, or back to its own propagation.
  if [ -e "$dir/tmp-bound" ]; then
    umount /tmp 2>/dev/null || umount -l /tmp
  elif [ "$(cat "$dir/tmp-propagation" 2>/dev/null)" = private ]; then
    mount --make-private /tmp
  fi
  # Overlay mounts of the data root died with the engine's mount namespace.
  rm -rf "$dir"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  _entry) entry ;;
  *) echo "gvisor.sh: unknown command $cmd (up or down)" >&2; exit 2 ;;
esac
