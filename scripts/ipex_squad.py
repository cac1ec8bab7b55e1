"""transformers' legacy run_squad.py with Intel's patch (IntelAI/models
models/language_modeling/pytorch/common/enable_ipex_for_transformers.diff over transformers 4.28.1)
as bertbench runs: the script-side half of scripts/ipex_launch.py for Intel's BERT-large SQuAD
inference quickstarts (quickstart/language_modeling/pytorch/bert_large/inference/cpu/).

- --benchmark (run_multi_instance_throughput.sh, run_multi_instance_realtime.sh): the script
  makes the predict file's features, then times `model(**inputs)` over batches of
  --per_gpu_eval_batch_size features in file order: --perf_begin_iter + --perf_run_iters steps,
  the steps after step --perf_begin_iter timed. It prints `P99 Latency {:.2f} ms` (numpy's linear
  99th percentile of the timed steps) and `Throughput: {:.3f} sentence/s` = batch x
  --perf_run_iters / their summed time (it times one step fewer than it counts) and exits. With
  --use_share_weight, --total_cores // --cores_per_instance threads do so at once on one model,
  each printing its own two lines. Here `bertbench squad --features_only` makes the features once,
  then each instance (each thread: one process) runs `bertbench bench --task=squad --mode=infer
  --data=<them>` over the same steps (--warmup: the untimed ones, --steps: the timed ones), and
  the two lines are the script's formulas over bench's step times.
- without --benchmark (run_accuracy.sh): `bertbench squad --do_predict --transformers_squad` with
  the fine-tuned model (save_pretrained's directory), then the line the quickstart greps the F1
  from, `Results: {...}` as run_squad.py logs it (transformers' squad_evaluate: `bertbench
  squad-eval --transformers`), and predictions_.json / nbest_predictions_.json in --output_dir.
"""
import os
import shutil
import subprocess
import time

import intel_launch_support as support
from intel_launch_support import Refused

SCRIPT = "run_squad.py"


def parse_script(words):
    """run_squad.py's argparse (transformers 4.28.1's legacy script and Intel's additions; its
    types, defaults and required flags, abbreviations allowed as there)."""
    p = support.ArgumentParser(prog=SCRIPT)
    a = p.add_argument
    a("--model_type", required=True)
    a("--model_name_or_path", required=True)
    a("--output_dir", required=True)
    for s in ("--data_dir", "--train_file", "--predict_file"):
        a(s, default=None)
    for s in ("--config_name", "--tokenizer_name", "--cache_dir", "--server_ip", "--server_port"):
        a(s, default="")
    a("--fp16_opt_level", default="O1")
    a("--null_score_diff_threshold", type=float, default=0.0)
    a("--max_seq_length", type=int, default=384)
    a("--doc_stride", type=int, default=128)
    a("--max_query_length", type=int, default=64)
    a("--per_gpu_train_batch_size", type=int, default=8)
    a("--per_gpu_eval_batch_size", type=int, default=8)
    a("--learning_rate", type=float, default=5e-5)
    a("--gradient_accumulation_steps", type=int, default=1)
    a("--weight_decay", type=float, default=0.0)
    a("--adam_epsilon", type=float, default=1e-8)
    a("--max_grad_norm", type=float, default=1.0)
    a("--num_train_epochs", type=float, default=3.0)
    a("--max_steps", type=int, default=-1)
    a("--warmup_steps", type=int, default=0)
    a("--n_best_size", type=int, default=20)
    a("--max_answer_length", type=int, default=30)
    a("--lang_id", type=int, default=0)
    a("--logging_steps", type=int, default=500)
    a("--save_steps", type=int, default=500)
    a("--seed", type=int, default=42)
    a("--local_rank", type=int, default=-1)
    a("--threads", type=int, default=1)
    # Intel's patch
    a("--perf_begin_iter", type=int, default=15)
    a("--perf_run_iters", type=int, default=100)
    a("--iter_num", type=int, default=40)
    a("--int8_config", default="config.json")
    a("--fp8_config", default="fp8_state_dict.pt")
    a("--calibration_iters", type=int, default=100)
    a("--cores_per_instance", type=int, default=4)
    a("--total_cores", type=int, default=28)
    a("--num_streams", type=int, default=1)
    a("--instance_number", type=int, default=0)
    for s in ("--version_2_with_negative", "--do_train", "--do_eval", "--evaluate_during_training",
              "--do_lower_case", "--verbose_logging", "--eval_all_checkpoints", "--no_cuda",
              "--overwrite_output_dir", "--overwrite_cache", "--fp16", "--fp16_cpu", "--bf16",
              "--benchmark", "--bf32", "--use_jit", "--int8", "--int8_fp32", "--int8_bf16",
              "--fp8", "--do_calibration", "--use_share_weight", "--use_multi_stream_module",
              "--ipex", "--inductor", "--profile"):
        a(s, action="store_true")
    return p.parse_args(words)


