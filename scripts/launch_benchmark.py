#!/usr/bin/env python3
"""Intel Model Zoo's benchmarks/launch_benchmark.py command lines for BERT, run by bertbench.

Intel's guide (benchmarks/language_modeling/tensorflow/bert_large/{training,inference}/*/
Advanced.md) runs BERT-large through its launcher; the same lines run here with only the script's
path changed:

    python3 scripts/launch_benchmark.py --model-name=bert_large --precision=bfloat16 \\
        --mode=training --framework=tensorflow --batch-size=24 --mpi_num_processes=4 \\
        --output-dir $OUTPUT_DIR -- train_option=SQuAD vocab_file=... do_train=True ...

The launcher's flags and its `-- key=value` model args become one bertbench command, printed
before it runs (as Intel's launcher prints the command it runs):
  --mode=training, train_option=SQuAD       [mpirun -np N] bertbench squad --do_train ...
  --mode=training, train_option=Pretraining [mpirun -np N] bertbench pretrain ...
  --mode=inference --accuracy-only          bertbench squad --do_predict (+ the official metric)
  --mode=inference [--benchmark-only]       bertbench bench --task=squad --mode=infer
with Intel's defaults where the line leaves a value out, Intel's MPI conventions (the global
batch is N x --batch-size; the steps divided and the learning rate multiplied by sqrt(N), as its
run_squad.py / run_pretraining.py do under Horovod) and --precision as bertbench's --precision.
What has no bertbench equivalent is refused in one line saying why; what changes nothing on this
machine (Docker, volumes, TF thread pools) is listed once. docs/compatibility.md has the table.

Environment: BERTBENCH (the binary; default <repo>/build/bertbench, else bertbench on PATH),
BERTBENCH_MPIRUN (the mpirun command; default "mpirun", with --allow-run-as-root as root, as
Intel's launcher passes it).
"""
import argparse
import math
import os
import shlex
import shutil
import subprocess
import sys

PROG = "launch_benchmark.py"


class Refused(Exception):
    """A flag or model arg bertbench cannot run as Intel's scripts would: the reason."""


# Intel's -- key=value model args per mode, with the defaults of its model_init.py.
TRAIN_ARGS = {
    "train_option": "SQuAD", "output_dir": None, "config_file": "bert_config.json",
    "do_train": "True", "init_checkpoint": "", "batch_size": None, "learning_rate": "3e-5",
    "max_seq_length": "512", "use_tpu": "False", "precision": None, "do_lower_case": "False",
    "vocab_file": "vocab.txt", "train_file": "train-v1.1.json", "predict_file": "dev-v1.1.json",
    "do_predict": "True", "num_train_epochs": "20", "doc_stride": "128",
    "input_file": "/tmp/tf_examples.tfrecord", "do_eval": "True", "num_train_steps": "20",
    "warmup_steps": "10", "max_predictions": "20", "task_name": "MRPC", "data_dir": "MRPC",
    "accum_steps": "1", "num_inter_threads": None, "num_intra_threads": None, "profile": "False",
    "experimental_gelu": "False", "optimized_softmax": "False",
    "mpi_workers_sync_gradients": "False"}
INFER_ARGS = {
    "infer_option": "SQuAD", "doc_stride": None, "max_seq_length": None, "profile": None,
    "config_file": "bert_config.json", "vocab_file": "vocab.txt", "predict_file": "dev-v1.1.json",
    "init_checkpoint": "model.ckpt-3649", "experimental_gelu": "False",
    "optimized_softmax": "True", "warmup_steps": "10", "steps": "30", "weight_sharing": None}
# TensorFlow/launcher settings without an effect on bertbench (listed once).
NO_EFFECT_ARGS = {"use_tpu", "experimental_gelu", "optimized_softmax", "num_inter_threads",
                  "weight_sharing", "debian_frontend"}


