#!/usr/bin/env bash
# The SQuAD demo (make demo-squad): fine-tune the BERT-tiny that `make demo` pretrained on a small
# SQuAD-v1.1-format span-extraction set, predict, and score with the official metric.
#   1. the pretrained checkpoint: the newest one of scripts/demo.sh's run (runs demo.sh if absent)
#   2. scripts/make-demo-squad.py: train-v1.1.json / dev-v1.1.json made from the Brown corpus text
#      (NOT SQuAD: synthetic "where is <1-3 words> ?" questions on 20-40-word passages, the answer
#      being those words in the passage; train from the training documents, dev from the 25
#      held-out ones). docs/squad.md, "The demo".
#   3. the baseline: the same checkpoint without fine-tuning (random span head; one step at
#      learning rate 0 leaves the weights unchanged), predict + official metric
#   4. bertbench squad --do_train --do_predict: fine-tune, predict dev, official metric
#   5. a summary: EM/F1 before and after, throughput, where the files are.
# Measured once (2 threads, a quiet Zen 4, 2026-11-27, from make demo's bf16 checkpoint): EM 0.2 /
# F1 7.8 without fine-tuning, EM 87.0 / F1 91.1 after 12 epochs (3,000 steps, 120 s; seed 12345).
# A never-pretrained model reaches 88.8 / 93.4 with the same settings: this task tests the
# fine-tuning path, not what pretraining taught (docs/squad.md).
# Real data and a real checkpoint: the same bertbench command with --train_file=train-v1.1.json
# --predict_file=dev-v1.1.json --init_checkpoint=... (docs/squad.md).
# Environment overrides: DATA (data), DEMO_OUT (runs/demo, make demo's OUT), OUT (runs/demo-squad),
# BUILD (build), INIT_CHECKPOINT (default: the newest checkpoint of make demo's run), THREADS (0 =
# all CPUs), EPOCHS, LR, BATCH, TRAIN_QUESTIONS, DEV_QUESTIONS, SEED, VOCAB (default: the vocabulary
# whose size is the checkpoint's vocab_size: make demo's 4,096 pieces or data/vocab.txt's 30,522),
# MAX_SEQ_LENGTH (80: one window per context), DOC_STRIDE (32), MAX_QUERY_LENGTH (24).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
DATA=${DATA:-data}
DEMO_OUT=${DEMO_OUT:-runs/demo}
OUT=${OUT:-runs/demo-squad}
BUILD=${BUILD:-build}
BB="$BUILD/bertbench"
THREADS=${THREADS:-0}
EPOCHS=${EPOCHS:-12}  # 3,000 steps of 32 (3 epochs, 750 steps, were too few: docs/squad.md)
LR=${LR:-1e-3}
BATCH=${BATCH:-32}
TRAIN_QUESTIONS=${TRAIN_QUESTIONS:-8000}
DEV_QUESTIONS=${DEV_QUESTIONS:-500}
SEED=${SEED:-12345}
PY=/usr/bin/python3
MAX_SEQ_LENGTH=${MAX_SEQ_LENGTH:-80}
DOC_STRIDE=${DOC_STRIDE:-32}
MAX_QUERY_LENGTH=${MAX_QUERY_LENGTH:-24}
SEQ_FLAGS=(--max_seq_length="$MAX_SEQ_LENGTH" --doc_stride="$DOC_STRIDE" --max_query_length="$MAX_QUERY_LENGTH")

[[ -x "$BB" ]] || { echo "demo-squad: $BB not found (hint: make build)" >&2; exit 1; }

# The model.ckpt-N.safetensors written last among the files given (empty if none; not the
# highest step, which may belong to an earlier demo run).
newest_checkpoint() {
  ls -1t "$@" 2>/dev/null | grep -E '/model\.ckpt-[0-9]+\.safetensors$' | head -1 || true
}

echo "== 1/5 pretrained checkpoint"
INIT=${INIT_CHECKPOINT:-}
if [[ -z "$INIT" ]]; then
  INIT=$(newest_checkpoint "$DEMO_OUT"/run-*/model.ckpt-*.safetensors)
  if [[ -z "$INIT" ]]; then
    echo "demo-squad: no checkpoint under $DEMO_OUT/run-*/; running scripts/demo.sh first"
    DATA="$DATA" OUT="$DEMO_OUT" BUILD="$BUILD" THREADS="$THREADS" bash "$HERE/demo.sh"
    INIT=$(newest_checkpoint "$DEMO_OUT"/run-*/model.ckpt-*.safetensors)
  fi
fi
[[ -n "$INIT" && -f "$INIT" ]] || { echo "demo-squad: no pretrained checkpoint${INIT:+: $INIT is not a file} (hint: make demo, or INIT_CHECKPOINT=model.ckpt-N.safetensors)" >&2; exit 1; }
echo "   $INIT"
mkdir -p "$OUT"
# run_squad.py takes the model's shape from --bert_config_file; bertbench checkpoints carry it.
"$PY" - "$INIT" "$OUT/bert_config.json" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    meta = json.loads(f.read(n)).get("__metadata__", {})
if "bert_config" not in meta:
    sys.exit(f"demo-squad: {sys.argv[1]}: no bert_config in the safetensors metadata (hint: a bertbench checkpoint)")
open(sys.argv[2], "w").write(json.dumps(json.loads(meta["bert_config"]), indent=2) + "\n")
PYEOF

