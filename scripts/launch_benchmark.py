#!/usr/bin/env python3
"""Intel Model Zoo's benchmarks/launch_benchmark.py command lines for BERT, run by bertbench.

Intel's guide (benchmarks/language_modeling/tensorflow/bert_large/{training,inference}/*/
Advanced.md) and its quickstart scripts run BERT-large through its launcher; the same lines run
here with only the script's path changed:

    python3 scripts/launch_benchmark.py --model-name=bert_large --precision=bfloat16 \\
        --mode=training --framework=tensorflow --batch-size=24 --mpi_num_processes=4 \\
        --output-dir $OUTPUT_DIR -- train_option=SQuAD vocab_file=... do_train=True ...

The launcher's flags and its `key=value` model args (after ' -- ', or any flag the launcher does not
know, as Intel's passes those on) become one bertbench command, printed before it runs (as Intel's
launcher prints the command it runs):
  --mode=training, train_option=SQuAD       bertbench squad --do_train ...
  --mode=training, train_option=Pretraining bertbench pretrain ...
  --mode=inference --accuracy-only          bertbench squad --do_predict (+ the official metric)
  --mode=inference [--benchmark-only]       bertbench bench --task=squad --mode=infer
  ... --numa-cores-per-instance N|socket     one bench per instance, Intel's CPU groups and logs
                                            (scripts/intel_instances.py)
with Intel's defaults and precedence, Intel's thread rules (base_model_init.py) as --threads, and
under --mpi_num_processes=N Intel's placement: `mpirun --map-by socket -np 1 numactl -N 0 -m 0
bertbench ... : -np 1 numactl -N 1 -m 1 bertbench ...` (the global batch N x --batch-size, the steps
divided and the learning rate multiplied by sqrt(N), as its scripts do under Horovod). After the run
it prints the lines Intel's scripts print and its quickstarts grep (`INFO:tensorflow:examples/sec:
X`, `Throughput is X samples/sec`, `Total throughput (examples/sec): X`, `Throughput: X`), computed
from bertbench's measurements. What bertbench does differently is said in one start-up line; what
it cannot run is refused in one line saying why; what changes nothing here (Docker, volumes, TF
inter-op pools) is listed once. docs/compatibility.md has the table.

Environment: BERTBENCH (the binary; default <repo>/build/bertbench, else bertbench on PATH),
BERTBENCH_MPIRUN (the mpirun command; default "mpirun", with --allow-run-as-root as root, as
Intel's launcher passes it), BERTBENCH_CPU_TOPOLOGY=SxCxT (plan for another machine: S sockets of
C cores of T threads; for --dry-run and tests).
"""
import json
import math
import os
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import intel_instances  # noqa: E402
import intel_launch_support as support  # noqa: E402

PROG = "launch_benchmark.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Intel's default --output-dir is benchmarks/common/tensorflow/logs in its checkout; ours is in this
# one, under runs/ (git-ignored, where the demo writes too).
DEFAULT_OUTPUT_DIR = os.path.join(REPO, "runs", "launch_benchmark")


Refused = support.Refused


# The model args start.sh's bert_options() passes on, with the defaults of the mode's model_init.py
# (None: left out, the script's own default). num_train_steps: the launcher's --num-train-steps.
TRAIN_ARGS = {
    "train_option": "SQuAD", "config_file": "bert_config.json", "do_train": "True",
    "init_checkpoint": "", "learning_rate": "3e-5", "max_seq_length": "512",
    "do_lower_case": "False", "vocab_file": "vocab.txt", "train_file": "train-v1.1.json",
    "predict_file": "dev-v1.1.json", "do_predict": "True", "num_train_epochs": "20",
    "doc_stride": "128", "input_file": "/tmp/tf_examples.tfrecord", "do_eval": "True",
    "num_train_steps": None, "warmup_steps": "10", "max_predictions": "20", "task_name": "MRPC",
    "data_dir": "MRPC", "accum_steps": "1", "profile": "False", "experimental_gelu": "False",
    "optimized_softmax": "False", "mpi_workers_sync_gradients": "False"}
INFER_ARGS = {
    "infer_option": "SQuAD", "doc_stride": None, "max_seq_length": None, "profile": None,
    "config_file": "bert_config.json", "vocab_file": "vocab.txt", "predict_file": "dev-v1.1.json",
    "init_checkpoint": "model.ckpt-3649", "experimental_gelu": "False",
    "optimized_softmax": "True", "warmup_steps": "10", "steps": "30"}
