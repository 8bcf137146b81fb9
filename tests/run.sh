#!/usr/bin/env bash
# The whole suite, as root and as CI runs it: every test target of
# `cargo test -- --include-ignored` (root-only tests included) on the default (data) image,
# then the security suite again on the minimal image, so both profiles are held to it.
#
#   bash tests/run.sh [--jobs N]      (default 2)
#
# The targets run N at a time, longest first: most of a target's time goes to waiting on
# engines, containers, servers and Python clients, not to the CPU, so two at once on two cores
# take much less than one after the other. Two tests run alone, before the others, as they
# change what other tests watch on the host (see ALONE).
#
# Each target's output goes to target/test-logs/NAME.log; a line per target says how long it
# took, and a failing target's log is printed. Every test target cargo knows runs: one that
# LONGEST below does not name runs after those it names, and a name there that is no target
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Test targets known to take longest, longest first (a fresh machine's CI run): the queue's
# head, so that no long target starts last.
LONGEST=(gateway python_client faults installed compose data_workbench soak security
  security-minimal packages audit sessions skills_pii_discovery execute mcp_transports)
# Alone, one after the other, before the others: the swarm test compares the host's network
# before and after, which other tests' containers change; the rootless test adds a user and
# removes it, and the security suite checks that /etc/passwd did not change under each case;
# the gVisor test's engine binds /tmp over itself while it runs (tests/engines/gvisor.sh), which
# hides the mounts other tests made below /tmp before and takes away those they make meanwhile.
ALONE=(swarm rootless gvisor)

logs=target/test-logs
mkdir -p "$logs"

# Runs one item of the queue: a test target, `lib` (the library's and the binary's unit
# tests), `doc` (doctests) or `security-minimal`.
run_one() {
  local item=$1 started=$SECONDS status=0
  local log="$logs/$item.log"
  case "$item" in
    lib) cargo test --locked --lib --bins -- --include-ignored ;;
    doc) cargo test --locked --doc ;;
    security-minimal) CEM_IMAGE_PROFILE=minimal cargo test --locked --test security -- --include-ignored ;;
    *) cargo test --locked --test "$item" -- --include-ignored ;;
  esac >"$log" 2>&1 || status=$?
  local took=$((SECONDS - started))
  if [ "$status" = 0 ]; then
    printf '%-20s passed in %4d s  (%s)\n' "$item" "$took" \
      "$(grep -E '^test result:' "$log" | awk '{p += $4; i += $8} END { printf "%d passed, %d ignored", p, i }')"
    return 0
  fi
  printf '%-20s FAILED in %4d s (exit %s); its log, %s:\n' "$item" "$took" "$status" "$log"
  # The whole log when it is short; else its end, where cargo lists the failures and their
  # output.
  if [ "$(wc -l <"$log")" -le 1500 ]; then cat "$log"; else echo "[…]"; tail -n 1500 "$log"; fi
  return 1
}

if [ "${1:-}" = --one ]; then
  run_one "${2:?--one needs an item}"
  exit
fi

jobs=2
if [ "${1:-}" = --jobs ]; then
  jobs=${2:?--jobs needs a number}
fi

# The test targets, as cargo sees them.
mapfile -t targets < <(cargo metadata --locked --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if "test" in t["kind"]:
            print(t["name"])')
is_target() { printf '%s\n' "${targets[@]}" | grep -qx "$1"; }
for name in "${LONGEST[@]}" "${ALONE[@]}"; do
  [ "$name" = security-minimal ] || is_target "$name" \
    || { echo "tests/run.sh names '$name', which is no test target: update LONGEST or ALONE" >&2; exit 1; }
done
queue=("${LONGEST[@]}")
for name in "${targets[@]}"; do
  case " ${LONGEST[*]} ${ALONE[*]} " in *" $name "*) ;; *) queue+=("$name") ;; esac
done
queue+=(lib doc)

echo "building every test target (nothing to do when they are built)"
if ! cargo test --locked --no-run >"$logs/build.log" 2>&1; then
  cat "$logs/build.log"
  echo "the build failed (above)" >&2
  exit 1
fi
tail -n 1 "$logs/build.log"
started=$SECONDS
failed=0
for name in "${ALONE[@]}"; do
  run_one "$name" || failed=1
done
printf '%s\n' "${queue[@]}" | xargs -P "$jobs" -I{} bash tests/run.sh --one {} || failed=1
echo "${#targets[@]} test targets, the library's, the doctests and security on the minimal image in $((SECONDS - started)) s, $jobs at a time"
exit "$failed"
