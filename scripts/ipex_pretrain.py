"""Intel's PyTorch BERT-large pretraining benchmark (run_pretrain_mlperf.py --benchmark) as one
`bertbench pretrain`: the script-side half of scripts/ipex_launch.py.

Intel's quickstarts (quickstart/language_modeling/pytorch/bert_large/training/cpu/
run_bert_pretrain_phase{1,2}.sh) always pass --benchmark. What the benchmark is: micro-batches of
--train_batch_size from the HDF5 shards whose names contain "part", LAMB under a linear warm-up/decay
schedule; after micro-batch 51 the script prints `Throughput: X sentence/s` with X = 40 x batch /
(the time of micro-batches 11..51: forward, backward and update) and exits. Here one `bertbench
pretrain` does the same 51 updates (--stop_steps=51 --warmup_updates_excluded=10) and X is computed
the same way from its measured rate. What it cannot run (training without --benchmark, several
instances, fp16/bf32/fp8, gradient accumulation) is refused in one line saying why.
docs/compatibility.md has the table.
"""
import json
import math
import os
import re

import intel_launch_support as support
from intel_launch_support import Refused

SCRIPT = "run_pretrain_mlperf.py"
# run_pretrain_mlperf.py times micro-batches 11..51 and prints 40 x batch / their time
TIMED_FROM, LAST = 11, 51


def parse_script(words):
    """run_pretrain_mlperf.py's argparse (its flags, types and defaults; abbreviations allowed as
    there)."""
    p = support.ArgumentParser(prog=SCRIPT)
    a = p.add_argument
    a("--input_dir", required=True)
    a("--output_dir", required=True)
    a("--eval_dir")
    a("--eval_iter_start_samples", type=int, default=3000000)
    a("--eval_iter_samples", type=int, default=-1)
    a("--num_eval_examples", type=int, default=10000)
    for s in ("--init_checkpoint", "--init_tf_checkpoint", "--train_file", "--validation_file",
              "--model_name_or_path", "--config_name", "--model_type", "--bert_config_path"):
        a(s)
    a("--per_device_eval_batch_size", type=int, default=8)
    a("--learning_rate", type=float, default=5e-5)
    a("--max_predictions_per_seq", type=int, default=76)
    a("--train_batch_size", type=int, default=18)
    a("--eval_batch_size", type=int, default=128)
    a("--weight_decay_rate", type=float, default=0.01)
    a("--opt_lamb_beta_1", type=float, default=0.9)
    a("--opt_lamb_beta_2", type=float, default=0.999)
    a("--max_steps", type=float, default=1536)
    a("--max_samples_termination", type=float, default=14000000)
    a("--warmup_proportion", type=float, default=0.01)
    a("--warmup_steps", type=float, default=0)
    a("--start_warmup_step", type=float, default=0)
    a("--log_freq", type=float, default=10000.0)
    a("--keep_n_most_recent_checkpoints", type=int, default=20)
    a("--num_samples_per_checkpoint", type=int, default=500000)
    a("--min_samples_to_start_checkpoints", type=int, default=3000000)
    a("--target_mlm_accuracy", type=float, default=0.72)
    a("--train_mlm_accuracy_window_size", type=int, default=0)
    a("--num_epochs_to_generate_seeds_for", type=int, default=2)
    a("--weight_decay", type=float, default=0.0)
    a("--num_train_epochs", type=int, default=3)
    a("--gradient_accumulation_steps", type=int, default=1)
    a("--lr_scheduler_type", default="linear")
    a("--seed", type=int, default=42)
    a("--preprocessing_num_workers", type=int)
    a("--local_rank", type=int, default=0)
    a("--world_size", type=int, default=1)
    for s in ("--checkpoint_activations", "--resume_from_checkpoint", "--skip_checkpoint",
              "--phase2", "--do_train", "--use_gradient_as_bucket_view", "--dense_seq_output",
              "--bf16", "--fp16", "--bf32", "--fp8", "--benchmark", "--profile", "--ipex",
              "--inductor"):
        a(s, action="store_true")
    return p.parse_args(words)


