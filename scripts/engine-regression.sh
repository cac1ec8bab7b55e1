#!/usr/bin/env bash
# scripts/engine-regression.sh [--keep] [--work_dir=DIR] [--baseline_bin=PATH] [BERTBENCH]
#
# The engine must compute bit for bit what the baseline commit (tests/regression/BASELINE) computes.
# Builds that commit's bertbench (a detached git worktree, Release + Ninja as `make build` with the
# -Werror of BERTBENCH's build, the libraries outside the engine faster
# (tests/regression/baseline_flags.cmake), the engine's unchanged files from ccache where it is
# installed; the binary kept in $BB_REGRESS_BUILD, default build-regress-base/, and reused while it
# is at that commit), runs one fixed set of runs with it and with BERTBENCH (default
# build/bertbench) in the same environment, and compares every output bit for bit
# (tests/regression/compare.py): loss lines, eval metrics, every checkpoint tensor, SQuAD logits
# and predictions. Baseline outputs are not stored in the repository:
# they depend on the CPU's code paths (AVX2, AVX-512, AVX512-BF16, AMX), so both sides run here.
# Prints one PASS/FAIL line per run with the differing file/tensor/line; exit 0 identical, 1 a
# difference (or a run the current binary failed), 2 an error. tests/regression/README.md.
#   --keep              keep the work directory (outputs of both sides) and print its path
#   --work_dir=DIR      write the outputs under DIR (created; kept)
#   --baseline_bin=PATH use this binary as the baseline instead of building BASELINE (e.g. the same
#                       binary twice: run-to-run determinism)
# Environment: BB_REGRESS_BUILD (the baseline binary's directory), BB_SHARED_DIR (default ../shared),
# BB_REGRESS_JOBS (build jobs, default nproc), CXX; BB_ISA, BB_BF16_EMULATE, BB_ATTENTION and
# ONEDNN_*/DNNL_* reach both binaries alike.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=/usr/bin/python3
die() { echo "engine-regression: $*" >&2; exit 2; }

keep=0 work='' baseline_bin='' bin=''
for arg in "$@"; do
    case $arg in
        --keep) keep=1 ;;
        --work_dir=*) work=${arg#*=}; keep=1 ;;
        --baseline_bin=*) baseline_bin=${arg#*=} ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $arg (see --help)" ;;
        *) [ -z "$bin" ] || die "one BERTBENCH binary expected, got '$bin' and '$arg'"; bin=$arg ;;
    esac
done
bin=${bin:-$repo/build/bertbench}
[ -x "$bin" ] || die "$bin: not an executable (hint: make build, or give the binary to test)"
bin=$(realpath "$bin")
if [ -n "$baseline_bin" ]; then
    [ -x "$baseline_bin" ] || die "--baseline_bin=$baseline_bin: not an executable"
    baseline_bin=$(realpath "$baseline_bin")
fi
shared=$(realpath -m "${BB_SHARED_DIR:-$repo/../shared}")
golden=$shared/golden
for f in vocab.txt pretraining/public_128_s12345_d2.tfrecord eval_pick/public_128_eval100.tfrecord \
         squad_pipeline/train-v1.1.json squad_pipeline/dataset-v1.1.json; do
    [ -f "$golden/$f" ] || die "$golden/$f: missing (hint: set BB_SHARED_DIR to the shared/ directory)"
