#!/usr/bin/env bash
# bf16 against fp32 on the demo's task (docs/engine.md, "Mixed precision: accuracy"):
#   - training: the demo's BERT-tiny LAMB run to masked-LM accuracy $TARGET, fp32 with seeds
#     $FP32_SEEDS (their spread is the run-to-run band) and bf16 with seeds $BF16_SEEDS; samples to
#     target per run; one SVG with the fp32 band and the bf16 curves;
#   - inference: every final checkpoint evaluated in fp32 and in bf16 on the 25 held-out documents.
# Runs resume (the pretrain runs do), $PAR at a time with $THREADS threads each.
# Usage: scripts/bf16-accuracy.sh   (env: BB, OUT, DATA, TARGET, STEPS, THREADS, PAR, FP32_SEEDS, BF16_SEEDS)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE/.."
BB=${BB:-build/bertbench}
OUT=${OUT:-runs/bf16-accuracy}
DATA=${DATA:-data}
TARGET=${TARGET:-0.135}
STEPS=${STEPS:-2400}
THREADS=${THREADS:-1}
PAR=${PAR:-2}
FP32_SEEDS=${FP32_SEEDS:-"12345 1 2"}
BF16_SEEDS=${BF16_SEEDS:-"12345 1"}

[[ -x "$BB" ]] || { echo "bf16-accuracy: $BB not found (hint: make build)" >&2; exit 1; }
bash "$HERE/get-data.sh" "$DATA"
mkdir -p "$OUT/records"
if [[ ! -f "$OUT/records/eval.tfrecord" ]]; then
  "$BB" prepare --input_dir="$DATA/brown" --output_dir="$OUT/records" --vocab_file="$DATA/vocab.txt" \
    --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5 \
    --masked_lm_prob=0.15 --random_seed=12345 --jobs=0
fi

train() {  # dtype seed: the demo's pretrain command (scripts/demo.sh)
  local run="$OUT/$1-seed$2"
  "$BB" pretrain --model=tiny --dtype="$1" \
    --input_file="$OUT/records/train-*.tfrecord" --eval_input_file="$OUT/records/eval.tfrecord" \
    --output_dir="$run" --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --optimizer=lamb --learning_rate=1e-2 --num_warmup_steps=30 --num_train_steps="$STEPS" \
    --eval_every_samples=3200 --eval_batch_size=32 --max_eval_steps=8 \
    --target_mlm_accuracy="$TARGET" --save_checkpoints_steps=200 --keep_checkpoint_max=1 \
    --threads="$THREADS" --seed="$2" > "$run.log" 2>&1 || { echo "bf16-accuracy: $run failed, see $run.log" >&2; return 1; }
  echo "bf16-accuracy: $run done"
}

jobs_list=()
for s in $FP32_SEEDS; do jobs_list+=("fp32 $s"); done
for s in $BF16_SEEDS; do jobs_list+=("bf16 $s"); done
running=0
for j in "${jobs_list[@]}"; do
  train $j &
  running=$((running + 1))
  if ((running >= PAR)); then wait -n; running=$((running - 1)); fi
done
wait

# Inference: each final checkpoint in both precisions, the first 1024 held-out examples.
for run in "$OUT"/fp32-seed* "$OUT"/bf16-seed*; do
  [[ -d "$run" ]] || continue
  ckpt=$(ls -1 "$run"/model.ckpt-*.safetensors | sed 's/.*ckpt-\([0-9]*\)\.safetensors/\1 &/' | sort -n | tail -1 | cut -d' ' -f2)
  for d in fp32 bf16; do
    "$BB" eval --init_checkpoint="$ckpt" --input_file="$OUT/records/eval.tfrecord" --dtype=$d \
      --eval_batch_size=32 --max_eval_steps=32 --threads="$THREADS" --json="$run/eval-$d.json" >/dev/null 2>&1
  done
done

/usr/bin/python3 - "$OUT" "$TARGET" <<'PYEOF'
import glob, json, os, sys
out, target = sys.argv[1], float(sys.argv[2])
runs = {}
for d in sorted(glob.glob(out + "/*-seed*")):
    if not os.path.isdir(d):
        continue
    name = os.path.basename(d)
    log = [json.loads(l) for l in open(d + "/train_log.jsonl")]
    res = json.load(open(d + "/results.json"))
    ev = {k: json.load(open(f"{d}/eval-{k}.json")) for k in ("fp32", "bf16") if os.path.exists(f"{d}/eval-{k}.json")}
    runs[name] = {"dtype": name.split("-")[0], "curve": [(r["samples"], r["loss"]) for r in log if r["loss"] is not None],
                  "status": res["status"], "samples_to_target": res["samples_to_target"],
                  "best_accuracy": res["best_masked_lm_accuracy"],
                  "eval": {k: {"masked_lm_accuracy": v["masked_lm_accuracy"], "masked_lm_loss": v["masked_lm_loss"],
                               "examples": v["examples"]} for k, v in ev.items()}}
