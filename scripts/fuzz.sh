#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS [GEN_SECONDS]]: builds build-fuzz (clang-14, libFuzzer + ASan + UBSan;
# -DBB_FUZZ=ON) and runs every fuzz/<name>_fuzz.cpp target for SECONDS (default 20) on a scratch
# copy of its seed corpus fuzz/corpus/<name>/ (nothing is written into the repository), and each
# structure-aware generator (<name> ending in _gen: valid files with hostile values built from a
# recipe, fuzz/recipe.hpp) for GEN_SECONDS (default 5) from an empty corpus, with a tighter memory
# cap: no single allocation above 128 MB (-malloc_limit_mb), 1 GB resident; as many targets at a
# time as there are cores. Prints, per target, the executions and whether it crashed; a crash,
# timeout (-timeout=10 s per input) or OOM (-rss_limit_mb=2048, or the generators' caps) exits
# non-zero, with the reproducer kept under build-fuzz/artifacts/. The targets' scratch files go to a temporary directory removed at exit.
# Environment: BB_FUZZ_CXX (default clang++-14), BB_FUZZ_BUILD (default build-fuzz),
# BB_FUZZ_TARGETS (space-separated names to run, default all), BB_FUZZ_JOBS (build jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
gen_secs=${2:-5}
build=${BB_FUZZ_BUILD:-build-fuzz}
cxx=${BB_FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null ||
    { echo "fuzz: $cxx: not found (hint: make setup installs clang-14 and libclang-rt-14-dev)" >&2; exit 2; }
# -O1 and line tables, as libFuzzer's documentation builds its targets: the reports need file and
# line, not variables. `time cmake --build DIR --target fuzz_all` in a fresh directory, 2-core Zen 3:
# 223 s, against 255 s at -O2 -g (RelWithDebInfo).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DBB_FUZZ=ON \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$build" --target fuzz_all -j "${BB_FUZZ_JOBS:-$(nproc)}"

work=$(mktemp -d)
# The generators' scratch files: in memory where there is a tmpfs (their writers fsync).
scratch=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$work" "$scratch"' EXIT
mkdir -p "$build/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target: fuzz it, then leave its report line(s) in $work/<name>.report, its execution count
# in $work/<name>.execs, and $work/<name>.failed if it crashed.
fuzz_one() {
    local src=$1 target name corpus artifacts seeds=0 largest=0 f size max_len t limits log rc=0
    target=$(basename "$src" .cpp)
    name=${target%_fuzz}
    corpus="$work/$name/corpus" artifacts="$work/$name/artifacts/"
    mkdir -p "$corpus" "$artifacts" "$scratch/$name"
    if [ -d "fuzz/corpus/$name" ]; then
        for f in "fuzz/corpus/$name"/*; do
            [ -f "$f" ] || continue
            cp "$f" "$corpus/"
            seeds=$((seeds + 1))
            size=$(stat -c %s "$f")
            [ "$size" -gt "$largest" ] && largest=$size
        done
    fi
    # Room to grow the seeds (twice the largest, at least 4 KiB, at most 1 MiB).
    max_len=$((2 * largest)); [ "$max_len" -lt 4096 ] && max_len=4096
    [ "$max_len" -gt 1048576 ] && max_len=1048576
    t=$secs limits=(-rss_limit_mb=2048)
    # A generator's recipe is small; what it builds may cost only what the resource rule allows.
    # The whole recipe length from the start (-len_control=0): a short recipe builds a dull file.
    [[ $name == *_gen ]] && t=$gen_secs limits=(-rss_limit_mb=1024 -malloc_limit_mb=128 -len_control=0)
    log="$work/$name.log"
    TMPDIR="$scratch/$name" "$build/fuzz/$target" -max_total_time="$t" -timeout=10 "${limits[@]}" \
        -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$artifacts" \
        "$corpus" >"$log" 2>&1 || rc=$?
    local execs kind cov found
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
    echo "${execs:-0}" >"$work/$name.execs"
    found=$(find "$artifacts" -type f | wc -l)
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        kind=$(grep -oE "ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer|UndefinedBehaviorSanitizer)[^ ]*: [a-z-]+|runtime error|Timeout|out-of-memory" "$log" | head -1 || true)
        mkdir -p "$build/artifacts/$name" && cp "$artifacts"* "$build/artifacts/$name/" 2>/dev/null || true
        {
            echo "fuzz: $name: CRASH after ${execs:-?} executions (${kind:-exit $rc}); reproducer in $build/artifacts/$name/; log tail:"
            tail -40 "$log" | sed 's/^/    /'
        } >"$work/$name.report"
        touch "$work/$name.failed"
    else
        cov=$(grep -oE "cov: [0-9]+" "$log" | tail -1 || true)
        echo "fuzz: $name: ${execs:-?} executions in ${t} s, ${cov:-cov: ?} edges, $seeds seeds, no crash" >"$work/$name.report"
    fi
}

# The targets run side by side, one per core (each libFuzzer process is single-threaded), and
# report in name order.
names=()
for src in fuzz/*_fuzz.cpp; do
    name=$(basename "$src" _fuzz.cpp)
    if [ -n "${BB_FUZZ_TARGETS:-}" ] && [[ " $BB_FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
    fuzz_one "$src" &
    names+=("$name")
done
wait
failed=() total=0
for name in "${names[@]}"; do
    if [ ! -e "$work/$name.report" ]; then
        echo "fuzz: $name: its run stopped without a report"
        failed+=("$name")
        continue
    fi
    cat "$work/$name.report"
    total=$((total + $(cat "$work/$name.execs")))
    [ -e "$work/$name.failed" ] && failed+=("$name")
done
echo "fuzz: $total executions in all"
if [ "${#failed[@]}" -ne 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (reproduce: $build/fuzz/<name>_fuzz <reproducer>)" >&2
    exit 1
fi