def parse_launcher(argv):
    p = argparse.ArgumentParser(prog=PROG, allow_abbrev=False, add_help=True,
                                description=__doc__.split("\n")[0])
    a = p.add_argument
    a("-f", "--framework", required=True)
    a("-m", "--model-name", dest="model_name", required=True)
    a("-p", "--precision", required=True)
    a("-mo", "--mode", required=True, choices=["training", "inference"])
    a("-b", "--batch-size", dest="batch_size", type=int, default=-1)
    a("--mpi_num_processes", type=int, default=None)
    a("--mpi_num_processes_per_socket", type=int, default=None)
    a("--mpi_hostnames", default=None)
    a("--numa-cores-per-instance", dest="numa_cores_per_instance", default=None)
    a("-d", "--data-location", dest="data_location", default=None)
    a("-i", "--socket-id", dest="socket_id", type=int, default=-1)
    a("-n", "--num-cores", dest="num_cores", type=int, default=-1)
    a("--num-instances", dest="num_instances", type=int, default=1)
    a("-a", "--num-intra-threads", dest="num_intra_threads", type=int, default=None)
    a("-e", "--num-inter-threads", dest="num_inter_threads", default=None)
    a("--num-train-steps", dest="num_train_steps", default=None)
    a("--data-num-intra-threads", dest="data_num_intra_threads", default=None)
    a("--data-num-inter-threads", dest="data_num_inter_threads", default=None)
    a("--weight-sharing", dest="weight_sharing", action="store_true")
    a("--synthetic-data", dest="synthetic_data", action="store_true")
    a("-c", "--checkpoint", default=None)
    a("--backbone-model", dest="backbone_model", default=None)
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
    a("model_args", nargs=argparse.REMAINDER)
    args, unknown = p.parse_known_args(argv)
    if unknown:
        raise Refused("unknown launcher flag(s) %s (launch_benchmark.py has no such flag; model "
                      "args go after ' -- ' as key=value)" % " ".join(unknown))
    return args


def parse_model_args(words, known):
    """Intel's `-- key=value` tail: keys with '-' or '_', any case (the launcher passes them as
    environment variables)."""
    if words and words[0] == "--":
        words = words[1:]
    out = {}
    for w in words:
        if "=" not in w:
            raise Refused("model arg %r: expected the form key=value (as Intel's launcher)" % w)
        key, value = w.split("=", 1)
        key = key.replace("-", "_").lstrip("_").lower()
        if key not in known and key not in NO_EFFECT_ARGS:
            raise Refused("model arg %s=%s: not an arg of Intel's bert_large %s scripts (known: %s)"
                          % (key, value, "training" if "train_option" in known else "inference",
                             ", ".join(sorted(known))))
        out[key] = value
    return out


def precision_of(value):
    if value in ("fp32", "bfloat16"):
        return value
    if value == "fp16":
        raise Refused("--precision=fp16: bertbench has no fp16 on CPUs (hint: --precision=bfloat16, "
                      "which needs no loss scaling)")
    raise Refused("--precision=%s: not run by bertbench (fp32 and bfloat16 are)" % value)


def joined(directory, name, flag):
    """Intel's inference model_init: a relative file name is taken in `directory`."""
    if os.path.isabs(name):
        return name
    if not directory:
        raise Refused("%s is needed for the relative model file %r (Intel's launcher looks for it "
                      "there)" % (flag, name))
    return os.path.join(directory, name)


def mpirun_prefix(args, ranks):
    if ranks <= 1:
        if args.mpi_hostnames:
            raise Refused("--mpi_hostnames without --mpi_num_processes > 1: nothing to place")
        return []
    cmd = shlex.split(os.environ.get("BERTBENCH_MPIRUN", "mpirun"))
    if "BERTBENCH_MPIRUN" not in os.environ and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(ranks)]
    if args.mpi_num_processes_per_socket:
        cmd += ["--map-by", "ppr:%d:socket" % args.mpi_num_processes_per_socket]
    if args.mpi_hostnames:
        cmd += ["-H", args.mpi_hostnames]
    return cmd


