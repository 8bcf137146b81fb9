#!/usr/bin/env bash
# A Docker Swarm of private engines on one machine, for tests/swarm and benches/swarm: each node
# is a dockerd (with its own containerd), a glusterd and a GlusterFS client in network, mount and
# UTS namespaces of their own, so that a node can be killed and its link cut like a lost host.
# Nothing touches the host's network: the nodes' links meet on a bridge inside a namespace of
# its own, on a private /24 that exists only between those namespaces. Root only.
#
#   cluster.sh up DIR NODES          namespaces, links, nodes, a replica-NODES GlusterFS volume
#                                     mounted on every node at /run/cem-data, a swarm
#   cluster.sh proxy DIR CFG         HAProxy with config CFG in the proxy namespace (background)
#   cluster.sh in-proxy DIR CMD...   runs CMD in the proxy namespace (where clients live)
#   cluster.sh kill-node DIR I       SIGKILL of everything node I runs, its link cut
#   cluster.sh start-node DIR I      link up, node I started again (GlusterFS mounted first)
#   cluster.sh docker DIR I ARGS...  the docker CLI against node I's engine
#   cluster.sh down DIR              everything above removed; safe to repeat
#
# Inside a node, /run is the node's own (DIR/nI/run): its engine answers on
# /var/run/docker.sock there, so compose.yaml's default socket path reaches each node's own
# engine, as on real hosts. Node I has address NET.(10+I); the proxy NET.2.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../engines/namespaced.sh
. "$here/../engines/namespaced.sh"
cmd=${1:?usage: cluster.sh up|proxy|in-proxy|kill-node|start-node|docker|down DIR ...}
dir=${2:?the directory of the cluster}
shift 2

state() { cat "$dir/$1"; }

# The namespaces' prefix and the /24, chosen at `up` and kept in DIR.
load() {
  prefix=$(state prefix)
  net=$(state net)
  nodes=$(state nodes)
}

node_ip() { echo "$net.$((10 + $1))"; }
node_sock() { echo "$dir/n$1/run/docker.sock"; }  # the node's /run/docker.sock
node_docker() { local i=$1; shift; docker -H "unix://$(node_sock "$i")" "$@"; }