# start.sh passes these on in either mode; the other mode's model_init.py exits on them.
PASSED_ON = (set(TRAIN_ARGS) | set(INFER_ARGS)) - {"train_option", "infer_option"}
# Model args that set the launcher's own environment variables (start.sh reads them).
LAUNCHER_VARS = {"precision", "num_intra_threads"}
# Known args that change nothing in bertbench (TF op choices, the TF profiler hook in training).
NO_EFFECT = {"experimental_gelu", "optimized_softmax"}
# Model args that overwrite the launcher's own settings of the same name (its environment), read
# here only as the flags: the flag for each.
SETTINGS = {k: "--" + k for k in ("framework", "mode", "gpu", "mpi_hostnames", "mpi_num_processes",
                                  "mpi_num_processes_per_socket")}
SETTINGS.update({k: "--" + k.replace("_", "-") for k in (
    "accuracy_only", "benchmark_only", "model_name", "numa_cores_per_instance", "num_cores",
    "socket_id", "output_results", "in_graph")})
SETTINGS.update({"checkpoint_directory": "--checkpoint", "dataset_location": "--data-location"})


def parse_launcher(argv):
    # Abbreviations resolve as in Intel's ArgumentParser (argparse's default: a unique prefix,
    # `--batch=4` is --batch-size; an ambiguous one is refused as there).
    p = support.ArgumentParser(prog=PROG, add_help=True,
                                description=__doc__.split("\n")[0])
    a = p.add_argument
    a("-f", "--framework", required=True)
    a("-m", "--model-name", dest="model_name", required=True)
    a("-p", "--precision", required=True)
    a("-mo", "--mode", required=True, choices=["training", "inference"])
    a("-b", "--batch-size", dest="batch_size", type=int, default=-1)
    a("--mpi_num_processes", type=int, default=None)
    a("--mpi_num_processes_per_socket", type=int, default=1)
    a("--mpi_hostnames", default=None)
    a("--numa-cores-per-instance", dest="numa_cores_per_instance", default=None)
    a("-d", "--data-location", dest="data_location", default=None)
    a("-i", "--socket-id", dest="socket_id", type=int, default=-1)
    a("-n", "--num-cores", dest="num_cores", type=int, default=-1)
    a("--num-instances", dest="num_instances", type=int, default=1)
    a("-a", "--num-intra-threads", dest="num_intra_threads", type=int, default=None)
    a("-e", "--num-inter-threads", dest="num_inter_threads", default=None)
    a("-ts", "--num-train-steps", dest="num_train_steps", type=int, default=None)  # the launcher's 1
    a("--data-num-intra-threads", dest="data_num_intra_threads", default=None)
    a("--data-num-inter-threads", dest="data_num_inter_threads", default=None)
    a("--weight-sharing", dest="weight_sharing", action="store_true")
    a("--synthetic-data", dest="synthetic_data", action="store_true")
    a("-c", "--checkpoint", default=None)
    a("-bb", "--backbone-model", dest="backbone_model", default=None)
    a("-g", "--in-graph", dest="input_graph", default=None)
    a("-k", "--benchmark-only", dest="benchmark_only", action="store_true")
    a("--accuracy-only", dest="accuracy_only", action="store_true")
    a("--output-results", dest="output_results", action="store_true")
    a("--optimized-softmax", dest="optimized_softmax", default=None)
    a("--experimental-gelu", dest="experimental_gelu", default=None)
    a("--disable-tcmalloc", dest="disable_tcmalloc", default=None)
    a("--tcmalloc-large-alloc-report-threshold", dest="tcmalloc_threshold", default=None)
    a("-v", "--verbose", action="store_true")
    a("--output-dir", dest="output_dir", default=None)
    a("--tf-serving-version", dest="tf_serving_version", default=None)
    a("--gpu", action="store_true")
    a("--onednn-graph", dest="onednn_graph", default=None)
    a("-r", "--model-source-dir", dest="model_source_dir", default=None)
    a("--docker-image", dest="docker_image", default=None)
    a("--volume", dest="volumes", action="append", default=[])
    a("--shm-size", dest="shm_size", default=None)
    a("--debug", action="store_true")
    a("--noinstall", action="store_true")
    a("--dry-run", dest="dry_run", action="store_true")
    a("model_args", nargs="*")
    # Intel's launcher passes the flags it does not know on as model args (launch_benchmark.py:260).
    return p.parse_known_args(argv)


# The model args this script converts to numbers, and how.
NUMERIC_ARGS = {"accum_steps": int, "learning_rate": float, "save_checkpoints_steps": int,
                "num_train_steps": int, "warmup_steps": int}


