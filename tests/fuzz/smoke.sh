#!/usr/bin/env bash
# Fuzz smoke pass: builds the fuzz targets in tests/fuzz and runs each one for a short time
# (FUZZ_SECONDS, default 20) over a scratch copy of its seed corpus, so the committed corpus
# never grows. Fails on the first crash, assertion failure, leak, timeout or out-of-memory; the
# input that caused it is kept in tests/fuzz/artifacts/<target>/.
#
# The targets are built by cargo itself with the instrumentation `cargo fuzz build` adds
# (libFuzzer's coverage counters, `--cfg fuzzing`, AddressSanitizer), in the dev profile: a
# smoke pass needs the checks, not the speed of optimised code, and a dev build of the crate
# and its dependencies takes a fraction of a release one. No cargo-fuzz install either, which
# is a compile of its own on a fresh machine. `cargo fuzz run` (tests/fuzz/README.md) is for
# long runs. `-Zsanitizer=address` is unstable: RUSTC_BOOTSTRAP=1 lets the stable toolchain
# take it (its x86_64 rust-std ships the AddressSanitizer runtime).
#
# Usage: tests/fuzz/smoke.sh [--build-only] [TARGET...]   (default: every target)
# --build-only builds and stops: CI builds the targets in the background while its tests run.
set -euo pipefail

cd "$(dirname "$0")/../.."
export RUSTC_BOOTSTRAP=1
seconds="${FUZZ_SECONDS:-20}"

# target and the longest input it takes
declare -A max_len=(
    [pii]=65536
    [channel_frame]=65536
    [workspace_path]=4096
    [tool_args]=65536
)
build_only=false
if [ "${1:-}" = --build-only ]; then
    build_only=true
    shift
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(pii channel_frame workspace_path tool_args)
fi

# A fixed seed (FUZZ_SEED to change it): the same commit mutates the same inputs in CI as on a
# developer's machine, so a smoke pass that passed before a push passes in CI, and a failure
# reproduces. Open-ended fuzzing is `cargo fuzz run` without a seed (see the README).
seed="${FUZZ_SEED:-1}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# An explicit --target keeps build scripts and proc macros uninstrumented, as cargo-fuzz does.
triple="$(rustc -vV | sed -n 's/^host: //p')"
sancov="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
sancov+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
sancov+=" -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares"
start=$SECONDS
RUSTFLAGS="--cfg fuzzing $sancov -Zsanitizer=address" \
    cargo build --manifest-path tests/fuzz/Cargo.toml --locked --bins --target "$triple"
bins="tests/fuzz/target/$triple/debug"
echo "fuzz smoke: built in $((SECONDS - start)) s"
if $build_only; then
    exit 0
fi

for t in "${targets[@]}"; do
    len="${max_len[$t]:?unknown fuzz target $t}"
    mkdir -p "$scratch/$t"
    cp tests/fuzz/corpus/"$t"/* "$scratch/$t/"
    echo "fuzz smoke: $t for ${seconds} s"
    log="$scratch/$t.log"
    mkdir -p "tests/fuzz/artifacts/$t"
    if ! "$bins/$t" "$scratch/$t" -artifact_prefix="tests/fuzz/artifacts/$t/" \
        -max_total_time="$seconds" -max_len="$len" -rss_limit_mb=2048 -timeout=10 -seed="$seed" \
        -print_final_stats=1 >"$log" 2>&1; then
        tail -n 80 "$log"
        echo "fuzz smoke: $t FAILED (reproduce: $bins/$t tests/fuzz/artifacts/$t/<file>)"
        exit 1
    fi
    grep -E '^#[0-9]+ +DONE' "$log" || true
    grep -E '^stat::number_of_executed_units' "$log" || true
done
echo "fuzz smoke: ${#targets[@]} targets passed in $((SECONDS - start)) s"
