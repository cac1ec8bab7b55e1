#!/usr/bin/env bash
# MLPerf-style time-to-train scoring: runs one pretraining recipe with several seeds, reads each
# run's results.json and scores them as MLPerf's result summarizer does.
#   scripts/time-to-train.sh [--runs=N | --seeds=S1,S2,...] [--out=DIR] [--bertbench=PATH]
#                            [pretrain flags ...]
# Without pretrain flags it runs the demo recipe (scripts/demo-recipe.sh; TARGET, STEPS, THREADS,
# DTYPE as for make demo) on make demo's records (RECORDS, default runs/demo/records-s32) into
# runs/time-to-train/demo-target<T>-steps<S>-<dtype>. Any other flag goes to `bertbench pretrain`
# unchanged, except --seed and --output_dir, which this script sets: run k gets --seed=<k-th seed>
# --output_dir=DIR/seed-<seed>. Seeds: 1..N (default N = 5). A rerun with the same DIR resumes an
# interrupted run and reuses finished ones (pretrain does that); a resumed run's times sum its
# segments, and the report names it (MLPerf times one uninterrupted run). A run that fails after
# run_start (results.json: aborted) counts as one that did not reach the target, as MLPerf counts
# every run started, and a rerun does not run it again; any other error stops the script.
# Scoring (MLPerf Training rules, as mlperf_logging's result_summarizer computes them): each run's
# time to target is run_start -> the evaluation that reached the target (results.json
# time_to_target_s; initialisation excluded). With N >= 5 the fastest and the slowest runs are
# dropped and the rest averaged; a run that did not reach its target counts as the slowest (one
# at most: with two or more there is no score). With N < 5 nothing is dropped, and every run must
# reach the target. Prints each run, the mean and spread (min..max, sample standard deviation) of
# time and samples to target over the counted runs; writes DIR/summary.json.
# Exit status: 0 with a score; 1 on an error or when there is no score (the reason is printed).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3
die() { echo "time-to-train: $*" >&2; exit 1; }

RUNS=""
RUNS_GIVEN=0
SEEDS=""
SEEDS_GIVEN=0
OUT=""
BB=${BB:-}
ARGS=()
for a in "$@"; do
  case "$a" in
    --runs=*) RUNS=${a#--runs=}; RUNS_GIVEN=1 ;;
    --seeds=*) SEEDS=${a#--seeds=}; SEEDS_GIVEN=1 ;;
    --out=*) OUT=${a#--out=} ;;
    --bertbench=*) BB=${a#--bertbench=} ;;
    --seed=*|--seed|-seed=*|-seed|--output_dir=*|--output_dir|-output_dir=*|-output_dir)
      die "${a%%=*}: set by this script (--seeds=S1,S2,... and --out=DIR), expected it absent, got $a" ;;
    --nodo_eval|-nodo_eval|--do_eval=*|-do_eval=*)
      # pretrain reads booleans as absl does: one or two dashes, false/0/no/f/n in any case
      v=$(tr '[:upper:]' '[:lower:]' <<<"${a#*=}")
      if [[ $a == *nodo_eval || $v =~ ^(false|0|no|f|n)$ ]]; then
        die "$a: time to train is measured by the evaluations, expected them on (--do_eval), got $a"
      fi
      ARGS+=("$a") ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) ARGS+=("$a") ;;
  esac
done

if [[ $RUNS_GIVEN -eq 1 && $SEEDS_GIVEN -eq 1 ]]; then
  die "--runs and --seeds: expected one of them, got both (--runs=$RUNS --seeds=$SEEDS)"