def data_flags(s):
    """--input_file and the widths: the regular files of --input_dir whose names contain "part",
    as the script lists them."""
    if not os.path.isdir(s.input_dir):
        raise Refused("--input_dir=%s: expected a directory of HDF5 shards" % s.input_dir)
    names = sorted(f for f in os.listdir(s.input_dir)
                   if os.path.isfile(os.path.join(s.input_dir, f)) and "part" in f)
    if not names:
        raise Refused("--input_dir=%s: no file whose name contains \"part\" (the script reads "
                      "those only)" % s.input_dir)
    odd = [f for f in names if not f.lower().endswith((".hdf5", ".h5"))]
    if odd:
        raise Refused("--input_dir=%s: %s: expected HDF5 shards named .hdf5/.h5 (bertbench picks "
                      "the reader by the name)" % (s.input_dir, odd[0]))
    # --input_file is a comma list of globs: each file as an item that matches it alone (its
    # wildcards escaped for fnmatch); a comma cannot be carried
    paths = [os.path.join(s.input_dir, f) for f in names]
    comma = [p for p in paths if "," in p]
    if comma:
        raise Refused("--input_dir=%s: %s: a name holding a comma, expected none (bertbench's "
                      "--input_file is split at commas; hint: rename it)" % (s.input_dir, comma[0]))
    # the widths from the data, as the script takes them (its --max_predictions_per_seq only caps
    # rows that have no mask at all)
    return ["--input_file=" + ",".join(re.sub(r"([*?[\\])", r"\\\1", p) for p in paths),
            "--max_seq_length=0", "--max_predictions_per_seq=0"]


def check_line(s):
    """Refusals: what the benchmark mapping does not run, each with its reason."""
    if not s.benchmark:
        raise Refused("%s without --benchmark: its training run is not mapped (its LAMB applies "
                      "the trust ratio to every tensor and never clips; under ipex.optimize the "
                      "learning rate never changes; the last shard is never read); MLPerf's own "
                      "training line is `bertbench pretrain` (docs/compatibility.md)" % SCRIPT)
    if not s.do_train:
        raise Refused("--do_train: expected (%s raises ValueError without it)" % SCRIPT)
    for flag, why in [("fp16", "fp16 autocast"), ("bf32", "IPEX's BF32 math mode for fp32 GEMMs"),
                      ("fp8", "FP8 autocast")]:
        if getattr(s, flag):
            raise Refused("--%s: %s is not one of bertbench's precisions (fp32, --bf16)" % (flag,
                                                                                        why))
    if s.gradient_accumulation_steps != 1:
        raise Refused("--gradient_accumulation_steps=%d: the script steps its optimizer at "
                      "micro-batch %% K == 0 within each shard, not every K micro-batches; "
                      "bertbench maps K = 1 (bertbench pretrain --steps_per_update=K "
                      "accumulates)" % s.gradient_accumulation_steps)
    if s.train_batch_size < 1:
        raise Refused("--train_batch_size=%d: expected >= 1" % s.train_batch_size)
    if not s.max_steps > 0:
        raise Refused("--max_steps=%g: the script trains nothing (`while global_step < max_steps`) "
                      "and prints no Throughput line" % s.max_steps)
    # its eval schedule, made before training whether or not --eval_dir is given
    start, stop, step = s.eval_iter_start_samples, s.max_samples_termination, s.eval_iter_samples
    if step <= 0 or start >= stop:
        raise Refused("--eval_iter_samples=%d: %s's eval schedule np.arange(%d, %g, %d) is empty "
                      "(or a division by zero) and it fails before training" % (
                          step, SCRIPT, start, stop, step))
    if s.eval_dir and math.ceil(start / s.train_batch_size) <= LAST:
        raise Refused("--eval_iter_start_samples=%d: its first evaluation falls within the "
                      "benchmark's %d micro-batches; bertbench's benchmark runs none (give a "
                      "later start)" % (start, LAST))