def check_line(s):
    """Refusals: what the mapping does not run, each with its reason."""
    if s.model_type.lower() != "bert":
        raise Refused("--model_type=%s: bertbench runs BERT" % s.model_type)
    if s.do_train:
        raise Refused("--do_train: run_squad.py's fine-tuning is not mapped (Intel's quickstarts "
                      "only evaluate); bertbench's is `bertbench squad --do_train` "
                      "(docs/squad.md)")
    if not s.do_eval:
        raise Refused("--do_eval: expected (without it the script evaluates nothing)")
    for flag, why in [("fp16_cpu", "fp16 autocast"), ("fp16", "apex fp16"),
                      ("bf32", "IPEX's BF32 math mode for fp32 GEMMs"), ("fp8", "FP8")]:
        if getattr(s, flag):
            raise Refused("--%s: %s is not one of bertbench's precisions (fp32, --bf16, --int8)" % (
                flag, why))
    if s.do_calibration:
        raise Refused("--do_calibration: bertbench's int8 needs no calibration file (activations "
                      "are quantized per token at run time)")
    if s.use_multi_stream_module:
        raise Refused("--use_multi_stream_module: IPEX's MultiStreamModule (the quickstarts' "
                      "WEIGHT_SHAREING path) is not mapped; the launcher's instances are")
    if s.per_gpu_eval_batch_size < 1:
        raise Refused("--per_gpu_eval_batch_size=%d: expected >= 1" % s.per_gpu_eval_batch_size)


def predict_path(s):
    """The file SquadProcessor.get_dev_examples opens: os.path.join(--data_dir or "",
    --predict_file or its default name)."""
    if not s.predict_file and not s.data_dir:
        raise Refused("--predict_file: expected (without it and --data_dir the script reads SQuAD "
                      "through tensorflow_datasets)")
    name = s.predict_file or ("dev-v2.0.json" if s.version_2_with_negative else "dev-v1.1.json")
    path = os.path.join(s.data_dir or "", name)
    if not os.path.isfile(path):
        raise Refused("--predict_file=%s: %s" % (path, "a directory, expected the SQuAD JSON file"
                                                 if os.path.isdir(path) else "no such file"))
    return path


def vocab_path(s, notes):
    """The vocabulary AutoTokenizer reads: --tokenizer_name's directory or --model_name_or_path's
    (a hub name is not fetched: the model directory's vocab.txt stands for it)."""
    name = s.tokenizer_name
    if name and os.path.isdir(name):
        path = os.path.join(name, "vocab.txt")
    else:
        path = os.path.join(s.model_name_or_path, "vocab.txt")
        if name:
            notes.append("--tokenizer_name=%s: a hub name, not fetched: the vocabulary of "
                         "--model_name_or_path (%s)" % (name, path))
    if not os.path.isfile(path):
        raise Refused("%s: no such file (expected the WordPiece vocabulary save_pretrained "
                      "writes)" % path)
    return path


def dtype_of(s, notes):
    if s.int8 and not (s.ipex or s.inductor):
        notes.append("--int8 without --ipex or --inductor: the script's int8 paths need one of "
                     "them, so it runs %s, as here" % ("bf16" if s.bf16 else "fp32"))
    elif s.int8:
        notes.append("--int8: bertbench's int8 (weights per output channel at load, activations "
                     "per token at run time, other ops fp32); Intel's is static, from the "
                     "calibration in --int8_config, its other ops %s" % (
                         "bf16 (--int8_bf16)" if s.int8_bf16 else "fp32"))
        return "int8"
    return "bf16" if s.bf16 else "fp32"


def build(words, instances, stamp):
    """The plan (support.Plan's fields) for the script's words on the launcher's instances."""
    s = parse_script(words)
    check_line(s)
    plan = support.Plan(os.path.join(s.output_dir, "bertbench-" + stamp))
    model = support.hf_model_flags(s, plan.run_dir, plan.notes, plan.writes)
    predict, vocab = predict_path(s), vocab_path(s, plan.notes)
    dtype = dtype_of(s, plan.notes)
    text = ["--predict_file=" + predict, "--vocab_file=" + vocab,
            "--do_lower_case=%s" % ("true" if s.do_lower_case else "false"),
            "--max_seq_length=%d" % s.max_seq_length, "--doc_stride=%d" % s.doc_stride,
            "--max_query_length=%d" % s.max_query_length, "--transformers_squad"]
    if s.version_2_with_negative:
        text += ["--version_2_with_negative",
                 "--null_score_diff_threshold=%r" % s.null_score_diff_threshold]
    ignored = [f for f, v in [("--ipex", s.ipex), ("--use_jit", s.use_jit),
                              ("--inductor", s.inductor), ("--profile", s.profile),
                              ("--overwrite_cache", s.overwrite_cache)] if v]
    if ignored:
        plan.notes.append("no effect on bertbench (PyTorch's graph modes and caches): " +
                          ", ".join(ignored))
    if s.benchmark:
        benchmark(s, plan, instances, text, model, dtype)
    else:
        accuracy(s, plan, instances, text, model, dtype, predict)
    return plan