done
if ! { [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; }; then
    die "$py with numpy needed for the comparison (hint: apt-get install python3-numpy)"
fi

# ---- the baseline binary ------------------------------------------------------------------------
t_start=$SECONDS
cleanup_worktree=
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
cleanup() {
    if [ -n "$cleanup_worktree" ]; then
        git -C "$repo" worktree remove --force "$cleanup_worktree/tree" >/dev/null 2>&1 || true
        rm -rf "$cleanup_worktree"
        git -C "$repo" worktree prune >/dev/null 2>&1 || true
    fi
    if [ -n "${work:-}" ] && [ "$keep" = 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "$baseline_bin" ]; then
    commit=$(tr -d ' \t\r\n' < "$repo/tests/regression/BASELINE" 2>/dev/null) ||
        die "tests/regression/BASELINE: cannot read it"
    [[ $commit =~ ^[0-9a-f]{40}$ ]] ||
        die "tests/regression/BASELINE: expected one 40-hex commit line, got '$commit'"
    # No history to build the baseline from is a skip (exit 77, ctest's SKIP_RETURN_CODE), said in
    # one line: a source tarball or a shallow clone cannot run this check, and it is not a failure.
    if ! git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
        echo "engine-regression: SKIPPED: $repo is not a git checkout, the baseline cannot be built (hint: --baseline_bin=PATH)" >&2
        exit 77
    fi
    if ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "engine-regression: SKIPPED: baseline commit $commit is not in this clone (hint: a shallow checkout lacks it: git fetch --unshallow)" >&2
        exit 77
    fi
    build=${BB_REGRESS_BUILD:-$repo/build-regress-base}
    mkdir -p "$build"
    build=$(realpath "$build")
    exec 9>"$build/.lock"
    flock 9  # one script at a time per build directory (two build trees' ctest runs share it)
    cxx=${CXX:-c++}
    # the baseline's build flags outside the engine (a CMake hook; in the stamp, so that a change rebuilds)
    hook=$repo/tests/regression/baseline_flags.cmake
    [ -r "$hook" ] || die "$hook: cannot read it"
    # -Werror as the binary under test was built (a flag the compiler is given, so ccache's key)
    werror=OFF
    grep -q '^BB_WERROR:BOOL=ON$' "$(dirname "$bin")/CMakeCache.txt" 2>/dev/null && werror=ON
    stamp="$commit $("$cxx" --version 2>/dev/null | head -n 1) $(cksum < "$hook") werror=$werror"
    if [ -x "$build/bertbench" ] && [ "$(cat "$build/.regress-stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "baseline: ${commit:0:12}, built in $build (reused)"
    else
        echo "baseline: building ${commit:0:12} (bertbench only) for $build ..."
        find "$build" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
        git -C "$repo" worktree prune >/dev/null 2>&1 || true
        cleanup_worktree=$(mktemp -d "${TMPDIR:-/tmp}/bb-regress-src.XXXXXX")
        tree=$cleanup_worktree/tree
        git -C "$repo" worktree add --detach "$tree" "$commit" >"$build/worktree.log" 2>&1 ||
            die "git worktree add $commit failed: $(tail -n 1 "$build/worktree.log")"
        # Built in <tree>/build, as `make build` builds in <repo>/build: with ccache (base_dir the
        # tree, as CMakeLists.txt sets it for the current build) the engine's files that BASELINE
        # shares with the build under test are taken from the cache, not compiled again.
        launcher=()
        command -v ccache >/dev/null &&
            launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$tree;$(command -v ccache)")
        cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBB_WERROR=$werror \
            -DCMAKE_PROJECT_INCLUDE="$hook" "${launcher[@]}" >"$build/configure.log" 2>&1 ||
            die "configuring the baseline failed: $(grep -m1 -i error "$build/configure.log" || tail -n 1 "$build/configure.log") (log: $build/configure.log)"
        t_build=$SECONDS
        cmake --build "$tree/build" --target bertbench -j "${BB_REGRESS_JOBS:-$(nproc)}" >"$build/build.log" 2>&1 ||
            die "building the baseline failed: $(grep -m1 -E 'error|FAILED' "$build/build.log" || tail -n 1 "$build/build.log") (log: $build/build.log)"
        cp "$tree/build/bertbench" "$build/bertbench.part" && mv "$build/bertbench.part" "$build/bertbench" ||
            die "cannot copy the baseline binary into $build"
        echo "$stamp" >"$build/.regress-stamp"
        git -C "$repo" worktree remove --force "$tree" >/dev/null 2>&1 || true
        rm -rf "$cleanup_worktree"
        cleanup_worktree=
        echo "baseline: built in $((SECONDS - t_build)) s"
    fi
    baseline_bin=$build/bertbench
else
    echo "baseline: $baseline_bin (given; BASELINE not built)"
fi

# ---- the runs -----------------------------------------------------------------------------------
if [ -n "$work" ]; then
    mkdir -p "$work"
    work=$(realpath "$work")
    rm -rf "$work/base" "$work/cur"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/bb-regress.XXXXXX")
fi
mkdir -p "$work/base" "$work/cur"

# Same environment for both: 2 OpenMP threads (and --threads=2), no dynamic thread count, C locale.
# Everything else that chooses a code path (CPU ISA, BB_* overrides) is the same process environment.
export OMP_NUM_THREADS=2 OMP_DYNAMIC=false LC_ALL=C
for v in $(compgen -e | grep -E '^(BB_ISA|BB_BF16_EMULATE|BB_ATTENTION|ONEDNN_|DNNL_)' || true); do
    echo "environment: $v=${!v} (both binaries)"
done
"$baseline_bin" version 2>/dev/null | "$py" -c '
import json, sys
try:
    s = json.load(sys.stdin)["system_info"]
    keys = ("cpu_model", "cpu_isa", "kernels_isa", "bf16_gemm", "native_precisions")
    print("machine: %s; %s; kernels %s; bf16 GEMM %s (native precisions %s)" % tuple(s.get(k) for k in keys))
except Exception:
    pass' || true

runs=(pretrain-tiny-fp32 pretrain-tiny-bf16 pretrain-tiny-fp32-accum4-adamw
      pretrain-mini-fp32 pretrain-mini-bf16 eval-fp32 eval-bf16 squad-fp32 squad-bf16)
pretraining=(--input_file="$golden/pretraining/public_128_s12345_d2.tfrecord"
             --eval_input_file="$golden/eval_pick/public_128_eval100.tfrecord"
             --max_seq_length=128 --max_predictions_per_seq=20 --train_batch_size=8
             --eval_batch_size=8 --max_eval_steps=4 --learning_rate=1e-3 --keep_checkpoint_max=0
             --seed=12345 --threads=2)
# eval and squad start from the BASELINE's tiny fp32 checkpoint on both sides: each run checks its
# own stage (and that the current binary reads the baseline's checkpoints).
ckpt=$work/base/pretrain-tiny-fp32/model.ckpt-20.safetensors

# command_for RUN OUT: the bertbench command line of RUN writing into OUT, in the array `cmd`.
command_for() {
    local run=$1 out=$2
    case $run in
        pretrain-tiny-fp32|pretrain-tiny-bf16)
            cmd=(pretrain --model=tiny "${pretraining[@]}" --num_train_steps=20 --num_warmup_steps=5
                 --save_checkpoints_steps=10 --eval_every_samples=80 --dtype="${run##*-}") ;;
        pretrain-tiny-fp32-accum4-adamw)  # gradient accumulation (clip, /n, sum) and AdamW
            cmd=(pretrain --model=tiny "${pretraining[@]}" --num_train_steps=20 --num_warmup_steps=4
                 --steps_per_update=4 --optimizer=adamw --save_checkpoints_steps=8
                 --eval_every_samples=64 --dtype=fp32) ;;
        pretrain-mini-fp32|pretrain-mini-bf16)
            cmd=(pretrain --model=mini "${pretraining[@]}" --num_train_steps=5 --num_warmup_steps=2
                 --save_checkpoints_steps=0 --eval_every_samples=40 --dtype="${run##*-}") ;;
        eval-fp32|eval-bf16)  # offline eval (dropout off) of all 100 picked records
            mkdir -p "$out"
            cmd=(eval --init_checkpoint="$ckpt" --input_file="$golden/eval_pick/public_128_eval100.tfrecord"
                 --max_seq_length=128 --max_predictions_per_seq=20 --eval_batch_size=16
                 --max_eval_steps=0 --threads=2 --dtype="${run##*-}" --json="$out/eval.json")
            return ;;
        squad-fp32|squad-bf16)  # 8 fine-tuning steps (69 examples / batch 8), then predict 371 features
            cmd=(squad --vocab_file="$golden/vocab.txt" --init_checkpoint="$ckpt" --do_lower_case
                 --do_train --train_file="$golden/squad_pipeline/train-v1.1.json"
                 --do_predict --predict_file="$golden/squad_pipeline/dataset-v1.1.json"
                 --max_seq_length=128 --doc_stride=32 --max_query_length=64 --train_batch_size=8
                 --predict_batch_size=16 --learning_rate=1e-3 --num_train_epochs=1
                 --save_checkpoints_steps=4 --keep_checkpoint_max=0 --seed=12345 --threads=2
                 --dtype="${run##*-}") ;;
        *) die "internal: no command for run $run" ;;
    esac
    cmd+=(--output_dir="$out")
}