def training_command(args, m, ranks, notes):
    option = m["train_option"]
    batch = int(m["batch_size"]) if m.get("batch_size") else (
        args.batch_size if args.batch_size != -1 else 24)
    if batch < 1:
        raise Refused("--batch-size=%d: expected a positive batch" % batch)
    out = m.get("output_dir") or args.output_dir
    if not out:
        raise Refused("--output-dir (or model arg output_dir=) is needed: where bertbench writes "
                      "checkpoints and predictions")
    if int(m["accum_steps"]) > 1:
        raise Refused("model arg accum_steps=%s: not mapped (Intel's run_squad.py exits on it; use "
                      "bertbench pretrain --steps_per_update directly)" % m["accum_steps"])
    lr = float(m["learning_rate"]) * (math.sqrt(ranks) if ranks > 1 else 1.0)
    if ranks > 1:
        notes.append("%d ranks: global batch %d x %d = %d, learning rate x sqrt(%d) = %s (Intel's "
                     "Horovod scaling)" % (ranks, ranks, batch, ranks * batch, ranks, repr(lr)))
        if m["mpi_workers_sync_gradients"].lower() != "true":
            notes.append("the ranks synchronise their gradients (Intel's "
                         "mpi_workers_sync_gradients=True; its default trains them independently)")
    common = ["--bert_config_file=" + m["config_file"], "--output_dir=" + out,
              "--train_batch_size=%d" % (batch * ranks), "--learning_rate=" + repr(lr),
              "--max_seq_length=" + m["max_seq_length"]]
    if option == "SQuAD":
        cmd = ["squad", "--vocab_file=" + m["vocab_file"], "--do_train=" + m["do_train"],
               "--train_file=" + m["train_file"], "--do_predict=" + m["do_predict"],
               "--predict_file=" + m["predict_file"], "--num_train_epochs=" + m["num_train_epochs"],
               "--doc_stride=" + m["doc_stride"], "--do_lower_case=" + m["do_lower_case"]]
        if m["init_checkpoint"]:
            cmd.append("--init_checkpoint=" + m["init_checkpoint"])
        return cmd + common
    if option == "Pretraining":
        steps, warmup = int(m["num_train_steps"]), int(m["warmup_steps"])
        if ranks > 1:
            steps, warmup = steps // ranks, warmup // ranks
            notes.append("steps and warm-up divided by %d ranks (Intel's run_pretraining.py)"
                         % ranks)
        cmd = ["pretrain", "--input_file=" + m["input_file"], "--do_train=" + m["do_train"],
               "--do_eval=" + m["do_eval"], "--max_predictions_per_seq=" + m["max_predictions"],
               "--num_train_steps=%d" % steps, "--num_warmup_steps=%d" % warmup,
               "--optimizer=adamw"]  # Intel's optimization.py: AdamWeightDecayOptimizer
        if m["init_checkpoint"]:
            cmd.append("--init_checkpoint=" + m["init_checkpoint"])
        return cmd + common
    raise Refused("train_option=%s: bertbench has no %s fine-tuning (it runs SQuAD and "
                  "Pretraining)" % (option, option))


def inference_command(args, m, notes):
    if m["infer_option"] != "SQuAD":
        raise Refused("infer_option=%s: bertbench's inference is SQuAD's" % m["infer_option"])
    if args.benchmark_only and args.accuracy_only:
        raise Refused("--benchmark-only and --accuracy-only: expected one of them")
    batch = args.batch_size if args.batch_size != -1 else 32
    config = joined(args.data_location, m["config_file"], "--data-location")
    seq = m["max_seq_length"] or "384"
    if args.accuracy_only:
        out = args.output_dir
        if not out:
            raise Refused("--output-dir is needed: predictions.json is written there")
        cmd = ["squad", "--vocab_file=" + joined(args.data_location, m["vocab_file"],
                                                 "--data-location"),
               "--bert_config_file=" + config,
               "--init_checkpoint=" + joined(args.checkpoint, m["init_checkpoint"], "--checkpoint"),
               "--do_predict=True",
               "--predict_file=" + joined(args.data_location, m["predict_file"], "--data-location"),
               "--predict_batch_size=%d" % batch, "--output_dir=" + out, "--max_seq_length=" + seq]
        if m["doc_stride"]:
            cmd.append("--doc_stride=" + m["doc_stride"])
        notes.append("the official metric (evaluate-v1.1.py's output) is printed when the predict "
                     "file has answers")
        return cmd
    notes.append("throughput of the SQuAD model on full-length batches of seq %s (Intel's "
                 "benchmark mode times the padded features the same size; the weights do not "
                 "change the timing, so --checkpoint is not read)" % seq)
    cmd = ["bench", "--task=squad", "--mode=infer", "--bert_config_file=" + config,
           "--batch_size=%d" % batch, "--seq_len=" + seq, "--warmup=" + m["warmup_steps"],
           "--steps=" + m["steps"]]
    if (m["profile"] or "").lower() == "true":
        cmd.append("--profile")
    if args.output_dir:
        cmd.append("--json=" + os.path.join(args.output_dir, "bench_squad_infer.json"))
    return cmd


