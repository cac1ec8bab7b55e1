#!/usr/bin/env bash
# bf16 against fp32 on the demo's task (docs/engine.md, "Mixed precision: accuracy"):
#   - training: the demo's BERT-tiny LAMB run to masked-LM accuracy $TARGET, fp32 with seeds
#     $FP32_SEEDS (their spread is the run-to-run band) and bf16 with seeds $BF16_SEEDS; samples to
#     target per run; one SVG with the fp32 band and the bf16 curves;
#   - inference: every final checkpoint evaluated in fp32 and in bf16 on the 25 held-out documents.
# Runs resume (the pretrain runs do), $PAR at a time with $THREADS threads each.
# Usage: scripts/bf16-accuracy.sh   (env: BB, OUT, DATA, TARGET, STEPS, THREADS, PAR, FP32_SEEDS, BF16_SEEDS)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
[[ $# -eq 0 ]] || { echo "bf16-accuracy: takes no arguments (its settings are environment variables, --help), got $1" >&2; exit 2; }

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

train() {  # dtype seed: the 128-token demo recipe scripts/demo.sh ran until 2026-11-27
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
def evals(name):
    return [(e["samples"], e["masked_lm_accuracy"]) for e in
            (json.loads(l) for l in open(f"{out}/{name}/eval_log.jsonl"))]
ev_fp = [dict(evals(n)) for n, r in runs.items() if r["dtype"] == "fp32"]
ev_bf = {n: evals(n) for n, r in runs.items() if r["dtype"] == "bf16"}
ex = sorted(set.intersection(*[set(c) for c in ev_fp])) if ev_fp else []
ev_band = [(x, min(c[x] for c in ev_fp), max(c[x] for c in ev_fp)) for x in ex]
colors = ["#d62728", "#2ca02c", "#9467bd"]
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="900" height="560" font-family="sans-serif" font-size="12">',
       '<rect width="900" height="560" fill="white"/>',
       f'<text x="60" y="20" font-size="14">BERT-tiny demo run to masked-LM accuracy {target}: fp32 (band: min..max of {len(fp)} seeds) vs bf16</text>']

def panel(x0, y0, x1, y1, band, lines, title, xmin, hline=None):
    """A plot of a min..max band and lines [(label, points)] over samples >= xmin."""
    band = [b for b in band if b[0] >= xmin]
    lines = [(n, [(x, y) for x, y in c if x >= xmin]) for n, c in lines]
    xs = [b[0] for b in band] + [x for _, c in lines for x, _ in c]
    ys = [v for b in band for v in b[1:]] + [y for _, c in lines for _, y in c] + ([hline] if hline else [])
    xa, xb, ya, yb = min(xs), max(xs), min(ys), max(ys)
    pad = 0.05 * (yb - ya or 1)
    ya, yb = ya - pad, yb + pad
    sx = lambda x: x0 + (x1 - x0) * (x - xa) / (xb - xa)
    sy = lambda y: y1 - (y1 - y0) * (y - ya) / (yb - ya)
    svg.append(f'<text x="{x0}" y="{y0 - 8}">{title}</text>')
    svg.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="black"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>')
    for i in range(5):
        y = ya + (yb - ya) * i / 4
        svg.append(f'<text x="{x0 - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3f}</text>')
        x = xa + (xb - xa) * i / 4
        svg.append(f'<text x="{sx(x):.1f}" y="{y1 + 16}" text-anchor="middle">{x / 1000:.0f}k</text>')
    if hline is not None:
        svg.append(f'<line x1="{x0}" y1="{sy(hline):.1f}" x2="{x1}" y2="{sy(hline):.1f}" stroke="gray" stroke-dasharray="4,3"/>')
    if band:
        poly = [f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in band] + [f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(band)]
        svg.append(f'<polygon points="{" ".join(poly)}" fill="#1f77b4" fill-opacity="0.35" stroke="#1f77b4" stroke-width="0.5"/>')
    for i, (n, c) in enumerate(lines):
        svg.append(f'<polyline points="{" ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in c)}" fill="none" stroke="{colors[i % 3]}" stroke-width="1.3"/>')

xmax = max(x for c in fp for x in c)
panel(70, 60, 600, 260, band, sorted(bf.items()), "training loss, mean of 50 updates (after 10% of the samples)", 0.1 * xmax)
panel(70, 320, 600, 520, ev_band, sorted(ev_bf.items()), "online eval: masked-LM accuracy (256 held-out examples); dashed: target", 0, target)
svg.append('<text x="335" y="552" text-anchor="middle">training samples</text>')
ly = 70
svg.append(f'<rect x="620" y="{ly - 9}" width="14" height="10" fill="#1f77b4" fill-opacity="0.35"/><text x="640" y="{ly}">fp32, min..max of {len(fp)} seeds</text>')
for i, n in enumerate(sorted(bf)):
    ly += 18
    svg.append(f'<line x1="620" y1="{ly - 4}" x2="634" y2="{ly - 4}" stroke="{colors[i % 3]}" stroke-width="2"/><text x="640" y="{ly}">{n}</text>')
    ly += 16
    svg.append(f'<text x="640" y="{ly}">({100 * inside[n]:.0f}% of loss points in the band)</text>')
ly += 12
for n, r in sorted(runs.items()):
    ly += 18
    svg.append(f'<text x="620" y="{ly}">{n}: target at {r["samples_to_target"]}</text>')
svg.append("</svg>")
open(out + "/loss_curves.svg", "w").write("\n".join(svg) + "\n")
summary = {"target": target, "runs": {n: {k: v for k, v in r.items() if k != "curve"} for n, r in runs.items()},
           "bf16_fraction_of_points_inside_fp32_band": inside}
json.dump(summary, open(out + "/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PYEOF