echo "== 2/5 the demo's SQuAD-format data from the Brown corpus (scripts/make-demo-squad.py)"
bash "$HERE/get-data.sh" "$DATA" >/dev/null
"$PY" "$HERE/make-demo-squad.py" "$DATA/brown" "$OUT/data" --train_questions="$TRAIN_QUESTIONS" \
  --dev_questions="$DEV_QUESTIONS" --seed="$SEED"

# The checkpoint's vocabulary: make demo pretrains on its own 4,096-piece cut of bert-base-uncased's.
if [[ -z "${VOCAB:-}" ]]; then
  size=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$OUT/bert_config.json")
  for v in "$DEMO_OUT/records-s32/vocab.txt" "$DATA/vocab.txt"; do
    if [[ -f "$v" && $(wc -l <"$v") -eq $size ]]; then VOCAB=$v; break; fi
  done
  [[ -n "${VOCAB:-}" ]] || { echo "demo-squad: $INIT has vocab_size $size; neither $DEMO_OUT/records-s32/vocab.txt nor $DATA/vocab.txt has that many lines (hint: VOCAB=<its vocab.txt>)" >&2; exit 1; }
fi
echo "   vocabulary: $VOCAB"

COMMON=(--vocab_file="$VOCAB" --bert_config_file="$OUT/bert_config.json" --do_lower_case
        "${SEQ_FLAGS[@]}" --predict_batch_size=64 --threads="$THREADS" --seed="$SEED")

echo "== 3/5 baseline: the pretrained model without fine-tuning (random span head, learning rate 0)"
# bertbench squad --do_predict alone refuses a checkpoint without the span head, and --do_train needs
# at least one step: one step at learning rate 0 leaves every weight as initialised.
BASE_EPOCHS=$("$PY" -c "import json, sys
d = json.load(open(sys.argv[2]))
print(1.5 * int(sys.argv[1]) / sum(len(p['qas']) for a in d['data'] for p in a['paragraphs']))" \
  "$BATCH" "$OUT/data/train-v1.1.json")
rm -rf "$OUT/untrained"
"$BB" squad "${COMMON[@]}" --init_checkpoint="$INIT" \
  --do_train --train_file="$OUT/data/train-v1.1.json" --train_batch_size="$BATCH" \
  --num_train_epochs="$BASE_EPOCHS" --learning_rate=0 \
  --do_predict --predict_file="$OUT/data/dev-v1.1.json" --output_dir="$OUT/untrained" \
  >"$OUT/untrained.log" 2>&1 || { tail -5 "$OUT/untrained.log" >&2; exit 1; }

echo "== 4/5 fine-tuning ($EPOCHS epochs, batch $BATCH, lr $LR), prediction and the official metric"
rm -rf "$OUT/finetuned"
"$BB" squad "${COMMON[@]}" --init_checkpoint="$INIT" \
  --do_train --train_file="$OUT/data/train-v1.1.json" --train_batch_size="$BATCH" \
  --learning_rate="$LR" --num_train_epochs="$EPOCHS" --warmup_proportion=0.1 \
  --do_predict --predict_file="$OUT/data/dev-v1.1.json" --output_dir="$OUT/finetuned"

"$PY" - "$OUT" "$MAX_SEQ_LENGTH" <<'PYEOF'
import glob, json, os, sys
out, seq = sys.argv[1], sys.argv[2]
def metric(d):
    p = os.path.join(out, d, "eval_results.json")
    return json.load(open(p)) if os.path.exists(p) else None
def fmt(m):
    return "n/a" if m is None else f"EM {m['exact_match']:.1f}  F1 {m['f1']:.1f}"
base, tuned = metric("untrained"), metric("finetuned")
dev = json.load(open(os.path.join(out, "data", "dev-v1.1.json")))
train = json.load(open(os.path.join(out, "data", "train-v1.1.json")))
nq = lambda d: sum(len(p["qas"]) for a in d["data"] for p in a["paragraphs"])
ft = os.path.join(out, "finetuned")
def load(name):
    p = os.path.join(ft, name)
    return json.load(open(p)) if os.path.exists(p) else {}
results, speed = load("results.json"), load("predict_speed.json")
print()
print("== demo-squad summary (synthetic questions on Brown text, not SQuAD: docs/squad.md)")
print(f"  data                   : {nq(train)} training / {nq(dev)} dev questions, 'where is <phrase> ?' ({out}/data/)")
print(f"  without fine-tuning    : {fmt(base)}   (pretrained encoder, random span head)")
print(f"  after fine-tuning      : {fmt(tuned)}   (official evaluate-v1.1.py metric on the dev set)")
if results:
    tput = results.get("train_sequences_per_second")
    print(f"  fine-tuning            : {results.get('updates')} steps of {results.get('global_batch_size')} in "
          f"{results.get('wall_time_s', 0):.0f} s; "
          + (f"{tput:.1f} sequences/s" if tput else "throughput n/a") + f" (seq {seq}, warm-up excluded)")
if speed:
    print(f"  prediction             : {speed['sequences_per_second']:.1f} sequences/s, batch of "
          f"{speed['batch_size']} latency p50 {speed['batch_latency_ms_p50']:.1f} ms (model only)")
print(f"  predictions            : {ft}/predictions.json, {ft}/nbest_predictions.json")
print(f"  metric                 : {ft}/eval_results.json (baseline: {out}/untrained/eval_results.json)")
print(f"  logs                   : {ft}/train_log.jsonl, {ft}/curves.svg, {ft}/results.json, {ft}/predict_speed.json")
if results.get("last_checkpoint"):
    print(f"  fine-tuned checkpoint  : {results['last_checkpoint']}")
PYEOF