fi
if [[ $SEEDS_GIVEN -eq 1 ]]; then
  [[ "$SEEDS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds: expected a comma list of integers, got \"$SEEDS\""
  IFS=, read -r -a SEED_LIST <<<"$SEEDS"
  # 007 is seed 7 (pretrain reads it so): one spelling per seed, for the directories and the check
  SEED_LIST=($(printf '%s\n' "${SEED_LIST[@]}" | sed -E 's/^0+([0-9])/\1/'))
  dup=$(printf '%s\n' "${SEED_LIST[@]}" | sort | uniq -d | head -1)
  [[ -z "$dup" ]] || die "--seeds: expected distinct seeds, got $dup twice"
else
  [[ $RUNS_GIVEN -eq 1 ]] || RUNS=5
  [[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || die "--runs: expected an integer >= 1, got \"$RUNS\""
  SEED_LIST=()
  for ((k = 1; k <= RUNS; k++)); do SEED_LIST+=("$k"); done
fi

if [[ -z "$BB" ]]; then BB="$ROOT/${BUILD:-build}/bertbench"; fi
[[ -x "$BB" ]] || die "--bertbench: expected an executable bertbench, got \"$BB\" (hint: make build, or --bertbench=PATH)"

if [[ ${#ARGS[@]} -eq 0 ]]; then
  # The demo recipe, as make demo runs it.
  TARGET=${TARGET:-0.30}
  STEPS=${STEPS:-14000}
  THREADS=${THREADS:-0}
  RECORDS=${RECORDS:-$ROOT/runs/demo/records-s32}
  ls "$RECORDS"/train-*.tfrecord >/dev/null 2>&1 && [[ -f "$RECORDS/eval.tfrecord" && -f "$RECORDS/bert_config.json" ]] ||
    die "RECORDS: expected make demo's records (train-*.tfrecord, eval.tfrecord, bert_config.json) in $RECORDS, found none (hint: make demo, or RECORDS=DIR)"
  source "$HERE/demo-recipe.sh"
  DTYPE=${DTYPE:-$(demo_dtype "$BB")}
  demo_recipe "$RECORDS" "$TARGET" "$STEPS" "$THREADS" "$DTYPE"
  ARGS=("${DEMO_RECIPE[@]}")
  OUT=${OUT:-$ROOT/runs/time-to-train/demo-target$TARGET-steps$STEPS-$DTYPE}
fi
[[ -n "$OUT" ]] || die "--out: expected a directory for the runs (DIR/seed-<seed>), got none"
mkdir -p "$OUT"

echo "== time to train: ${#SEED_LIST[@]} run(s), seeds ${SEED_LIST[*]}, in $OUT"
echo "   $BB pretrain ${ARGS[*]} --seed=<seed> --output_dir=$OUT/seed-<seed>"
status_of() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("status", ""))' "$1" 2>/dev/null || true; }
stamp_of() { stat -c '%i %y' "$1" 2>/dev/null || true; }
for s in "${SEED_LIST[@]}"; do
  echo "== seed $s"
  res="$OUT/seed-$s/results.json"
  if [[ -f "$res" && "$(status_of "$res")" == aborted ]]; then
    # Started and failed in an earlier attempt: MLPerf counts it as it ended; rerunning it (a resume
    # from its last checkpoint) could turn a failed run into a success.
    echo "time-to-train: seed $s: failed after run_start in an earlier attempt (results.json: aborted); not rerun, it counts as a run that did not reach the target" >&2
    continue
  fi
  rc=0
  before=$(stamp_of "$res")  # results.json written by this attempt has another inode or time
  "$BB" pretrain "${ARGS[@]}" --seed="$s" --output_dir="$OUT/seed-$s" || rc=$?
  if [[ $rc -ne 0 && -f "$res" && "$(stamp_of "$res")" != "$before" && "$(status_of "$res")" == aborted ]]; then
    # MLPerf: every run started counts; one that failed after run_start did not reach the target
    echo "time-to-train: seed $s: the run failed after run_start (results.json: aborted); it counts as a run that did not reach the target" >&2
  elif [[ $rc -eq 130 || $rc -eq 143 || $rc -eq 129 || $rc -eq 137 ]]; then
    die "seed $s: bertbench pretrain was stopped by signal $((rc - 128)) (status $rc); run this script again to resume it ($OUT/seed-$s)"
  elif [[ $rc -gt 128 ]]; then
    die "seed $s: bertbench pretrain died of signal $((rc - 128)) (status $rc; $OUT/seed-$s)"
  elif [[ $rc -ne 0 ]]; then
    die "seed $s: bertbench pretrain exited with status $rc (its error is above; $OUT/seed-$s)"
  fi
  [[ -f "$res" ]] || die "seed $s: expected $res, found none"
done

CPU=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
"$PY" - "$OUT" "$CPU" "$BB" "${SEED_LIST[@]}" -- "${ARGS[@]}" <<'PYEOF'
import json, math, sys

out, cpu, bb = sys.argv[1], sys.argv[2], sys.argv[3]
rest = sys.argv[4:]
sep = rest.index("--")
seeds, args = [int(s) for s in rest[:sep]], rest[sep + 1:]

runs = []
for s in seeds:
    d = f"{out}/seed-{s}"
    r = json.load(open(f"{d}/results.json"))
    runs.append({
        "seed": s, "output_dir": d, "status": r["status"],
        "target_mlm_accuracy": r.get("target_mlm_accuracy"),
        "target_reached": r["status"] == "success" and r.get("time_to_target_s") is not None,
        "time_to_target_s": r.get("time_to_target_s"),
        "samples_to_target": r.get("samples_to_target"),
        "best_masked_lm_accuracy": r.get("best_masked_lm_accuracy"),
        "best_masked_lm_accuracy_samples": r.get("best_masked_lm_accuracy_samples"),
        "best_masked_lm_accuracy_time_s": r.get("best_masked_lm_accuracy_time_s"),
        "samples": r.get("samples"), "wall_time_s": r.get("wall_time_s"),
        "initialization_s": r.get("initialization_s"),
        "train_sequences_per_second": r.get("train_sequences_per_second"),
        "resumed": r.get("resumed_from") is not None,
    })
unfinished = [r for r in runs if r["status"] == "interrupted" or r["status"].startswith("stopped")]
if unfinished:
    sys.exit(f"time-to-train: seed {unfinished[0]['seed']}: not finished (results.json: \"{unfinished[0]['status']}\"); "
             f"running this script again continues it")
targets = {r["target_mlm_accuracy"] for r in runs}
if targets == {None}:
    sys.exit(f"time-to-train: target_mlm_accuracy: the runs in {out} evaluated nothing; time to train is "
             f"measured by the evaluations (--do_eval)")
if len(targets) != 1 or None in targets:
    sys.exit(f"time-to-train: target_mlm_accuracy: expected one target for every run, got "
             f"{sorted(map(str, targets))} (the runs in {out} differ: use a new --out)")
target = targets.pop()

def fmt(x, f):
    return "-" if x is None else f.format(x)

print()
print(f"== time to train: target masked-LM accuracy {target}, {len(runs)} run(s), CPU {cpu or 'unknown'}")
print(f"  {'seed':>6}  {'status':<20} {'time to target':>15} {'samples to target':>18}  best accuracy (samples, s)")
for r in runs:
    best = (f"{r['best_masked_lm_accuracy']:.4f} ({fmt(r['best_masked_lm_accuracy_samples'], '{}')}, "
            f"{fmt(r['best_masked_lm_accuracy_time_s'], '{:.1f}')})"
            if r["best_masked_lm_accuracy"] is not None else "-")
    status = r["status"] + (" (resumed)" if r["resumed"] else "")
    print(f"  {r['seed']:>6}  {status:<20} {fmt(r['time_to_target_s'], '{:.1f} s'):>15} "
          f"{fmt(r['samples_to_target'], '{}'):>18}  {best}")

# MLPerf: result_summarizer drops non-converged runs (at most one) as the slowest, then the
# fastest and (if none was dropped) the slowest of the rest; here only with 5 runs or more.
reached = sorted((r for r in runs if r["target_reached"]), key=lambda r: r["time_to_target_s"])
failed = [r for r in runs if not r["target_reached"]]
dropped, score, reason = [], None, None
if len(runs) >= 5:
    rule = ("MLPerf olympic mean: N >= 5, the fastest and the slowest run dropped; a run that did not "
            "reach the target counts as the slowest (at most one)")
    if len(failed) > 1:
        reason = f"{len(failed)} runs did not reach the target; MLPerf allows one"
    else:
        counted = list(reached)
        dropped = [{"seed": r["seed"], "why": "did not reach the target (counts as the slowest)"} for r in failed]
        dropped.append({"seed": counted[0]["seed"], "why": "fastest"})
        counted = counted[1:]
        if not failed:
            dropped.append({"seed": counted[-1]["seed"], "why": "slowest"})
            counted = counted[:-1]
else:
    rule = "mean of every run (N < 5: nothing dropped; every run must reach the target)"
    if failed:
        reason = (f"{len(failed)} of {len(runs)} runs did not reach the target "
                  f"(seeds {', '.join(str(r['seed']) for r in failed)})")
    else:
        counted = list(reached)

def stats(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return {"mean": m, "min": min(xs), "max": max(xs), "stdev": sd, "runs": len(xs)}

resumed = [r["seed"] for r in runs if r["resumed"]]
print()
print(f"  scoring: {rule}")
if resumed:
    print(f"  resumed: seed(s) {', '.join(map(str, resumed))} ran in more than one process: their times sum the "
          f"segments (results.json), where MLPerf times one uninterrupted run; rerun them in a new --out for "
          f"a compliant score")
for d in dropped:
    print(f"  dropped: seed {d['seed']} ({d['why']})")
if reason is None:
    counted = [r for r in runs if any(r is c for c in counted)]  # in the order the runs ran
    t = stats([r["time_to_target_s"] for r in counted])
    n = stats([r["samples_to_target"] for r in counted])
    score = {"counted_seeds": [r["seed"] for r in counted], "time_to_target_s": t, "samples_to_target": n}
    sd_t = "" if t["stdev"] is None else f", stdev {t['stdev']:.1f} s"
    sd_n = "" if n["stdev"] is None else f", stdev {n['stdev']:.0f}"
    print(f"  time to target   : mean {t['mean']:.1f} s over {t['runs']} run(s) "
          f"(seeds {', '.join(map(str, score['counted_seeds']))}); min..max {t['min']:.1f}..{t['max']:.1f} s{sd_t}")
    print(f"  samples to target: mean {n['mean']:.0f}; min..max {n['min']}..{n['max']}{sd_n}")
else:
    print(f"  no score: {reason}")

summary = {"target_mlm_accuracy": target, "cpu": cpu, "bertbench": bb,
           "command": ["pretrain"] + args + ["--seed=<seed>", f"--output_dir={out}/seed-<seed>"],
           "runs": runs, "scoring_rule": rule, "dropped": dropped, "score": score,
           "resumed_seeds": resumed,
           "no_score_reason": reason,
           "time_to_target_definition": "results.json time_to_target_s: run_start -> the end of the "
                                        "evaluation that reached the target (MLPerf; initialisation excluded)"}
with open(f"{out}/summary.json.tmp", "w") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
import os
os.replace(f"{out}/summary.json.tmp", f"{out}/summary.json")
print(f"  summary          : {out}/summary.json")
sys.exit(0 if score is not None else 1)
PYEOF