def parse_model_args(words, mode):
    """Intel's launcher turns each `key=value` into the environment variable KEY (dashes to
    underscores, leading ones dropped, any case); start.sh passes the ones it knows on to the
    mode's model_init.py, which exits on those it does not take. The rest changes nothing there."""
    out = {}
    for w in words:
        if "=" not in w:
            raise Refused("Expected model args in the format `name=value` but received: %s "
                          "(Intel's launcher raises this ValueError)" % w)
        key, value = w.split("=", 1)
        out[key.replace("-", "_").lstrip("_").lower()] = value
    known = TRAIN_ARGS if mode == "training" else INFER_ARGS
    for key, value in out.items():
        if key in SETTINGS:
            raise Refused("model arg %s=%s: it overwrites Intel's launcher setting %s (its %s); "
                          "this script reads that only as %s" % (key, value, key.upper(),
                                                                 SETTINGS[key], SETTINGS[key]))
        if key in PASSED_ON and key not in known:
            raise Refused("model arg %s=%s: Intel's start.sh passes it on as --%s and its "
                          "bert_large %s model_init.py exits on it (unrecognized arguments)"
                          % (key, value, key.replace("_", "-"), mode))
    for key, kind in NUMERIC_ARGS.items():
        if key in out:
            try:
                kind(out[key])
            except ValueError:
                raise Refused("model arg %s=%s: expected %s (Intel's argparse type), got %r"
                              % (key, out[key], "an integer" if kind is int else "a number",
                                 out[key])) from None
    return out


def precision_of(value, mode):
    if value in ("fp32", "bfloat16") or (value == "int8" and mode == "inference"):
        return value
    if value == "fp16":
        raise Refused("--precision=fp16: bertbench has no fp16 on CPUs (hint: "
                      "--precision=bfloat16, which needs no loss scaling)")
    if value == "int8":
        raise Refused("--precision=int8 with --mode=training: Intel has no bert_large int8 "
                      "training (bertbench's int8 is for inference)")
    raise Refused("--precision=%s: not run by bertbench (fp32, bfloat16 and, for inference, int8 "
                  "are)" % value)


def joined(directory, name, flag):
    """Intel's inference model_init: a relative file name is taken in `directory`."""
    if os.path.isabs(name):
        return name
    if not directory:
        raise Refused("%s is needed for the relative model file %r (Intel's launcher looks for it "
                      "there)" % (flag, name))
    return os.path.join(directory, name)


def training_command(m, given, ranks, batch, out, notes):
    option = m["train_option"]
    accum = int(m["accum_steps"])
    if accum < 1:
        raise Refused("model arg accum_steps=%d: expected >= 1 (micro-batches per update)" % accum)
    lr = float(m["learning_rate"]) * (math.sqrt(ranks) if ranks > 1 else 1.0)
    if ranks > 1:
        notes.append("%d ranks: global batch %d x %d = %d, learning rate x sqrt(%d) = %s (Intel's "
                     "Horovod scaling)" % (ranks, ranks, batch, ranks * batch, ranks, repr(lr)))
    common = ["--bert_config_file=" + m["config_file"], "--output_dir=" + out,
              "--train_batch_size=%d" % (batch * ranks), "--learning_rate=" + repr(lr),
              "--max_seq_length=" + m["max_seq_length"]]
    if m["init_checkpoint"]:
        common.insert(0, "--init_checkpoint=" + m["init_checkpoint"])
    save = given.get("save_checkpoints_steps")
    if save is not None and int(save) != 1000:
        notes.append("save_checkpoints_steps=%s: Intel's start.sh does not pass it on (its scripts "
                     "keep their 1000); bertbench checkpoints as it asks" % save)
    if option == "SQuAD":
        if accum > 1:
            raise Refused("model arg accum_steps=%d: Intel's run_squad.py trains nothing with it "
                          "(it logs 'Accum steps not yet supported in SQuAD' and exits)" % accum)
        cmd = ["squad", "--vocab_file=" + m["vocab_file"], "--do_train=" + m["do_train"],
               "--train_file=" + m["train_file"], "--do_predict=" + m["do_predict"],
               "--predict_file=" + m["predict_file"], "--num_train_epochs=" + m["num_train_epochs"],
               "--doc_stride=" + m["doc_stride"], "--do_lower_case=" + m["do_lower_case"]]
        if ranks > 1:
            # Intel's sync (Horovod's DistributedOptimizer) averages, then clips the average.
            cmd.append("--clip_by_global_norm_after_gradient_allreduce=true")
            if m["mpi_workers_sync_gradients"].lower() != "true":
                notes.append("the ranks average their gradients every step, as Intel's "
                             "run_squad.py with mpi_workers_sync_gradients=True; without it (its "
                             "default) each rank trains its own copy, which bertbench does not do")
        if save is not None:
            cmd.append("--save_checkpoints_steps=" + save)
        return cmd + common
    if option == "Pretraining":
        steps, warmup = int(m["num_train_steps"]), int(m["warmup_steps"])
        if ranks > 1:
            steps, warmup = steps // ranks, warmup // ranks
            notes.append("steps and warm-up divided by %d ranks; the gradients averaged %s, as "
                         "Intel's run_pretraining.py does whatever mpi_workers_sync_gradients"
                         % (ranks, "then clipped every step (Horovod's DistributedOptimizer)"
                            if accum == 1 else "once per update, after accumulation"))
        if steps < 1:
            raise Refused("num_train_steps=%s // %d ranks = 0: Intel's run_pretraining.py then "
                          "calls estimator.train(max_steps=0), which TensorFlow refuses (hint: "
                          "--num-train-steps=N, N >= ranks)" % (m["num_train_steps"], ranks))
        cmd = ["pretrain", "--input_file=" + m["input_file"], "--do_train=" + m["do_train"],
               "--do_eval=" + m["do_eval"], "--max_predictions_per_seq=" + m["max_predictions"],
               "--num_train_steps=%d" % (steps * accum), "--num_warmup_steps=%d" % (warmup * accum),
               "--optimizer=adamw"]  # Intel's optimization.py: AdamWeightDecayOptimizer
        if accum > 1:
            cmd.append("--steps_per_update=%d" % accum)
            notes.append("accum_steps=%d: %d micro-batches of %d per update and rank; Intel's "
                         "step counts are updates, bertbench's micro-steps (x %d); Intel clips "
                         "each micro-batch's gradient of loss/%d by norm 1, bertbench each "
                         "micro-batch's own gradient, then divides by %d (the same below norm 1)"
                         % (accum, accum, batch, accum, accum, accum))
        elif ranks > 1:
            cmd.append("--clip_by_global_norm_after_gradient_allreduce=true")
        if save is not None or accum > 1:
            cmd.append("--save_checkpoints_steps=%d" % (int(save or 1000) * accum))
        return cmd + common
    raise Refused("train_option=%s: bertbench has no %s fine-tuning (it runs SQuAD and "
                  "Pretraining)" % (option, option))


