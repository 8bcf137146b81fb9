#!/usr/bin/env bash
# A rootless Docker engine run by a non-root user, for testing the server against one
# (tests/rootless.rs). Root runs it; the engine runs as the user.
#
#   tests/engines/rootless.sh up [USER]     start it (USER: cem-rootless, created when missing),
#                                           load the minimal sandbox images from the host's
#                                           engine (or those CEM_ROOTLESS_IMAGES names), print
#                                           DOCKER_HOST=unix://… as the last line
#   tests/engines/rootless.sh down [USER]   stop it and remove everything `up` made; safe to repeat
#
# The engine is Debian's: docker.io's dockerd-rootless.sh under RootlessKit (packages
# rootlesskit, uidmap, slirp4netns). RootlessKit gives it user, mount and network namespaces
# of its own (slirp4netns: never the host's network namespace, where a dockerd deletes the
# host's docker0). What the user needs and does not have on a fresh machine, `up` adds and
# `down` takes back: the user, subordinate uids and gids in /etc/subuid and /etc/subgid, an
# $XDG_RUNTIME_DIR (/run/user/UID), and use of /dev/net/tun (0600 root here; an ACL entry
# for the user alone, which slirp4netns needs to make the namespace's tap device).
set -euo pipefail

cmd=${1:?usage: rootless.sh up|down [USER]}
user=${2:-cem-rootless}
state=/tmp/cem-rootless-$user
rootless_script=/usr/share/docker.io/contrib/dockerd-rootless.sh

[ "$(id -u)" = 0 ] || { echo "rootless.sh: run as root (it creates a user and hands it /dev/net/tun)" >&2; exit 1; }
case $user in
  [a-z_][a-z0-9_-]*) ;;
  *) echo "rootless.sh: $user is not a user name" >&2; exit 1 ;;
esac

made() { echo "$1" >>"$state/made"; }
did() { grep -qx "$1" "$state/made" 2>/dev/null; }

# The first free range of 65536 subordinate ids above every range in FILE (and 100000).
free_range() {
  awk -F: 'BEGIN { top = 100000 } NF == 3 && $2 + $3 > top { top = $2 + $3 } END { print top }' "$1"
}

up() {
  if [ -e "$state/made" ]; then
    echo "rootless.sh: an engine of $user is up ($state); rootless.sh down $user first" >&2
    exit 1
  fi
  for tool in rootlesskit newuidmap slirp4netns setfacl dockerd "$rootless_script"; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || {
      echo "rootless.sh: $tool is missing (Debian: rootlesskit uidmap slirp4netns acl docker.io)" >&2
      exit 1
    }
  done
  local image=${CEM_ROOTLESS_IMAGES:-}
  [ -n "$image" ] || image=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^code-execution-mcp-sandbox:minimal-' || true)
  if [ -z "$image" ]; then
    echo "rootless.sh: the host's engine has no minimal sandbox image: build it first (README, \"The sandbox image\")" >&2
    exit 1
  fi
  mkdir -p "$state"
  chmod 755 "$state"
  : >"$state/made"
  if ! id "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$user"
    made user
  fi
  local uid gid home
  uid=$(id -u "$user")
  gid=$(id -g "$user")
  home=$(getent passwd "$user" | cut -d: -f6)
  for kind in uid gid; do
    if ! grep -q "^$user:" "/etc/sub$kind"; then
      local start
      start=$(free_range "/etc/sub$kind")
      echo "$user:$start:65536" >>"/etc/sub$kind"
      made "sub$kind $user:$start:65536"
    fi
  done
  local runtime=/run/user/$uid
  if [ ! -d "$runtime" ]; then
    mkdir -p "$runtime"
    chown "$uid:$gid" "$runtime"
    chmod 700 "$runtime"
    made runtime
  fi
  if [ -e "$runtime/docker.sock" ]; then
    echo "rootless.sh: $runtime/docker.sock exists: $user runs an engine already" >&2
    exit 1
  fi
  # An ACL of its own: none before means none after (`down` removes it whole).
  if [ -z "$(getfacl --skip-base --absolute-names /dev/net/tun 2>/dev/null)" ]; then
    made tun-acl
  fi
  setfacl -m "u:$user:rw" /dev/net/tun
  made tun
  # The engine's data in a directory of its own, removed by `down`.
  mkdir -p "$state/data"
  chown "$uid:$gid" "$state/data"
  echo "$runtime" >"$state/runtime"
  # setsid: the engine and everything it starts are one process group, which `down` ends.
  setsid runuser -u "$user" -- env -i HOME="$home" USER="$user" XDG_RUNTIME_DIR="$runtime" \
    PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    "$rootless_script" --data-root "$state/data/docker" >"$state/dockerd.log" 2>&1 </dev/null &
  echo $! >"$state/pid"
  local host=unix://$runtime/docker.sock
  for _ in $(seq 1 120); do
    docker -H "$host" version >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! docker -H "$host" version >/dev/null 2>&1; then
    tail -n 40 "$state/dockerd.log" >&2 || true
    echo "rootless.sh: the rootless engine did not answer on $host" >&2
    exit 1
  fi
  docker -H "$host" info --format 'rootless engine: {{.ServerVersion}}, {{.SecurityOptions}}, cgroup driver {{.CgroupDriver}}, storage {{.Driver}}' >&2
  # shellcheck disable=SC2086
  docker save $image | docker -H "$host" load -q >&2
  echo "DOCKER_HOST=$host"
}

down() {
  [ -d "$state" ] || return 0
  if [ -f "$state/pid" ]; then
    local pid
    pid=$(cat "$state/pid")
    # The process group setsid made: runuser, RootlessKit, dockerd, containerd and the shims.
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
      kill -0 -- "-$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  # What left the group (a shim starts a session of its own): the user's processes, when the
  # user is one `up` made for the engine.
  if did user; then
    for pid in $(ps -u "$user" -o pid= 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  if did tun-acl; then
    setfacl -b /dev/net/tun 2>/dev/null || true
  elif did tun; then
    setfacl -x "u:$user" /dev/net/tun 2>/dev/null || true
  fi
  local runtime
  runtime=$(cat "$state/runtime" 2>/dev/null || true)
  if [ -n "$runtime" ]; then
    rm -rf "$runtime/docker" "$runtime/docker.sock" "$runtime/docker.pid" "$runtime/dockerd-rootless"
    did runtime && rm -rf "$runtime"
  fi
  for kind in uid gid; do
    local line
    line=$(sed -n "s/^sub$kind //p" "$state/made" 2>/dev/null || true)
    if [ -n "$line" ]; then
      grep -vx "$line" "/etc/sub$kind" >"/etc/sub$kind.cem" || true
      cat "/etc/sub$kind.cem" >"/etc/sub$kind"
      rm -f "/etc/sub$kind.cem"
    fi
  done
  if did user; then
    userdel --remove "$user" 2>/dev/null || userdel "$user" || true
  fi
  # Files of the engine's data belong to subordinate uids: root removes them.
  rm -rf "$state"
}

case $cmd in
  up) up ;;
  down) down ;;
  *) echo "usage: rootless.sh up|down [USER]" >&2; exit 1 ;;
esac