# The pid of node I's entry process (dockerd after exec), if it runs.
node_pid() {
  local f="$dir/n$1/entry.pid"
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

in_node() {
  local i=$1; shift
  nsenter --target "$(node_pid "$i")" --mount --net --uts -- "$@"
}

# Runs inside `ip netns exec NS unshare --mount --uts`: the cgroup hierarchies `ip netns exec`
# hid, the node's own /run and GlusterFS state, its hostname; then glusterd, and dockerd.
entry() {
  local i=$1 mount_data=$2
  local n="$dir/n$i"
  mount_cgroups
  hostname "cem-node$i"
  mount --bind "$n/run" /run
  mkdir -p /run/gluster /run/cem-data /run/lock /run/code-execution-mcp
  mount --bind "$n/glusterd" /var/lib/glusterd
  mount --bind "$n/glusterlog" /var/log/glusterfs
  glusterd -p /run/glusterd.pid
  if [ "$mount_data" = 1 ]; then
    mount_volume "$i"
  fi
  # Every path under the node's own /run, named rather than left to defaults (which reach it
  # through /var/run only where that is a link to /run).
  exec dockerd --config-file "$n/daemon.json" --data-root "$n/docker" \
    -H unix:///run/docker.sock --exec-root /run/docker --pidfile /run/docker.pid \
    --cgroup-parent "/$prefix-n$i" >"$n/dockerd.log" 2>&1
}

# The replicated volume at /run/cem-data, its volume file from this node or the others.
mount_volume() {
  local i=$1 others=() j
  for j in $(seq 1 "$nodes"); do
    [ "$j" = "$i" ] || others+=("$(node_ip "$j")")
  done
  local backups
  backups=$(IFS=:; echo "${others[*]}")
  for _ in $(seq 1 60); do
    if mount -t glusterfs -o "backup-volfile-servers=$backups" \
      "$(node_ip "$i"):/cem" /run/cem-data 2>/dev/null; then
      return 0
    fi
    sleep 0.5
  done
  echo "node $i could not mount the GlusterFS volume" >&2
  return 1
}

start_node() {
  local i=$1 mount_data=$2
  ip -n "$prefix-br" link set "v$i" up
  # setsid: the node outlives the shell that started it; its pid file is the entry's pid,
  # which becomes dockerd's at exec.
  setsid ip netns exec "$prefix-n$i" unshare --mount --uts --propagation private -- \
    bash -c 'echo $$ > "$1/n$2/entry.pid"; exec bash "$0" _entry "$1" "$2" "$3"' \
    "$here/cluster.sh" "$dir" "$i" "$mount_data" >"$dir/n$i/entry.log" 2>&1 </dev/null &
  wait_for "node $i's engine" 120 node_docker "$i" version
}

up() {
  local count=$1
  [ ! -e "$dir/prefix" ] || { echo "$dir already holds a cluster" >&2; exit 1; }
  mkdir -p "$dir"
  local id
  id=$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')
  echo "cs$id" >"$dir/prefix"
  echo "10.231.$((0x$id % 250 + 1))" >"$dir/net"
  echo "$count" >"$dir/nodes"
  load
  ip netns add "$prefix-br"
  ip -n "$prefix-br" link set lo up
  ip -n "$prefix-br" link add br0 type bridge
  ip -n "$prefix-br" link set br0 up
  attach() {
    local ns=$1 veth=$2 addr=$3
    ip netns add "$ns"
    ip -n "$prefix-br" link add "$veth" type veth peer name eth0 netns "$ns"
    ip -n "$prefix-br" link set "$veth" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
  }
  attach "$prefix-px" vpx "$net.2"
  local i
  for i in $(seq 1 "$nodes"); do
    attach "$prefix-n$i" "v$i" "$(node_ip "$i")"
    mkdir -p "$dir/n$i/run" "$dir/n$i/glusterd" "$dir/n$i/glusterlog" "$dir/n$i/brick" "$dir/n$i/docker"
    printf '{"storage-driver": "overlay2", "log-driver": "json-file", "log-opts": {"max-size": "10m"}}\n' \
      >"$dir/n$i/daemon.json"
    start_node "$i" 0
  done
  # The replicated volume: every node holds a full copy; two of three keep it writable.
  for i in $(seq 2 "$nodes"); do
    in_node 1 gluster --mode=script peer probe "$(node_ip "$i")" >/dev/null
  done
  wait_for "GlusterFS peers" 60 bash -c \
    "[ \$(nsenter --target $(node_pid 1) --mount --net -- gluster --mode=script pool list | grep -c Connected) = $nodes ]"
  local bricks=()
  for i in $(seq 1 "$nodes"); do
    bricks+=("$(node_ip "$i"):$dir/n$i/brick")
  done
  local layout=()
  [ "$nodes" -gt 1 ] && layout=(replica "$nodes")
  in_node 1 gluster --mode=script volume create cem "${layout[@]}" "${bricks[@]}" force >/dev/null
  # A lost brick is given up after 5 s, not 42: writes wait that long for an unanswered peer.
  in_node 1 gluster --mode=script volume set cem network.ping-timeout 5 >/dev/null
  in_node 1 gluster --mode=script volume start cem >/dev/null
  for i in $(seq 1 "$nodes"); do
    in_node "$i" bash "$here/cluster.sh" _mount "$dir" "$i"
  done
  # The swarm: every node a manager, so that two of three keep quorum.
  node_docker 1 swarm init --advertise-addr "$(node_ip 1)" >/dev/null
  local token
  token=$(node_docker 1 swarm join-token -q manager)
  for i in $(seq 2 "$nodes"); do
    node_docker "$i" swarm join --token "$token" "$(node_ip 1):2377" >/dev/null
  done
  for i in $(seq 1 "$nodes"); do
    node_docker 1 node update --label-add "cem.node=$i" "cem-node$i" >/dev/null
  done
}

kill_node() {
  local i=$1
  ip -n "$prefix-br" link set "v$i" down
  # Everything in the node's network namespace (dockerd, containerd, shims, glusterd, bricks,
  # the GlusterFS client) and everything in its containers' cgroups.
  local pids
  pids=$(ip netns pids "$prefix-n$i" 2>/dev/null || true)
  pids+=" $(cat /sys/fs/cgroup/pids/"$prefix-n$i"/*/cgroup.procs 2>/dev/null || true)"
  # shellcheck disable=SC2086
  [ -z "${pids// }" ] || kill -9 $pids 2>/dev/null || true
  rm -f "$dir/n$i/entry.pid"
  wait_for "node $i's processes to end" 60 bash -c "[ -z \"\$(ip netns pids $prefix-n$i)\" ]"
}

down() {
  [ -e "$dir/prefix" ] || return 0
  load
  local i
  if [ -f "$dir/proxy.pid" ]; then
    kill -9 "$(cat "$dir/proxy.pid")" 2>/dev/null || true
  fi
  for i in $(seq 1 "$nodes"); do
    kill_node "$i" || true
  done
  ip netns pids "$prefix-px" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  for ns in px br $(seq -f 'n%g' 1 "$nodes"); do
    ip netns del "$prefix-$ns" 2>/dev/null || true
  done
  # The nodes' cgroups (their containers' and their own), empty now, deepest first.
  local d
  for d in /sys/fs/cgroup/*/"$prefix"-n*; do
    [ -d "$d" ] && { find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
  done
  true
  # Bricks hold extended attributes and a .glusterfs tree; the data roots overlay mounts
  # that died with the nodes' mount namespaces.
  rm -rf "$dir"
}

case "$cmd" in
  up) up "${1:?number of nodes}" ;;
  proxy)
    load
    setsid ip netns exec "$prefix-px" haproxy -db -f "${1:?haproxy config}" \
      >"$dir/haproxy.log" 2>&1 </dev/null &
    echo $! >"$dir/proxy.pid"
    ;;
  in-proxy) load; exec ip netns exec "$prefix-px" "$@" ;;
  kill-node) load; kill_node "${1:?node}" ;;
  start-node) load; start_node "${1:?node}" 1 ;;
  docker) load; i=${1:?node}; shift; node_docker "$i" "$@" ;;
  down) down ;;
  _entry) load; entry "$1" "$2" ;;
  _mount) load; mount_volume "$1" ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