def inference_command(args, m, batch, out, precision, notes):
    if m["infer_option"] != "SQuAD":
        raise Refused("infer_option=%s: bertbench's inference is SQuAD's" % m["infer_option"])
    graph = args.input_graph
    if graph and not os.path.isfile(graph):
        raise Refused("--in-graph %s: not a file (Intel's launcher checks it)" % graph)
    if not graph and precision in ("fp32", "int8"):
        notes.append("Intel's %s inference exits without --in-graph (its model_init.py: "
                     "\"requires a frozen graph\"); bertbench needs none" % precision)
    if precision == "int8":
        notes.append("--precision=int8: bertbench's own int8 (the fp32 weights quantized per "
                     "channel, activations per token; docs/engine.md), not Intel's calibrated int8 "
                     "graph: accuracy and speed are bertbench's int8")
    config = joined(args.data_location, m["config_file"], "--data-location")
    seq = m["max_seq_length"] or "384"
    if args.accuracy_only and not args.benchmark_only:
        ckpt = joined(args.checkpoint, m["init_checkpoint"], "--checkpoint")
        if graph:
            notes.append("--in-graph %s: a frozen TensorFlow graph, which bertbench cannot read; "
                         "it predicts with the checkpoint's weights, %s" % (graph, ckpt))
        cmd = ["squad", "--vocab_file=" + joined(args.data_location, m["vocab_file"],
                                                 "--data-location"),
               "--bert_config_file=" + config, "--init_checkpoint=" + ckpt, "--do_predict=True",
               "--predict_file=" + joined(args.data_location, m["predict_file"], "--data-location"),
               "--predict_batch_size=%d" % batch, "--output_dir=" + out, "--max_seq_length=" + seq]
        if m["doc_stride"]:
            cmd.append("--doc_stride=" + m["doc_stride"])
        notes.append("the official metric (evaluate-v1.1.py's output) is printed when the predict "
                     "file has answers")
        return cmd
    if args.accuracy_only:
        notes.append("--benchmark-only with --accuracy-only: Intel's run_squad.py gets "
                     "--mode=accuracy --mode=benchmark and the last wins; so the benchmark runs")
    notes.append("throughput of the SQuAD model on full-length batches of seq %s (Intel's "
                 "benchmark mode times the padded features the same size; the weights do not "
                 "change the timing, so %s)"
                 % (seq, "neither --checkpoint nor --in-graph, a frozen TensorFlow graph, is read"
                    if graph else "--checkpoint is not read"))
    cmd = ["bench", "--task=squad", "--mode=infer", "--bert_config_file=" + config,
           "--batch_size=%d" % batch, "--seq_len=" + seq, "--warmup=" + m["warmup_steps"],
           "--steps=" + m["steps"], "--noceiling"]  # Intel's benchmark reports no MFU
    if (m["profile"] or "").lower() == "true":
        cmd.append("--profile")
    return cmd + ["--json=" + os.path.join(out, "bench_squad_infer.json")]