def benchmark(s, plan, instances, text, model, dtype):
    total = s.perf_begin_iter + s.perf_run_iters
    warm = min(max(s.perf_begin_iter + 1, 0), max(total, 0))
    timed = total - warm
    if timed <= 0:
        raise Refused("--perf_begin_iter=%d --perf_run_iters=%d: no step is timed (the script "
                      "times the steps after step --perf_begin_iter and then divides by zero)" % (
                          s.perf_begin_iter, s.perf_run_iters))
    streams = 1
    if s.use_share_weight:
        if s.cores_per_instance < 1:
            raise Refused("--cores_per_instance=%d: expected >= 1 (the script divides "
                          "--total_cores by it)" % s.cores_per_instance)
        streams = s.total_cores // s.cores_per_instance
        if streams < 1:
            raise Refused("--use_share_weight --total_cores=%d --cores_per_instance=%d: no thread "
                          "runs (the script starts total_cores // cores_per_instance of them and "
                          "prints nothing)" % (s.total_cores, s.cores_per_instance))
    features = os.path.join(plan.run_dir, "features")
    plan.setup = [["squad", "--do_predict", "--features_only", "--output_dir=" + features] + text]
    config = [f for f in model if f.startswith("--bert_config_file=")]
    batch = s.per_gpu_eval_batch_size

    def bench_json(inst, j):
        return os.path.join(plan.run_dir, "bench_instance_%d_thread_%d.json" % (inst.index, j))

    for inst in instances:
        plan.streams.append([[
            "bench", "--task=squad", "--mode=infer", "--squad_layout=padded",
            "--data=" + os.path.join(features, "eval.tf_record"), "--seq_len=%d" % s.max_seq_length,
            "--batch_size=%d" % batch, "--warmup=%d" % warm, "--steps=%d" % timed, "--min_time=0",
            "--threads=%d" % inst.threads, "--noceiling", "--dtype=" + dtype,
            "--json=" + bench_json(inst, j)] + config for j in range(streams)])
    plan.notes.append("the model's weights are not read for the benchmark: bench times weights "
                      "of the model's shapes (the time does not depend on their values); bench "
                      "cycles the features in full batches (the script times a short last batch "
                      "of the file as a full one)")
    if s.use_share_weight:
        plan.notes.append("--use_share_weight: the script's %d threads per instance sharing one "
                          "model are %d bertbench processes on the instance's CPUs, each with "
                          "the instance's threads" % (streams, streams))

    def finish(i, binary):
        lines = []
        for j in range(streams):
            path = bench_json(instances[i], j)
            point = support.first_bench_point(path)
            if not point or "step_ms" not in point:
                raise Refused("%s: bench measured no point (its output above says why)" % path)
            steps = [ms / 1e3 for ms in point["step_ms"]]
            lines += ["P99 Latency {:.2f} ms".format(percentile(steps, 99) * 1000),
                      "Throughput: {:.3f} sentence/s".format(batch * s.perf_run_iters / sum(steps))]
        return lines, ["the script's figures over bertbench's %d timed step(s) after %d untimed: "
                       "batch x %d / their summed time, and their 99th percentile" % (
                           timed, warm, s.perf_run_iters)]
    plan.finish = finish


def percentile(values, q):
    """numpy.percentile(values, q) (its default, linear interpolation)."""
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def accuracy(s, plan, instances, text, model, dtype, predict):
    if len(instances) != 1:
        raise Refused("%d instances: each would evaluate the whole predict file; the accuracy "
                      "line runs one" % len(instances))
    inst = instances[0]
    plan.streams = [[["squad", "--do_predict", "--output_dir=" + plan.run_dir,
                      "--predict_batch_size=%d" % s.per_gpu_eval_batch_size,
                      "--n_best_size=%d" % s.n_best_size,
                      "--max_answer_length=%d" % s.max_answer_length,
                      "--threads=%d" % inst.threads, "--dtype=" + dtype]
                     + text + model + (["--verbose_logging"] if s.verbose_logging else [])]]

    def finish(i, binary):
        r = subprocess.run([binary, "squad-eval", "--transformers", predict,
                            os.path.join(plan.run_dir, "predictions.json")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0 or not r.stdout.startswith("Results: "):
            raise Refused("cannot score %s/predictions.json: %s" % (plan.run_dir,
                                                                   r.stdout.strip()))
        # run_squad.py's logging format, and its files in --output_dir (prefix "": one model)
        stamp = time.strftime("%m/%d/%Y %H:%M:%S")
        copied = []
        for name in ("predictions", "nbest_predictions", "null_odds"):
            src = os.path.join(plan.run_dir, name + ".json")
            if os.path.isfile(src):
                dst = os.path.join(s.output_dir, name + "_.json")
                shutil.copyfile(src, dst + ".tmp")
                os.replace(dst + ".tmp", dst)
                copied.append(dst)
        return ["%s - INFO - __main__ - %s" % (stamp, r.stdout.rstrip("\n"))], [
            "the Results line: transformers' squad_evaluate of %s/predictions.json "
            "(bertbench squad-eval --transformers); copied as run_squad.py names them: %s" % (
                plan.run_dir, ", ".join(copied))]
    plan.finish = finish
