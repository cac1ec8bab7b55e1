#!/usr/bin/env python3
"""Intel's PyTorch BERT-large pretraining benchmark lines, run by bertbench.

Intel's model zoo times CPU BERT-large pretraining with `python -m
intel_extension_for_pytorch.cpu.launch [launcher flags] .../run_pretrain_mlperf.py --benchmark ...`
(quickstart/language_modeling/pytorch/bert_large/training/cpu/run_bert_pretrain_phase{1,2}.sh,
which always pass --benchmark). The same line runs here with the launcher's module replaced by
this script:

    python3 scripts/ipex_launch.py --node_id 0 --enable_jemalloc --log_path=$OUTPUT_DIR \\
        --log_file_prefix=./throughput_log_phase1_fp32 run_pretrain_mlperf.py \\
        --input_dir $DATASET_DIR/2048_shards_uncompressed_128/ --config_name $BERT_MODEL_CONFIG \\
        --benchmark --output_dir $OUTPUT_DIR/model_save --train_batch_size=224 ... --do_train

What the benchmark is (run_pretrain_mlperf.py): micro-batches of --train_batch_size from the HDF5
shards whose names contain "part", LAMB under a linear warm-up/decay schedule; after micro-batch 51
it prints `Throughput: X sentence/s` with X = 40 x batch / (the time of micro-batches 11..51:
forward, backward and update) and exits. Here one `bertbench pretrain` does the same 51 updates
(--stop_steps=51 --warmup_updates_excluded=10) and X is computed the same way from its measured
rate. The launcher's part: the CPU pool (a NUMA node's physical cores, --cores-list, --ncores-per-
instance) as --threads under `numactl -C <cores> -m <nodes>` (taskset without numactl), and its log
files: <log_dir>/<prefix>_<YYYYmmddHHMMSS>_instance_0_cores_<cores>.log with the run's output and
the Throughput line (what the quickstarts grep), <prefix>_<time>_instances.log with the launcher's
own lines. bertbench writes its run (results.json, the final checkpoint) to
<--output_dir>/bertbench-<time>. What differs is said in one line; what it cannot run (training
without --benchmark, DDP, multi-instance, fp16/bf32/fp8, gradient accumulation) is refused in one
line saying why. docs/compatibility.md has the table.

Environment: BERTBENCH (the binary; default <repo>/build/bertbench, else bertbench on PATH),
BERTBENCH_CPU_TOPOLOGY=SxCxT (plan for another machine; for tests).
"""
import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import intel_launch_support as support  # noqa: E402

PROG = "ipex_launch.py"
SCRIPT = "run_pretrain_mlperf.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# run_pretrain_mlperf.py times micro-batches 11..51 and prints 40 x batch / their time
TIMED_FROM, LAST = 11, 51
# transformers' BertConfig() defaults (--model_type bert without a config file): BERT-base.
HF_BERT = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
           "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
           "layer_norm_eps": 1e-12}


class Refused(Exception):
    """A line bertbench cannot run as Intel's would: the reason."""