def intel_threads(args, given, machine, mpi):
    """Intel's base_model_init.set_num_inter_intra_threads: (intra-op threads, why)."""
    if given:
        return int(given), "--num-intra-threads=%s" % given
    if args.num_cores != -1:
        return args.num_cores, "--num-cores=%d" % args.num_cores
    if args.socket_id != -1:
        return machine.cores_per_socket, "Intel's default on one socket: its %d cores" % (
            machine.cores_per_socket)
    if mpi:
        return machine.cores_per_socket - 2, ("Intel's default per MPI rank: cores per socket "
                                              "%d - 2" % machine.cores_per_socket)
    total = machine.cores_per_socket * machine.socket_count
    return total, "Intel's default: every core (%d)" % total


def fit_threads(want, why, cpus):
    """(threads, clause or None): at most one thread per CPU the process may use (bertbench refuses
    more); Intel's 0 or less is TensorFlow's "choose", every CPU the process may use."""
    if want < 1:
        return len(cpus), "%s gives %d, TensorFlow's default: every CPU it may use (%d)" % (
            why, want, len(cpus))
    if want > len(cpus):
        return len(cpus), "%s: only %d CPU(s) here, one thread each" % (why, len(cpus))
    return want, None


def binder(notes):
    if shutil.which("numactl"):
        return "numactl"
    if shutil.which("taskset"):
        notes.append("numactl not found: taskset binds the CPUs, memory is not bound (hint: "
                     "apt-get install numactl)")
        return "taskset"
    raise Refused("binding to CPUs as Intel's launcher does needs numactl (apt-get install "
                  "numactl)")


def mpirun_base():
    cmd = shlex.split(os.environ.get("BERTBENCH_MPIRUN", "mpirun"))
    if "BERTBENCH_MPIRUN" not in os.environ and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def check_cores(args, machine):
    """Intel's base_benchmark_util._validate_args on --socket-id and --num-cores."""
    nodes = len(machine.nodes())
    if not -1 <= args.socket_id < nodes:
        raise Refused("Socket id must be within NUMA number range: [0, %d]. (Intel's launcher "
                      "raises this ValueError)" % (nodes - 1))
    system = machine.cores_per_socket * (1 if args.socket_id != -1 else machine.socket_count)
    if args.num_cores != -1 and not 0 < args.num_cores <= system:
        raise Refused("--num-cores=%d: %s (Intel's launcher raises this ValueError)" % (
            args.num_cores, "Number of cores exceeds system core number: %d" % system
            if args.num_cores > 0 else "Core number must be greater than 0 or -1"))


def one_process(args, machine, want, why, notes):
    """(binding words, threads) of a run without MPI: Intel's get_command_prefix()."""
    prefix, cpus = [], machine.available()
    if args.socket_id != -1:
        cores = machine.node_cores(args.socket_id)
        if args.num_cores != -1:
            cores = cores[:args.num_cores]  # Intel's numactl -C: the first N cores, HT siblings
        cpus = sorted(c for core in cores for c in core)
        if not cpus:
            raise Refused("--socket-id=%d: none of NUMA node %d's CPUs is available to this "
                          "process" % (args.socket_id, args.socket_id))
        if binder(notes) == "taskset":
            prefix = ["taskset", "-c", support.cpulist(cpus)]
        elif args.num_cores != -1:
            prefix = ["numactl", "-C", support.cpulist(cpus), "--membind=%d" % args.socket_id]
        else:
            prefix = ["numactl", "--cpunodebind=%d" % args.socket_id,
                      "--membind=%d" % args.socket_id]
    threads, clause = fit_threads(want, why, cpus)
    if clause:
        notes.append("--threads=%d: %s" % (threads, clause))
    return prefix, threads