def build(argv):
    """(command words, notes, output dir to create) for Intel's command line `argv`."""
    args = parse_launcher(argv)
    notes = []
    if args.framework != "tensorflow":
        raise Refused("--framework=%s: bertbench runs the TensorFlow BERT workload's lines "
                      "(--framework=tensorflow)" % args.framework)
    if not args.model_name.startswith("bert"):
        raise Refused("--model-name=%s: bertbench runs BERT (bert_large)" % args.model_name)
    refuse = [("numa_cores_per_instance", "--numa-cores-per-instance", "multi-instance runs are "
               "not mapped (run bertbench once per instance, or mpirun for data parallel)"),
              ("input_graph", "--in-graph", "a frozen TensorFlow graph: bertbench runs checkpoints "
               "(--checkpoint)"),
              ("backbone_model", "--backbone-model", "not a BERT setting"),
              ("tf_serving_version", "--tf-serving-version", "no TensorFlow Serving here"),
              ("gpu", "--gpu", "this launcher maps Intel's CPU lines (bertbench --device=cuda: "
               "docs/gpu.md)")]
    for dest, flag, why in refuse:
        if getattr(args, dest):
            raise Refused("%s: %s" % (flag, why))
    if args.num_cores != -1 or args.num_instances != 1:
        raise Refused("--num-cores/--num-instances: multi-instance runs are not mapped (run "
                      "bertbench once per instance)")
    if args.socket_id != -1:
        if not shutil.which("numactl"):
            raise Refused("--socket-id=%d: needs numactl to bind to the socket (apt-get install "
                          "numactl)" % args.socket_id)
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
                              ("--synthetic-data", args.synthetic_data),
                              ("--output-results", args.output_results)] if v]
    known = TRAIN_ARGS if args.mode == "training" else INFER_ARGS
    given = parse_model_args(args.model_args, known)
    m = dict(known)
    m.update(given)
    ignored += ["%s=%s" % (k, v) for k, v in given.items()
                if k in NO_EFFECT_ARGS or (args.mode == "training" and k == "profile")]
    if given.get("num_intra_threads") and not args.num_intra_threads:
        args.num_intra_threads = int(given["num_intra_threads"])
    precision = precision_of(m.get("precision") or args.precision)
    ranks = args.mpi_num_processes or 1
    if ranks < 1:
        raise Refused("--mpi_num_processes=%d: expected >= 1" % ranks)
    if args.mode == "training":
        if args.num_train_steps is not None:
            m["num_train_steps"] = args.num_train_steps
        cmd = training_command(args, m, ranks, notes)
    else:
        if ranks > 1:
            raise Refused("--mpi_num_processes with --mode=inference: bertbench predicts in one "
                          "process")
        if args.num_train_steps is not None:
            raise Refused("--num-train-steps with --mode=inference: a training flag")
        cmd = inference_command(args, m, notes)
    cmd.append("--precision=" + precision)
    if args.num_intra_threads:
        cmd.append("--threads=%d" % args.num_intra_threads)
    if ignored:
        notes.append("accepted, no effect here (no container, no TensorFlow thread pools): "
                     + ", ".join(ignored))
    prefix = mpirun_prefix(args, ranks)
    if args.socket_id != -1:
        prefix += ["numactl", "--cpunodebind=%d" % args.socket_id, "--membind=%d" % args.socket_id]
    return prefix, cmd, notes, args


def bertbench_binary():
    if os.environ.get("BERTBENCH"):
        return os.environ["BERTBENCH"]
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build",
                        "bertbench")
    return here if os.access(here, os.X_OK) else "bertbench"


def main(argv):
    try:
        prefix, cmd, notes, args = build(argv)
    except Refused as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    words = prefix + [bertbench_binary()] + cmd
    for n in notes:
        print("%s: %s" % (PROG, n), flush=True)
    print("%s: running: %s" % (PROG, " ".join(shlex.quote(w) for w in words)), flush=True)
    if args.dry_run:
        return 0
    # bench --json writes into --output-dir, which Intel's launcher creates; a failed run leaves
    # no empty directory behind.
    made = args.output_dir and cmd[0] == "bench" and not os.path.exists(args.output_dir)
    if made:
        os.makedirs(args.output_dir)
    status = subprocess.call(words)
    if made and status != 0 and not os.listdir(args.output_dir):
        os.rmdir(args.output_dir)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
