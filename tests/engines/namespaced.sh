# Sourced by tests/engines/gvisor.sh and tests/swarm/cluster.sh, which start dockerd in
# network, mount and UTS namespaces of its own: what both need to do there. Defines functions
# only.

# wait_for WHAT TRIES CMD...: runs CMD every half second until it succeeds, at most TRIES
# times; else says it timed out waiting for WHAT and fails.
wait_for() {
  local what=$1 tries=$2; shift 2
  for _ in $(seq 1 "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "${0##*/}: timed out waiting for $what" >&2
  return 1
}

# Inside `ip netns exec NS unshare --mount --uts`: mounts the cgroup hierarchies that
# `ip netns exec` hides (v1 controllers, systemd's, and the unified one where there is one).
mount_cgroups() {
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
  for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
    mkdir -p "/sys/fs/cgroup/$c"
    mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
  done
  mkdir -p /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
  mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
  mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified 2>/dev/null || true
}