def mpi_ranks(args, machine, want, why, binary, cmd, notes):
    """The words of Intel's bert_large training under --mpi_num_processes (its model_init.py)."""
    ranks, nodes = args.mpi_num_processes, machine.nodes()
    if args.mpi_hostnames:
        local = [c for core in machine.node_cores(nodes[0]) for c in core]
        threads, clause = fit_threads(want, why, local)
        notes.append("--mpi_hostnames: mpirun places the ranks on those hosts, one per socket, "
                     "--threads=%d each (this host's figure%s); Intel's bert_large training "
                     "ignores the hosts and runs every rank here"
                     % (threads, ": " + clause if clause else ""))
        return (mpirun_base() + ["--map-by", "socket", "-np", str(ranks), "-H", args.mpi_hostnames,
                                 binary] + cmd + ["--threads=%d" % threads])
    try:
        placed = support.rank_placement(machine, ranks, binder(notes))
    except ValueError as e:
        raise Refused("--mpi_num_processes=%d: %s" % (ranks, e))
    fitted = [fit_threads(want, why, cpus) for _, cpus in placed]
    where = ("rank i on NUMA node i (Intel's numactl -N i -m i)" if ranks <= len(nodes) else
             "%d NUMA node(s) for %d ranks (Intel's numactl -N i fails from i = %d): rank i on "
             "node i mod %d, which it shares with the node's other ranks, split by cores"
             % (len(nodes), ranks, len(nodes), len(nodes)))
    counts = sorted({t for t, _ in fitted})
    notes.append("placement: %s; --threads=%s (%s)" % (
        where, ",".join(str(t) for t, _ in fitted) if len(counts) > 1 else counts[0],
        "; ".join(sorted({c for _, c in fitted if c})) or why))
    if ranks == 1:  # Intel: mpirun -np 1 numactl -N 0 -m 0 ...; one process needs no mpirun
        return placed[0][0] + [binary] + cmd + ["--threads=%d" % fitted[0][0]]
    words = mpirun_base()
    if args.mpi_num_processes_per_socket == 1:
        words += ["--map-by", "socket"]  # Intel's; with more per socket it passes no mapping
    for i, ((bind, _), (threads, _)) in enumerate(zip(placed, fitted)):
        words += ([":"] if i else []) + ["-np", "1"] + bind + [binary] + cmd + [
            "--threads=%d" % threads]
    return words


def launch(args, given_threads, binary, cmd, notes):
    """The command words: bertbench `cmd` with Intel's --threads, binding and mpirun."""
    machine = support.Machine()
    check_cores(args, machine)
    want, why = intel_threads(args, given_threads, machine, args.mpi_num_processes is not None)
    if args.mpi_num_processes is not None:
        return mpi_ranks(args, machine, want, why, binary, cmd, notes)
    prefix, threads = one_process(args, machine, want, why, notes)
    return prefix + [binary] + cmd + ["--threads=%d" % threads]