# run_set SIDE BIN: every run into $work/SIDE/RUN, its stdout+stderr in $work/SIDE/RUN.log. A run the
# baseline fails is an error; one the current binary fails leaves $work/cur/RUN.failed (compare.py).
run_set() {
    local side=$1 exe=$2 run t0 rc
    t0=$SECONDS
    for run in "${runs[@]}"; do
        command_for "$run" "$work/$side/$run"
        rc=0
        "$exe" "${cmd[@]}" >"$work/$side/$run.log" 2>&1 </dev/null || rc=$?
        if [ "$rc" != 0 ]; then
            [ "$side" = cur ] ||
                die "the baseline failed run $run (exit $rc): $(tail -n 1 "$work/$side/$run.log") (log: $work/$side/$run.log; hint: --keep)"
            echo "exited $rc: $(tail -n 1 "$work/$side/$run.log")" >"$work/$side/$run.failed"
        fi
        if [ "$side" = base ] && [ "$run" = pretrain-tiny-fp32 ] && [ ! -f "$ckpt" ]; then
            die "the baseline's pretrain-tiny-fp32 left no $ckpt"
        fi
    done
    echo "$side: ${#runs[@]} runs in $((SECONDS - t0)) s ($exe)"
}
run_set base "$baseline_bin"
run_set cur "$bin"

# ---- the comparison -----------------------------------------------------------------------------
status=0
"$py" "$repo/tests/regression/compare.py" "$work/base" "$work/cur" "${runs[@]}" || status=$?
[ "$status" -le 1 ] || die "the comparison failed (exit $status)"
[ "$keep" = 1 ] && echo "outputs kept in $work (base/ = baseline, cur/ = current)"
echo "engine-regression: $([ $status = 0 ] && echo PASS || echo FAIL) in $((SECONDS - t_start)) s"
exit $status
