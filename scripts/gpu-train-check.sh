#!/usr/bin/env bash
# Training on the GPU against the CPU, as issue 24 asks it to be shown (docs/gpu.md): run by
# scripts/gpu-check.sh on the GPU machine with the packed binary and data (scripts/gpu-pack.sh).
#  - pretraining, 200 LAMB steps of a small odd model (hidden 48, 3 heads, 2 layers) on the golden
#    records, --device=cpu and --device=cuda, fp32 (no TF32) and bf16: the loss curves must agree
#    within 1e-3 relative in fp32 (bf16, whose rounded sums differ by device: reported against 1e-2);
#  - each run's final checkpoint evaluated on the other device: the same metrics (1e-4);
#  - SQuAD fine-tuning and prediction on both devices: >= 99% of the answers the same;
#  - every pretraining run's mlperf.log passes the compliance checker's rules
#    (scripts/mlperf_log_check.py: training_5.0.0, BERT, the open division bertbench logs).
# Writes OUT/train/* (runs, compare.json) and exits non-zero when a check fails. About a minute.
# Usage: scripts/gpu-train-check.sh BERTBENCH DATA_DIR OUT_DIR
#   GPU=cpu runs the "GPU" side on the CPU too (a dry run of the script on a machine without one).
#   STEPS=N pretrains N steps instead of 200, EVAL_STEPS=M evaluates the checkpoints on M batches
#   of 16 instead of all 100 records, SQUAD_EPOCHS=E fine-tunes E epochs instead of 4, and
#   TIMEOUT_SCALE=K multiplies each run's time limit (the emulated GPU's run in CI,
#   tests/cuda_emu/gpu_train_check_emu.sh, is slower than a GPU).
set -uo pipefail
BB=$1 DATA=$2 OUT=$3/train GPU=${GPU:-cuda} STEPS=${STEPS:-200} EVAL_STEPS=${EVAL_STEPS:-0}
SQUAD_EPOCHS=${SQUAD_EPOCHS:-4}
K=${TIMEOUT_SCALE:-1}
declare -A DEVICE=([host]=cpu [gpu]=$GPU)
mkdir -p "$OUT"
status=0
cat > "$OUT/bert_config.json" <<'EOF'
{"vocab_size": 30522, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
 "intermediate_size": 80, "max_position_embeddings": 512, "type_vocab_size": 2,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "initializer_range": 0.02}
EOF
pretrain=(pretrain --bert_config_file="$OUT/bert_config.json" --input_file="$DATA/train.tfrecord"
  --eval_input_file="$DATA/eval.tfrecord" --train_batch_size=8 --num_train_steps=$STEPS
  --num_warmup_steps=$((STEPS / 10))
  --learning_rate=5e-3 --max_seq_length=128 --max_predictions_per_seq=20 --save_checkpoints_steps=0
  --eval_every_samples=800 --max_eval_steps=4 --eval_batch_size=16 --seed=3 --threads=0
  --target_mlm_accuracy=0.99)
for dtype in fp32 bf16; do
  for side in host gpu; do
    echo "-- pretrain --device=${DEVICE[$side]} --dtype=$dtype"
    timeout $((150 * K)) "$BB" "${pretrain[@]}" --device=${DEVICE[$side]} --dtype=$dtype --output_dir="$OUT/pretrain-$side-$dtype" \
      > "$OUT/pretrain-$side-$dtype.log" 2>&1 || { status=1; tail -3 "$OUT/pretrain-$side-$dtype.log"; }
  done
done
# Each final checkpoint evaluated on both devices
for run in host gpu; do
  for side in host gpu; do
    timeout $((60 * K)) "$BB" eval --init_checkpoint="$OUT/pretrain-$run-fp32/model.ckpt-$STEPS.safetensors" \
      --input_file="$DATA/eval.tfrecord" --max_seq_length=128 --max_predictions_per_seq=20 --eval_batch_size=16 \
      --max_eval_steps=$EVAL_STEPS --device=${DEVICE[$side]} --threads=0 --json="$OUT/eval-$run-on-$side.json" \
      > "$OUT/eval-$run-on-$side.log" 2>&1 || { status=1; tail -3 "$OUT/eval-$run-on-$side.log"; }
  done
done
squad=(squad --vocab_file="$DATA/vocab.txt" --model=tiny --do_train --train_file="$DATA/train-v1.1.json"
  --do_predict --predict_file="$DATA/dataset-v1.1.json" --max_seq_length=64 --max_query_length=24
  --doc_stride=32 --train_batch_size=8 --predict_batch_size=16 --num_train_epochs=$SQUAD_EPOCHS --learning_rate=1e-3
  --seed=7 --threads=0)
for side in host gpu; do
  echo "-- squad --device=${DEVICE[$side]}"
  timeout $((120 * K)) "$BB" "${squad[@]}" --device=${DEVICE[$side]} --output_dir="$OUT/squad-$side" > "$OUT/squad-$side.log" 2>&1 \
    || { status=1; tail -3 "$OUT/squad-$side.log"; }
done
python3 - "$OUT" "$STEPS" "$(dirname "$0")/mlperf_log_check.py" <<'PY' || status=1
import json, os, subprocess, sys
out, steps, checker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def log(run):
    path = os.path.join(out, run, "train_log.jsonl")
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []
report, ok = {}, True
for dtype, tol in (("fp32", 1e-3), ("bf16", 1e-2)):
    a, b = log(f"pretrain-host-{dtype}"), log(f"pretrain-gpu-{dtype}")
    worst = max((abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b)), default=float("nan"))
    good = len(a) == len(b) == steps and worst <= tol
    report[f"pretrain_{dtype}"] = {"steps": [len(a), len(b)], "max_rel_loss_diff": worst, "tolerance": tol, "ok": good}
    ok &= good if dtype == "fp32" else len(a) == len(b) == steps  # bf16's sums differ by device: reported
for run in ("host", "gpu"):
    try:
        x, y = (json.load(open(os.path.join(out, f"eval-{run}-on-{d}.json"))) for d in ("host", "gpu"))
        diff = max(abs(x[k] - y[k]) / max(abs(x[k]), 1e-12) for k in ("masked_lm_accuracy", "masked_lm_loss",
                                                                         "next_sentence_accuracy", "next_sentence_loss"))
        good = diff <= 1e-4
    except (OSError, KeyError, ValueError):
        diff, good = float("nan"), False
    report[f"eval_{run}_checkpoint_on_both"] = {"max_rel_diff": diff, "ok": good}
    ok &= good
for dtype in ("fp32", "bf16"):
    for side in ("host", "gpu"):
        c = subprocess.run([sys.executable, checker, "--division=open",
                            os.path.join(out, f"pretrain-{side}-{dtype}", "mlperf.log")],
                           capture_output=True, text=True)
        report[f"mlperf_log_{side}_{dtype}"] = {"checker": c.stdout.strip().splitlines()[-3:],
                                                "ok": c.returncode == 0}
        ok &= c.returncode == 0
p = {}
try:
    p, q = (json.load(open(os.path.join(out, f"squad-{d}", "predictions.json"))) for d in ("host", "gpu"))
    same = sum(p[k] == q.get(k) for k in p) / max(len(p), 1)
except (OSError, ValueError):
    same = float("nan")
report["squad_same_answers"] = {"fraction": same, "questions": len(p), "ok": same >= 0.99}
ok &= same >= 0.99
json.dump(report, open(os.path.join(out, "compare.json"), "w"), indent=1)
print(json.dumps(report, indent=1))
sys.exit(0 if ok else 1)
PY
exit $status