def build(argv):
    """(command words, notes, args, what to read after the run) for Intel's line `argv`."""
    args, extra = parse_launcher(argv)
    notes = []
    if args.framework != "tensorflow":
        raise Refused("--framework=%s: bertbench runs the TensorFlow BERT workload's lines "
                      "(--framework=tensorflow)" % args.framework)
    if not args.model_name.startswith("bert"):
        raise Refused("--model-name=%s: bertbench runs BERT (bert_large)" % args.model_name)
    training = args.mode == "training"
    if training and args.numa_cores_per_instance:
        raise Refused("--numa-cores-per-instance: multi-instance runs are not mapped for "
                      "--mode=training (mpirun runs data parallel: --mpi_num_processes)")
    refuse = [("backbone_model", "--backbone-model", "not a BERT setting"),
              ("tf_serving_version", "--tf-serving-version", "no TensorFlow Serving here"),
              ("gpu", "--gpu", "this launcher maps Intel's CPU lines (bertbench --device=cuda: "
               "docs/gpu.md)"),
              ("output_results", "--output-results", "Intel's launcher raises ValueError on it "
               "(\"only supported for resnet50 FP32 or FP16 inference\")")]
    for dest, flag, why in refuse:
        if getattr(args, dest):
            raise Refused("%s: %s" % (flag, why))
    for flag, value in [("--mpi_num_processes", args.mpi_num_processes),
                        ("--mpi_num_processes_per_socket", args.mpi_num_processes_per_socket),
                        ("--num-intra-threads", args.num_intra_threads),
                        ("--num-train-steps", args.num_train_steps)]:
        if value is not None and value < 1:
            raise Refused("%s=%d: expected a positive number (Intel's launcher checks it)"
                          % (flag, value))
    if args.mpi_hostnames and args.mpi_num_processes is None:
        raise Refused("--mpi_hostnames without --mpi_num_processes (Intel's launcher: "
                      "\"MPI_NUM_PROCESSES is required for MPI_HOSTNAMES\")")
    if args.num_instances != 1:
        notes.append("Warning: The --num-instances flag is deprecated and will be removed in the "
                     "future. Please use --numa-cores-per-instance instead. (Intel's warning; it "
                     "runs one instance, as here)")
    for w in extra:  # before the model args: the value after such a flag is read as one of them
        if w.startswith("-") and "=" not in w:
            raise Refused("%s: not a flag of Intel's launcher (it passes unknown flags on as model args, "
                          "which are name=value)" % w)
    given = parse_model_args(args.model_args + extra, args.mode)
    known = TRAIN_ARGS if training else INFER_ARGS
    m = dict(known)
    m.update({k: v for k, v in given.items() if k in known})
    if training and "num_train_steps" not in given:
        # start.sh always passes the launcher's (default 1)
        m["num_train_steps"] = str(args.num_train_steps if args.num_train_steps is not None else 1)
    ignored = [f for f, v in [("--docker-image", args.docker_image), ("--volume", args.volumes),
                              ("--shm-size", args.shm_size), ("--debug", args.debug),
                              ("--noinstall", args.noinstall), ("-r", args.model_source_dir),
                              ("--num-inter-threads", args.num_inter_threads),
                              ("--data-num-intra-threads", args.data_num_intra_threads),
                              ("--data-num-inter-threads", args.data_num_inter_threads),
                              ("--optimized-softmax", args.optimized_softmax),
                              ("--experimental-gelu", args.experimental_gelu),
                              ("--disable-tcmalloc", args.disable_tcmalloc),
                              ("--tcmalloc-large-alloc-report-threshold", args.tcmalloc_threshold),
                              ("--onednn-graph", args.onednn_graph), ("--verbose", args.verbose),
                              ("--weight-sharing", args.weight_sharing),
                              ("--synthetic-data", args.synthetic_data)] if v]
    if training:  # Intel's training scripts take the files its model args name, as they are
        ignored += ["%s=%s (training reads the files the model args name: vocab_file=, train_file=, "
                    "config_file=, init_checkpoint=, input_file=)" % (f, v)
                    for f, v in [("--data-location", args.data_location), ("--checkpoint", args.checkpoint),
                                 ("--in-graph", args.input_graph)] if v]
    if args.num_train_steps is not None and not (training and m["train_option"] == "Pretraining"):
        ignored.append("--num-train-steps=%d (%s)" % (args.num_train_steps, "SQuAD trains num_train_epochs"
                                                       if training else "inference"))
    used = set(known) - NO_EFFECT - ({"profile"} if training else set())
    used |= LAUNCHER_VARS | ({"save_checkpoints_steps"} if training else set())
    for k, v in given.items():
        if k in ("batch_size", "output_dir"):
            ignored.append("%s=%s (Intel's --%s overrides it)" % (k, v, k.replace("_", "-")))
        elif k not in used:
            ignored.append("%s=%s" % (k, v))
    precision = precision_of(given.get("precision") or args.precision, args.mode)
    ranks = args.mpi_num_processes or 1
    instances = not training and args.numa_cores_per_instance
    if instances:
        intel_instances.cores_per_instance(args.numa_cores_per_instance)
        if args.mpi_num_processes is not None:
            raise Refused("--mpi_num_processes cannot be used together with "
                          "--numa-cores-per-instance. (Intel's launcher raises this ValueError)")
    if not training and args.mpi_num_processes is not None:
        raise Refused("--mpi_num_processes with --mode=inference: bertbench predicts in one "
                      "process")
    batch = args.batch_size if args.batch_size != -1 else (24 if training else 32)
    if batch < 1:
        raise Refused("--batch-size=%d: expected a positive batch" % batch)
    out = args.output_dir
    if not out:
        out = DEFAULT_OUTPUT_DIR
        notes.append("no --output-dir: writing to %s (Intel's launcher: benchmarks/common/"
                     "tensorflow/logs in its checkout)" % out)
    if training:
        cmd = training_command(m, given, ranks, batch, out, notes)
        after = {"kind": "train", "dir": out,
                 "every": 1 if m["train_option"] == "Pretraining" else 100,
                 "pretraining": m["train_option"] == "Pretraining",
                 "steps_per_update": int(m["accum_steps"])}
    else:
        cmd = inference_command(args, m, batch, out, precision, notes)
        after = {"kind": None}
        if cmd[0] == "bench":
            after = {"kind": "bench", "json": cmd[-1].split("=", 1)[1],
                     "in_graph": bool(args.input_graph)}
    cmd.append("--precision=" + precision)
    intra = given.get("num_intra_threads") or args.num_intra_threads
    if instances:
        return instance_plan(args, given, cmd, out, batch, intra, notes, ignored)
    words = launch(args, intra, bertbench_binary(), cmd, notes)
    if ignored:
        notes.append("accepted, no effect here (no container, no TensorFlow thread pools): "
                     + ", ".join(ignored))
    return words, notes, args, after