def parse_launcher(argv):
    """The launcher's flags (IPEX cpu/launch: current and deprecated spellings), the program and
    its words."""
    p = argparse.ArgumentParser(prog=PROG, allow_abbrev=False)
    a = p.add_argument
    a("--nodes-list", "--node_id", dest="nodes", default="")
    a("--cores-list", "--core_list", dest="cores", default="")
    a("--ninstances", type=int, default=0)
    a("--ncores-per-instance", "--ncore_per_instance", dest="ncores", type=int, default=0)
    a("--use-logical-cores", "--use_logical_core", dest="logical", action="store_true")
    a("--log-dir", "--log_path", dest="log_dir", default="")
    a("--log-file-prefix", "--log_file_prefix", dest="log_prefix", default="run")
    # no effect on bertbench's process (its own allocator and threads) or not IPEX-specific
    for flag in ("--enable_jemalloc", "--enable_tcmalloc", "--use_default_allocator",
                 "--disable_iomp", "--disable_numactl", "--disable_taskset", "--use-e-cores",
                 "--skip-cross-node-cores", "--multi_instance", "--bind-numa-node"):
        a(flag, action="store_true")
    for flag in ("--memory-allocator", "--omp-runtime", "--multi-task-manager", "--instance-idx",
                 "--strategy"):
        a(flag, default=None)
    # refused: several processes
    for flag in ("--distributed", "--latency-mode", "--throughput-mode"):
        a(flag, action="store_true")
    a("-m", "--module", dest="module", action="store_true")
    a("--no-python", "--no_python", dest="no_python", action="store_true")
    a("--nprocs-per-node", "--nproc_per_node", dest="nprocs", default=None)
    for names in (("--nnodes",), ("--hostfile",), ("--ccl-worker-count", "--ccl_worker_count"),
                  ("--master-addr", "--master_addr"), ("--master-port", "--master_port"),
                  ("--extra-mpi-params",)):
        a(*names, default=None)
    a("program")
    a("program_args", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def parse_script(words):
    """run_pretrain_mlperf.py's argparse (its flags, types and defaults; abbreviations allowed as
    there)."""
    p = argparse.ArgumentParser(prog=SCRIPT)
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


def cpu_pool(args):
    """(CPUs, NUMA nodes, cores text) of the one instance, as the launcher picks them: the listed
    cores or nodes (all by default), physical cores only unless --use-logical-cores, the first
    --ncores-per-instance of them."""
    machine = support.Machine()
    if args.cores:
        want = set(support.parse_cpulist(args.cores))
        cpus = [c for c in machine.cpus if c[0] in want]
        if len(cpus) != len(want):
            raise Refused("--cores-list=%s: CPUs %s are not available here" % (
                args.cores, support.cpulist(want - {c[0] for c in cpus})))
    else:
        nodes = [int(n) for n in args.nodes.split(",") if n.strip()] or machine.nodes()
        missing = [n for n in nodes if n not in machine.nodes()]
        if missing:
            raise Refused("--nodes-list=%s: NUMA node %s has no CPU available here (nodes: %s)" % (
                args.nodes, missing[0], ",".join(map(str, machine.nodes()))))
        cpus = [c for c in machine.cpus if c[1] in nodes]
    cores = {}
    for cpu, node, socket, core in cpus:
        cores.setdefault((socket, core), []).append((cpu, node))
    pool = []
    for key in sorted(cores, key=lambda k: min(cores[k])):
        pool += sorted(cores[key]) if args.logical else [min(cores[key])]
    if args.ncores > 0:  # the pool cut into instances of that many cores: one is mapped
        count = len(pool) // args.ncores if args.ninstances == 0 else args.ninstances
        if count != 1 or args.ncores > len(pool):
            raise Refused("--ncores-per-instance=%d: %d instance(s) of the pool's %d core(s); "
                          "one instance is mapped here (add --ninstances 1)" % (
                              args.ncores, len(pool) // args.ncores, len(pool)))
        pool = pool[:args.ncores]
    # the launcher's name for the pool: its CPUs in pool order, as a list or as "a-b" ranges
    # (a single CPU too), whichever has fewer items
    ids = [c for c, _ in pool]
    ranges = []
    for c in ids:
        if ranges and c == ranges[-1][1] + 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    text = (",".join(map(str, ids)) if len(ids) <= len(ranges)
            else ",".join("%d-%d" % (a, b) for a, b in ranges))
    return sorted(ids), sorted({n for _, n in pool}), text.replace(",", "_")


def model_flags(s, run_dir, notes, writes):
    """--bert_config_file (and --init_checkpoint) for the script's model flags, read as
    transformers' AutoConfig reads them ("gelu" is the erf form there). A config to write goes to
    `writes`."""
    if s.config_name or (s.model_name_or_path and os.path.isdir(s.model_name_or_path)):
        path = s.config_name or os.path.join(s.model_name_or_path, "config.json")
        try:
            with open(path) as f:
                config = json.load(f)
        except (OSError, ValueError) as e:
            raise Refused("%s: cannot read the model config: %s" % (path, e))
        if not isinstance(config, dict):
            raise Refused("%s: expected a JSON object (a BERT config)" % path)
    elif s.model_name_or_path:
        raise Refused("--model_name_or_path=%s: expected a directory with config.json and "
                      "pytorch_model.bin (save_pretrained's; hub names and TF checkpoints are not "
                      "read here)" % s.model_name_or_path)
    elif s.model_type == "bert":
        path, config = None, dict(HF_BERT)
        notes.append("--model_type bert without a config: transformers' BertConfig() defaults "
                     "(BERT-base)")
    else:
        raise Refused("expected --config_name, --model_name_or_path or --model_type bert (the "
                      "script builds its model from one of them)")
    kind = config.get("model_type", "bert")
    if kind != "bert":
        raise Refused("%s: model_type %s: bertbench runs BERT" % (path, json.dumps(kind)))
    flags = []
    if path and "model_type" in config:
        flags.append("--bert_config_file=" + path)
    else:  # transformers reads it as BERT's (by name): its "gelu" is the erf form
        config["model_type"] = "bert"
        derived = os.path.join(run_dir, "hf_bert_config.json")
        flags.append("--bert_config_file=" + derived)
        notes.append("the model config as transformers reads it (model_type bert: \"gelu\" is "
                     "the erf form): %s" % derived)
        writes[derived] = json.dumps(config, indent=2) + "\n"
    if s.model_name_or_path:
        for name in ("pytorch_model.bin", "model.safetensors"):
            weights = os.path.join(s.model_name_or_path, name)
            if os.path.isfile(weights):
                flags.append("--init_checkpoint=" + weights)
                break
        else:
            raise Refused("--model_name_or_path=%s: no pytorch_model.bin or model.safetensors in "
                          "it" % s.model_name_or_path)
    return flags


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
    # the widths from the data, as the script takes them (its --max_predictions_per_seq only caps
    # rows that have no mask at all)
    return ["--input_file=" + ",".join(os.path.join(s.input_dir, f) for f in names),
            "--max_seq_length=0", "--max_predictions_per_seq=0"]


def check_line(launcher, s):
    """Refusals: what the benchmark mapping does not run, each with its reason."""
    many = [f for f, v in [("--distributed", launcher.distributed), ("--nnodes", launcher.nnodes),
                           ("--nprocs-per-node", launcher.nprocs),
                           ("--hostfile", launcher.hostfile),
                           ("--latency-mode", launcher.latency_mode),
                           ("--throughput-mode", launcher.throughput_mode)] if v]
    if many or launcher.ninstances > 1:
        raise Refused("%s: several processes are not mapped here (Intel's DDP lines run one "
                      "process per rank; bertbench's data parallel is `mpirun -np N bertbench "
                      "pretrain`, docs/distributed.md)" % (many[0] if many else "--ninstances"))
    if launcher.module or launcher.no_python:
        raise Refused("-m / --no-python: expected the path of %s" % SCRIPT)
    if os.path.basename(launcher.program) != SCRIPT:
        raise Refused("%s: bertbench maps Intel's BERT-large pretraining script, %s" % (
            launcher.program, SCRIPT))
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


def build(argv, stamp):
    """(command words, notes, the run's directory, the updates run, the launcher's flags, the
    pool's text, {path: text} to write first) for the launcher line."""
    launcher = parse_launcher(argv)
    s = parse_script(launcher.program_args[1:] if launcher.program_args[:1] == ["--"]
                     else launcher.program_args)
    check_line(launcher, s)
    notes, writes = [], {}
    run_dir = os.path.join(s.output_dir, "bertbench-" + stamp)
    cmd = ["pretrain"] + data_flags(s) + model_flags(s, run_dir, notes, writes)
    updates = math.ceil(s.max_steps)  # `while global_step < max_steps`
    if s.warmup_steps == 0:
        warmup, start = int(s.max_steps * s.warmup_proportion), 0
    else:
        warmup, start = s.warmup_steps, s.start_warmup_step
    if warmup != int(warmup) or start != int(start):
        raise Refused("--warmup_steps=%g --start_warmup_step=%g: expected whole updates" % (
            warmup, start))
    stop = min(LAST, updates)
    cmd += ["--output_dir=" + run_dir, "--train_batch_size=%d" % s.train_batch_size,
            "--num_train_steps=%d" % updates, "--num_warmup_steps=%d" % warmup,
            "--start_warmup_step=%d" % start, "--learning_rate=%r" % s.learning_rate,
            "--optimizer=lamb", "--lamb_beta_1=%r" % s.opt_lamb_beta_1,
            "--lamb_beta_2=%r" % s.opt_lamb_beta_2,
            "--lamb_weight_decay_rate=%r" % s.weight_decay_rate, "--log_epsilon=-8",
            "--stop_steps=%d" % stop, "--warmup_updates_excluded=%d" % (TIMED_FROM - 1),
            "--save_checkpoints_steps=0", "--seed=%d" % s.seed, "--nodo_eval",
            "--dtype=" + ("bf16" if s.bf16 else "fp32")]
    notes.append("differences: bertbench's LAMB is MLPerf's (the trust ratio only on tensors with "
                 "weight decay, the gradient clipped to norm 1; IPEX's Lamb: every tensor, no "
                 "clip; both eps 1e-8 and bias-corrected), its data order and initialisation "
                 "(truncated normal) are its own, and its timing includes waiting for the reader "
                 "(the script's excludes data loading)")
    ignored = [f for f, v in [("--ipex", s.ipex), ("--inductor", s.inductor),
                              ("--dense_seq_output", s.dense_seq_output),
                              ("--enable_jemalloc", launcher.enable_jemalloc),
                              ("--max_samples_termination", s.max_samples_termination != 14000000),
                              ("--target_mlm_accuracy", s.target_mlm_accuracy != 0.72),
                              ("--phase2", s.phase2), ("--skip_checkpoint", s.skip_checkpoint),
                              ("--log_freq", s.log_freq != 10000.0)] if v]
    if ignored:
        notes.append("no effect on the benchmark's %d micro-batches: %s" % (
            LAST, ", ".join(ignored)))
    if stop < LAST:
        notes.append("--max_steps=%g: training stops after update %d, before micro-batch %d, so "
                     "the script prints no Throughput line (nor does this)" % (s.max_steps, stop,
                                                                               LAST))
    cpus, nodes, text = cpu_pool(launcher)
    cmd.append("--threads=%d" % len(cpus))
    if shutil.which("numactl"):
        bind = ["numactl", "-C", support.cpulist(cpus), "-m", ",".join(map(str, nodes))]
    else:
        bind = ["taskset", "-c", support.cpulist(cpus)]
    binary = os.environ.get("BERTBENCH") or os.path.join(REPO, "build", "bertbench")
    if not os.access(binary, os.X_OK):
        binary = "bertbench"
    return bind + [binary] + cmd, notes, run_dir, stop, launcher, text, writes


def intel_throughput(run_dir, stop):
    """The Throughput line the script prints after micro-batch 51: 40 x batch / the time of
    micro-batches 11..51, from bertbench's rate over the same 41 updates."""
    if stop < LAST:
        return None
    with open(os.path.join(run_dir, "results.json")) as f:
        r = json.load(f)
    if r.get("updates") != LAST or not r.get("train_sequences_per_second"):
        return None
    return "Throughput: {:.3f} sentence/s".format(
        r["train_sequences_per_second"] * (LAST - TIMED_FROM) / (LAST - TIMED_FROM + 1))


def main(argv):
    stamp = time.strftime("%Y%m%d%H%M%S")
    try:
        words, notes, run_dir, stop, launcher, cores, writes = build(argv, stamp)
    except Refused as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    os.makedirs(run_dir, exist_ok=True)
    for path, text in writes.items():
        with open(path, "w") as f:
            f.write(text)
    own = inst = None
    if launcher.log_dir:
        log_dir = os.path.dirname(launcher.log_dir + "/")
        os.makedirs(log_dir, exist_ok=True)
        prefix = "%s_%s" % (launcher.log_prefix, stamp)
        own = open(os.path.join(log_dir, prefix + "_instances.log"), "w")
        inst = open(os.path.join(log_dir, "%s_instance_0_cores_%s.log" % (prefix, cores)), "w")

    def say(line, files):
        print(line, flush=True)
        for f in files:
            if f:
                f.write(line + "\n")
                f.flush()

    for n in notes:
        say("%s: %s" % (PROG, n), [own])
    say("%s: running: %s" % (PROG, " ".join(shlex.quote(w) for w in words)), [own])
    try:
        proc = subprocess.Popen(words, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        say("%s: error: %s: cannot run it: %s (hint: BERTBENCH names the binary)" % (
            PROG, words[0], e.strerror), [own])
        proc = None
    for line in proc.stdout if proc else []:
        sys.stdout.write(line)
        sys.stdout.flush()
        if inst:
            inst.write(line)
            inst.flush()
    status = proc.wait() if proc else 1
    if status != 0 and set(os.listdir(run_dir)) <= {os.path.basename(p) for p in writes}:
        for path in writes:  # a run that did not start leaves no directory of ours behind
            os.remove(path)
        os.rmdir(run_dir)
    if status == 0:
        line = intel_throughput(run_dir, stop)
        if line:
            say(line, [inst])
            say("%s: the script's figure: 40 x batch / the time of micro-batches %d..%d (%d of "
                "them), from bertbench's %s/results.json" % (PROG, TIMED_FROM, LAST,
                                                              LAST - TIMED_FROM + 1, run_dir),
                [own])
    for f in (own, inst):
        if f:
            f.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
