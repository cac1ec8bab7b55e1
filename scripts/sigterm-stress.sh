#!/bin/bash
# Stops `bertbench pretrain` with SIGTERM at a random moment, RUNS times, and counts the outcomes:
# a clean stop (exit 143, as a process a signal ended, after "stopped by signal" and a checkpoint),
# killed before the run took over the signal (exit 143 without that line: start-up), or a crash
# (anything else). This is the check behind docs/engine.md, "Signals": with a
# signal handler on the compute threads, oneDNN 2.6's sgemm corrupted the heap (build commit
# 820f21f to see it). Usage: scripts/sigterm-stress.sh [BERTBENCH] [RUNS]; exit 1 if any crashed.
set -u
bin=${1:-build/bertbench}
runs=${2:-60}
data=${BB_SHARED_DIR:-$(dirname "$0")/../../shared}/golden/pretraining/public_128_s12345_d2.tfrecord
[ -x "$bin" ] || { echo "sigterm-stress: $bin: not an executable (hint: make build)" >&2; exit 2; }
[ -f "$data" ] || { echo "sigterm-stress: $data: no such file (set BB_SHARED_DIR)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
 "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}' > "$work/config.json"
clean=0 early=0 crashed=0
for i in $(seq 1 "$runs"); do
    rm -rf "$work/run"
    "$bin" pretrain --bert_config_file="$work/config.json" --input_file="$data" --output_dir="$work/run" \
        --train_batch_size=4 --steps_per_update=2 --num_train_steps=100000 --save_checkpoints_steps=4 \
        --keep_checkpoint_max=2 --nodo_eval --threads=1 --seed=5 > "$work/log" 2>&1 &
    pid=$!
    sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    case $rc in
        143) if grep -q "stopped by signal" "$work/log"; then clean=$((clean + 1)); else early=$((early + 1)); fi ;;
        *) crashed=$((crashed + 1)); echo "run $i: exit $rc: $(tail -n 1 "$work/log")" ;;
    esac
    printf '\r%d/%d runs' "$i" "$runs" >&2
done
echo >&2
echo "sigterm-stress: $runs runs: $clean stopped cleanly, $early ended at start-up, $crashed crashed"
[ "$crashed" -eq 0 ]