def instance_plan(args, given, cmd, out, batch, intra, notes, ignored):
    """build()'s result for --numa-cores-per-instance (scripts/intel_instances.py)."""
    if cmd[0] != "bench":
        raise Refused("--numa-cores-per-instance with --accuracy-only: Intel's instances each "
                      "predict the whole dev set into <output-dir>/instance_<k>/ and its "
                      "evaluation then finds no predictions.json (it only warns); nothing is "
                      "measured")
    if not args.dry_run:
        intel_instances.refuse_nonempty(out)
    machine = support.Machine()
    check_cores(args, machine)
    want, why = (int(intra), "--num-intra-threads=%s" % intra) if intra else (None, None)
    label = given.get("precision") or args.precision
    runs, combined = intel_instances.plan(args, machine, cmd, out, label, batch, want, why,
                                          fit_threads, bertbench_binary(), notes)
    if ignored:
        notes.append("accepted, no effect here (no container, no TensorFlow thread pools): "
                     + ", ".join(ignored))
    return None, notes, args, {"kind": "instances", "runs": runs, "combined": combined,
                               "in_graph": bool(args.input_graph), "out": out}


def make_output_dir(path):
    """Creates the output directory (as Intel's launcher does); False, said in one line, when it cannot."""
    try:
        os.makedirs(path, exist_ok=True)
        return True
    except OSError as e:
        print("%s: error: --output-dir=%s: cannot create the directory (%s)" % (PROG, path, e.strerror),
              file=sys.stderr)
        return False


def run_instances(after, dry_run):
    """Intel's multi-instance block: the commands, then (unless --dry-run) the run, each
    instance's lines, the log files and the sum the quickstarts' grep | awk prints."""
    print("\nMulti-instance run:", flush=True)
    for words, log, _ in after["runs"]:
        print("%s >> %s 2>&1 & \\" % (" ".join(shlex.quote(w) for w in words), log))
    print("wait", flush=True)
    if dry_run:
        return 0
    if not make_output_dir(after["out"]):
        return 1
    status, figures = intel_instances.run(after["runs"], after["combined"], after["in_graph"],
                                          lambda line: print("%s: %s" % (PROG, line)))
    print("\nThe following log files were saved to the output directory:")
    for _, log, _ in after["runs"]:
        print(os.path.basename(log))
    print("\nA combined log file was saved to the output directory:\n%s\n" %
          os.path.basename(after["combined"]), flush=True)
    if figures:
        print("%s: the instances' Total throughput (examples/sec) summed, as the quickstarts' "
              "grep | awk sums them: %s" % (PROG, "%g" % sum(figures)), flush=True)
    return status


def bertbench_binary():
    if os.environ.get("BERTBENCH"):
        return os.environ["BERTBENCH"]
    here = os.path.join(REPO, "build", "bertbench")
    return here if os.access(here, os.X_OK) else "bertbench"


def intel_lines(after, before):
    """(lines, notes) Intel's scripts print for the finished run, from bertbench's own records."""
    if after["kind"] == "bench":
        point = support.first_bench_point(after["json"])
        return (support.inference_lines(point, after["in_graph"]) if point else []), []
    log = os.path.join(after["dir"], "train_log.jsonl")
    updates = support.new_jsonl(log, before)
    if not updates:
        return [], []
    with open(os.path.join(after["dir"], "results.json")) as f:
        res = json.load(f)
    gb, ranks = res["global_batch_size"], res["number_of_ranks"]
    lines, note = support.examples_per_sec_lines(updates, gb, ranks, after["every"])
    notes = [note] if note else []
    if after["pretraining"]:
        summary, note = support.pretraining_summary_lines(updates, gb, ranks,
                                                          after["steps_per_update"])
        lines += summary
        notes += [note] if note else []
    return lines, notes


def main(argv):
    try:
        words, notes, args, after = build(argv)
    except Refused as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    except ValueError as e:  # int()/float() of a model arg, as Intel's argparse types check them
        print("%s: error: a model arg is not a number: %s" % (PROG, e), file=sys.stderr)
        return 1
    for n in notes:
        print("%s: %s" % (PROG, n), flush=True)
    if after["kind"] == "instances":
        return run_instances(after, args.dry_run)
    print("%s: running: %s" % (PROG, " ".join(shlex.quote(w) for w in words)), flush=True)
    if args.dry_run:
        return 0
    # bench --json writes into the output dir, which Intel's launcher creates; a failed run leaves
    # no empty directory behind.
    bench_dir = os.path.dirname(after["json"]) if after["kind"] == "bench" else None
    made = bench_dir and not os.path.exists(bench_dir)
    if made and not make_output_dir(bench_dir):
        return 1
    log = os.path.join(after["dir"], "train_log.jsonl") if after["kind"] == "train" else None
    before = support.read_text(log) if log else ""
    status = subprocess.call(words)
    if made and status != 0 and not os.listdir(bench_dir):
        os.rmdir(bench_dir)
    if status == 0 and after["kind"]:
        lines, post = intel_lines(after, before)
        if lines:
            print("%s: Intel's log lines, from bertbench's measurements (%s):" % (
                PROG, after.get("json") or log), flush=True)
            print("\n".join(lines), flush=True)
        for n in post:
            print("%s: %s" % (PROG, n), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