# Loss curves, smoothed over 50 updates (one update = 32 sequences), fp32 min..max band.
def smooth(c, k=50):
    xs, ys = [x for x, _ in c], [y for _, y in c]
    return [(xs[i], sum(ys[max(0, i - k + 1):i + 1]) / len(ys[max(0, i - k + 1):i + 1])) for i in range(len(ys))]
fp = [dict(smooth(r["curve"])) for n, r in runs.items() if r["dtype"] == "fp32"]
bf = {n: smooth(r["curve"]) for n, r in runs.items() if r["dtype"] == "bf16"}
xs = sorted(set.intersection(*[set(c) for c in fp])) if fp else []
band = [(x, min(c[x] for c in fp), max(c[x] for c in fp)) for x in xs]
inside = {}
for n, c in bf.items():
    pts = [(x, y) for x, y in c if x in dict((b[0], b) for b in band)]
    bd = {b[0]: b for b in band}
    inside[n] = sum(bd[x][1] <= y <= bd[x][2] for x, y in pts) / max(1, len(pts))
W, H, x0, x1, y0, y1 = 860, 480, 70, 640, 40, 420
allx = [x for x, _, _ in band] + [x for c in bf.values() for x, _ in c]
ally = [v for _, lo, hi in band for v in (lo, hi)] + [y for c in bf.values() for _, y in c]
xmax, ymin, ymax = max(allx), min(ally), max(ally)
sx = lambda x: x0 + (x1 - x0) * x / xmax
sy = lambda y: y1 - (y1 - y0) * (y - ymin) / (ymax - ymin)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{x0}" y="22" font-size="14">BERT-tiny demo run, training loss (mean of 50 updates): fp32 band over {len(fp)} seeds vs bf16</text>',
       f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="black"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>']
for i in range(6):
    y = ymin + (ymax - ymin) * i / 5
    svg.append(f'<text x="{x0 - 8}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
    x = xmax * i / 5
    svg.append(f'<text x="{sx(x):.1f}" y="{y1 + 18}" text-anchor="middle">{x / 1000:.0f}k</text>')
svg.append(f'<text x="{(x0 + x1) / 2}" y="{y1 + 36}" text-anchor="middle">training samples</text>')
if band:
    poly = [f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in band] + [f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(band)]
    svg.append(f'<polygon points="{" ".join(poly)}" fill="#1f77b4" fill-opacity="0.3" stroke="#1f77b4" stroke-width="0.5"/>')
colors = ["#d62728", "#2ca02c", "#9467bd"]
for i, (n, c) in enumerate(sorted(bf.items())):
    pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in c)
    svg.append(f'<polyline points="{pts}" fill="none" stroke="{colors[i % 3]}" stroke-width="1.2"/>')
ly = y0 + 10
svg.append(f'<rect x="{x1 + 20}" y="{ly - 9}" width="14" height="10" fill="#1f77b4" fill-opacity="0.3"/><text x="{x1 + 40}" y="{ly}">fp32, min..max of {len(fp)} seeds</text>')
for i, n in enumerate(sorted(bf)):
    ly += 18
    svg.append(f'<line x1="{x1 + 20}" y1="{ly - 4}" x2="{x1 + 34}" y2="{ly - 4}" stroke="{colors[i % 3]}" stroke-width="2"/><text x="{x1 + 40}" y="{ly}">{n} ({100 * inside[n]:.0f}% in band)</text>')
for n, r in sorted(runs.items()):
    ly += 18
    svg.append(f'<text x="{x1 + 20}" y="{ly}">{n}: target at {r["samples_to_target"]} samples</text>')
svg.append("</svg>")
open(out + "/loss_curves.svg", "w").write("\n".join(svg) + "\n")
summary = {"target": target, "runs": {n: {k: v for k, v in r.items() if k != "curve"} for n, r in runs.items()},
           "bf16_fraction_of_points_inside_fp32_band": inside}
json.dump(summary, open(out + "/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PYEOF