def build(words, instances, stamp):
    """The plan (support.Plan) for the script's words on the launcher's instances."""
    s = parse_script(words)
    check_line(s)
    if len(instances) != 1:
        raise Refused("%d instances: one process is mapped here (Intel's pretraining quickstarts "
                      "run one; bertbench's data parallel is `mpirun -np N bertbench pretrain`, "
                      "docs/distributed.md)" % len(instances))
    plan = support.Plan(os.path.join(s.output_dir, "bertbench-" + stamp))
    cmd = ["pretrain"] + data_flags(s) + support.hf_model_flags(s, plan.run_dir, plan.notes,
                                                                plan.writes)
    for flag, value in (("--max_steps", s.max_steps), ("--warmup_proportion", s.warmup_proportion),
                        ("--warmup_steps", s.warmup_steps), ("--start_warmup_step", s.start_warmup_step)):
        if not math.isfinite(value) or abs(value) >= 2 ** 62:
            raise Refused("%s=%r: expected a finite number of updates (below 2^62)" % (flag, value))
    updates = math.ceil(s.max_steps)  # `while global_step < max_steps`
    if s.warmup_steps == 0:
        warmup, start = int(s.max_steps * s.warmup_proportion), 0
    else:
        warmup, start = s.warmup_steps, s.start_warmup_step
    if warmup != int(warmup) or start != int(start):
        raise Refused("--warmup_steps=%g --start_warmup_step=%g: expected whole updates" % (
            warmup, start))
    stop = min(LAST, updates)
    cmd += ["--output_dir=" + plan.run_dir, "--train_batch_size=%d" % s.train_batch_size,
            "--num_train_steps=%d" % updates, "--num_warmup_steps=%d" % warmup,
            "--start_warmup_step=%d" % start, "--learning_rate=%r" % s.learning_rate,
            "--optimizer=lamb", "--lamb_beta_1=%r" % s.opt_lamb_beta_1,
            "--lamb_beta_2=%r" % s.opt_lamb_beta_2,
            "--lamb_weight_decay_rate=%r" % s.weight_decay_rate, "--log_epsilon=-8",
            "--stop_steps=%d" % stop, "--warmup_updates_excluded=%d" % (TIMED_FROM - 1),
            "--save_checkpoints_steps=0", "--seed=%d" % s.seed, "--nodo_eval",
            "--dtype=" + ("bf16" if s.bf16 else "fp32")]
    plan.notes.append("differences: bertbench's LAMB is MLPerf's (the trust ratio only on tensors "
                      "with weight decay, the gradient clipped to norm 1; IPEX's Lamb: every "
                      "tensor, no clip; both eps 1e-8 and bias-corrected), its data order and "
                      "initialisation (truncated normal) are its own, and its timing includes "
                      "waiting for the reader (the script's excludes data loading)")
    ignored = [f for f, v in [("--ipex", s.ipex), ("--inductor", s.inductor),
                              ("--dense_seq_output", s.dense_seq_output),
                              ("--max_samples_termination", s.max_samples_termination != 14000000),
                              ("--target_mlm_accuracy", s.target_mlm_accuracy != 0.72),
                              ("--phase2", s.phase2), ("--skip_checkpoint", s.skip_checkpoint),
                              ("--log_freq", s.log_freq != 10000.0),
                              # checkpoints and evaluation: none within the benchmark's micro-batches
                              ("--num_samples_per_checkpoint", s.num_samples_per_checkpoint != 500000),
                              ("--min_samples_to_start_checkpoints", s.min_samples_to_start_checkpoints != 3000000),
                              ("--keep_n_most_recent_checkpoints", s.keep_n_most_recent_checkpoints != 20),
                              ("--eval_batch_size", s.eval_batch_size != 128),
                              ("--num_eval_examples", s.num_eval_examples != 10000),
                              ("--train_mlm_accuracy_window_size", s.train_mlm_accuracy_window_size != 0)]
               if v]
    if ignored:
        plan.notes.append("no effect on the benchmark's %d micro-batches: %s" % (
            LAST, ", ".join(ignored)))
    if stop < LAST:
        plan.notes.append("--max_steps=%g: training stops after update %d, before micro-batch %d, "
                          "so the script prints no Throughput line (nor does this)" % (
                              s.max_steps, stop, LAST))
    inst = instances[0]
    plan.streams = [[cmd + ["--threads=%d" % inst.threads]]]
    plan.finish = lambda i, binary: finish(plan.run_dir, stop)
    return plan


def finish(run_dir, stop):
    """The Throughput line the script prints after micro-batch 51 (40 x batch / the time of
    micro-batches 11..51, from bertbench's rate over the same 41 updates) and the launcher's note
    on it: ([instance log lines], [launcher log lines])."""
    if stop < LAST:
        return [], []
    with open(os.path.join(run_dir, "results.json")) as f:
        r = json.load(f)
    if r.get("updates") != LAST or not r.get("train_sequences_per_second"):
        return [], []
    line = "Throughput: {:.3f} sentence/s".format(
        r["train_sequences_per_second"] * (LAST - TIMED_FROM) / (LAST - TIMED_FROM + 1))
    return [line], ["the script's figure: 40 x batch / the time of micro-batches %d..%d (%d of "
                    "them), from bertbench's %s/results.json" % (TIMED_FROM, LAST,
                                                                  LAST - TIMED_FROM + 1, run_dir)]
