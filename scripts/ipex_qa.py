"""transformers' run_qa.py (v4.10, examples/pytorch/question-answering) with Intel's patch
(IntelAI/models quickstart/language_modeling/pytorch/bert_base/inference/cpu/
enable_ipex_for_bert-base.diff) as bertbench runs it: the script-side half of scripts/ipex_launch.py
for Intel's BERT-base SQuAD inference quickstarts (run_multi_instance_throughput.sh,
run_multi_instance_realtime.sh, run_accuracy.sh), which all evaluate: the questions of the
`squad` dataset's validation split, features made by BertTokenizerFast, the model over them in
batches of --per_device_eval_batch_size, utils_qa's decoding and the datasets squad metric.

Each launcher instance runs `bertbench squad --do_predict --transformers_qa` (the same tokenizer,
windows, decoding and metric; docs/squad.md) and then prints the lines the script prints:
`Throughput: {:.3f} sentence/s` (Intel's patch of the Trainer's evaluation loop: batch x (K - 10)
/ the forward time of batches 11..K, from bertbench's time of each batch), utils_qa's log lines
and log_metrics' `***** eval metrics *****` block (`eval_exact_match`, `eval_f1`, `eval_samples`:
what the quickstarts grep); its files eval_predictions.json, eval_nbest_predictions.json
(eval_null_odds.json), eval_results.json and all_results.json go to --output_dir.

`--dataset_name squad` (squad_v2) is read from $SQUAD_DIR/dev-v1.1.json (dev-v2.0.json): the hub
is not fetched. `--validation_file F` is the datasets json layout ({"data": [{"id", "title",
"context", "question", "answers": {"text": [...], "answer_start": [...]}}]}).
"""
import argparse
import datetime
import json
import os
import time

import intel_launch_support as support
from intel_launch_support import Refused

SCRIPT = "run_qa.py"


def string_to_bool(v):
    """HfArgumentParser's string_to_bool."""
    if isinstance(v, bool):
        return v
    if v.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if v.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(
        "Truthy value expected: got %s but expected one of yes/no, true/false, t/f, y/n, 1/0 "
        "(case insensitive)." % v)


def parse_script(words):
    """HfArgumentParser over run_qa.py's ModelArguments (with Intel's four), DataTrainingArguments
    and TrainingArguments (transformers 4.10): their names, types and defaults, bool fields as
    `--flag [BOOL]` (and `--no_flag` where the default is True), abbreviations as argparse allows
    them. Arguments it does not know are the script's ValueError."""
    p = support.ArgumentParser(prog=SCRIPT)

    def flag(name, default=False, value_required=False):
        if default is True:
            p.add_argument("--no_" + name, dest=name, action="store_false")
        if value_required:
            p.add_argument("--" + name, type=string_to_bool, default=None)
        else:
            p.add_argument("--" + name, type=string_to_bool, nargs="?", const=True, default=default)

    def opt(name, type=str, default=None, **kw):
        p.add_argument("--" + name, type=type, default=default, **kw)

    # ModelArguments
    opt("model_name_or_path", required=True)
    for n in ("config_name", "tokenizer_name", "cache_dir"):
        opt(n)
    opt("model_revision", default="main")
    for n in ("use_auth_token", "use_ipex", "jit_mode", "bf16", "profile"):
        flag(n)
    # DataTrainingArguments
    for n in ("dataset_name", "dataset_config_name", "train_file", "validation_file", "test_file"):
        opt(n)
    flag("overwrite_cache")
    opt("preprocessing_num_workers", int)
    opt("max_seq_length", int, 384)
    flag("pad_to_max_length", True)
    for n in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
        opt(n, int)
    flag("version_2_with_negative")
    opt("null_score_diff_threshold", float, 0.0)
    opt("doc_stride", int, 128)
    opt("n_best_size", int, 20)
    opt("max_answer_length", int, 30)
    # TrainingArguments
    strategies = ["no", "steps", "epoch"]
    levels = ["debug", "info", "warning", "error", "critical", "passive"]
    opt("output_dir", required=True)
    for n in ("overwrite_output_dir", "do_train", "do_eval", "do_predict", "prediction_loss_only"):
        flag(n)
    opt("evaluation_strategy", default="no", choices=strategies)
    for n in ("per_device_train_batch_size", "per_device_eval_batch_size"):
        opt(n, int, 8)
    for n in ("per_gpu_train_batch_size", "per_gpu_eval_batch_size", "eval_accumulation_steps",
              "save_total_limit", "tpu_num_cores", "eval_steps"):
        opt(n, int)
    opt("gradient_accumulation_steps", int, 1)
    for n, d in (("learning_rate", 5e-5), ("weight_decay", 0.0), ("adam_beta1", 0.9),
                 ("adam_beta2", 0.999), ("adam_epsilon", 1e-8), ("max_grad_norm", 1.0),
                 ("num_train_epochs", 3.0), ("warmup_ratio", 0.0), ("label_smoothing_factor", 0.0)):
        opt(n, float, d)
    for n, d in (("max_steps", -1), ("warmup_steps", 0), ("logging_steps", 500),
                 ("save_steps", 500), ("seed", 42), ("local_rank", -1),
                 ("dataloader_num_workers", 0), ("past_index", -1)):
        opt(n, int, d)
    opt("lr_scheduler_type", default="linear",
        choices=["linear", "cosine", "cosine_with_restarts", "polynomial", "constant",
                 "constant_with_warmup"])
    opt("log_level", default="passive", choices=levels)
    opt("log_level_replica", default="passive", choices=levels)
    flag("log_on_each_node", True)
    opt("logging_strategy", default="steps", choices=strategies)
    opt("save_strategy", default="steps", choices=strategies)
    for n in ("logging_first_step", "save_on_each_node", "no_cuda", "fp16", "fp16_full_eval",
              "tpu_metrics_debug", "dataloader_drop_last", "load_best_model_at_end",
              "ignore_data_skip", "adafactor", "group_by_length", "use_legacy_prediction_loop",
              "push_to_hub"):
        flag(n)
    for n in ("disable_tqdm", "greater_is_better", "ddp_find_unused_parameters"):
        flag(n, None, value_required=True)
    for n in ("remove_unused_columns", "dataloader_pin_memory", "skip_memory_metrics"):
        flag(n, True)
    for n, d in (("logging_dir", None), ("fp16_opt_level", "O1"), ("debug", ""),
                 ("run_name", None), ("metric_for_best_model", None), ("sharded_ddp", ""),
                 ("deepspeed", None), ("length_column_name", "length"),
                 ("resume_from_checkpoint", None), ("push_to_hub_model_id", None),
                 ("push_to_hub_organization", None), ("push_to_hub_token", None),
                 ("mp_parameters", "")):
        opt(n, default=d)
    opt("fp16_backend", default="auto", choices=["auto", "amp", "apex"])
    for n in ("label_names", "report_to"):
        opt(n, nargs="+")
    s, rest = p.parse_known_args(words)
    if rest:
        raise Refused("Some specified arguments are not used by the HfArgumentParser: %r (the "
                      "script raises ValueError)" % rest)
    s.model_type = None  # run_qa.py builds its model from the config (support.hf_model_flags)
    return s


def check_line(s, words):
    """Refusals: what the script would not evaluate, or what the mapping does not run."""
    if s.do_train or s.do_predict:
        raise Refused("--%s: run_qa.py's %s is not mapped (Intel's quickstarts only evaluate); "
                      "bertbench fine-tunes with `bertbench squad --do_train` (docs/squad.md)" % (
                          ("do_train", "fine-tuning") if s.do_train else
                          ("do_predict", "test-split prediction")))
    if not s.do_eval and s.evaluation_strategy == "no":
        raise Refused("--do_eval: expected (without it the script evaluates nothing)")
    if s.fp16 or s.fp16_full_eval:
        raise Refused("--fp16%s: the script raises ValueError on a CPU (\"can only be used on CUDA "
                      "devices\")" % ("_full_eval" if s.fp16_full_eval else ""))
    if s.debug:
        raise Refused("--debug %s: the script's evaluation then calls a TPU metrics printer "
                      "(NameError on a CPU)" % s.debug)
    if s.prediction_loss_only or s.dataloader_drop_last or not s.remove_unused_columns:
        raise Refused("%s: the script then fails in its post-processing (no logits, fewer "
                      "predictions than features, or offset_mapping in the batches)" % (
                          "--prediction_loss_only" if s.prediction_loss_only else
                          "--dataloader_drop_last" if s.dataloader_drop_last else
                          "--no_remove_unused_columns"))
    # trainer_qa.py imports IPEX only when the exact word --use_ipex is on the command line
    if s.use_ipex and "--use_ipex" not in words:
        raise Refused("--use_ipex given as %s: Intel's trainer_qa.py imports IPEX only for the "
                      "exact word --use_ipex (NameError: name 'ipex' is not defined)" %
                      next(w for w in words if w.startswith("--use_i")))
    if not s.use_ipex and not s.jit_mode and "--use_ipex" in words:
        raise Refused("--use_ipex false without --jit_mode: Intel's trainer_qa.py then calls "
                      "torch's mkldnn_utils, which it did not import (NameError)")
    for name in ("max_seq_length", "doc_stride", "n_best_size", "max_answer_length"):
        if getattr(s, name) < (0 if name == "doc_stride" else 1):
            raise Refused("--%s=%d: expected >= %d" % (name, getattr(s, name),
                                                        0 if name == "doc_stride" else 1))
    if eval_batch(s) < 1:
        raise Refused("--per_device_eval_batch_size=%d: expected >= 1" % eval_batch(s))
    if s.max_eval_samples is not None and s.max_eval_samples < 1:
        raise Refused("--max_eval_samples=%d: the script evaluates no batch and divides by zero "
                      "in its Throughput line" % s.max_eval_samples)


def eval_batch(s):
    """TrainingArguments.eval_batch_size on a CPU (no GPU: n_gpu 0 counts as 1)."""
    return s.per_gpu_eval_batch_size or s.per_device_eval_batch_size


def eval_file(s, plan):
    """The SQuAD file the script's validation split comes from (a datasets-json file is written
    out in SQuAD's layout for bertbench)."""
    if s.dataset_name:
        names = {"squad": "dev-v1.1.json", "squad_v2": "dev-v2.0.json"}
        if s.dataset_name not in names:
            raise Refused("--dataset_name %s: bertbench reads squad and squad_v2 (from $SQUAD_DIR)"
                          % s.dataset_name)
        if s.dataset_name == "squad_v2" and not s.version_2_with_negative:
            raise Refused("--dataset_name squad_v2 without --version_2_with_negative: the "
                          "script's squad metric fails on its unanswerable questions")
        squad_dir = os.environ.get("SQUAD_DIR")
        if not squad_dir:
            raise Refused("--dataset_name %s: the hub is not fetched; SQUAD_DIR=<dir with %s> "
                          "names the file its validation split is made from" % (
                              s.dataset_name, names[s.dataset_name]))
        path = os.path.join(squad_dir, names[s.dataset_name])
        if not os.path.isfile(path):
            raise Refused("--dataset_name %s: %s: no such file (SQUAD_DIR=%s)" % (
                s.dataset_name, path, squad_dir))
        plan.notes.append("--dataset_name %s: the validation split from %s (the hub is not "
                          "fetched)" % (s.dataset_name, path))
        return path
    if not s.validation_file:
        raise Refused("Need either a dataset name or a training/validation file/test_file. (the "
                      "script's ValueError; bertbench evaluates --dataset_name or "
                      "--validation_file)")
    try:
        with open(s.validation_file) as f:
            records = json.load(f)["data"]
        articles = [{"title": r.get("title", ""), "paragraphs": [{"context": r["context"], "qas": [
            {"id": r["id"], "question": r["question"],
             "answers": [{"text": t, "answer_start": a} for t, a in
                         zip(r["answers"]["text"], r["answers"]["answer_start"])]}]}]}
            for r in records]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise Refused("--validation_file %s: expected the datasets json layout {\"data\": "
                      "[{\"id\", \"context\", \"question\", \"answers\": {\"text\": [...], "
                      "\"answer_start\": [...]}}, ...]}: %s" % (s.validation_file, e))
    path = os.path.join(plan.run_dir, "validation.squad.json")
    plan.writes[path] = json.dumps({"version": "1.1", "data": articles}) + "\n"
    plan.notes.append("--validation_file: its records in SQuAD's layout for bertbench: " + path)
    return path


def tokenizer_flags(s, plan):
    """The vocabulary, casing and length limit AutoTokenizer (BertTokenizerFast) reads from the
    tokenizer directory: vocab.txt and tokenizer_config.json's do_lower_case (True by default)
    and model_max_length (the script uses the smaller of it and --max_seq_length). What bertbench's
    WordPiece cannot reproduce (check_tokenizer) is refused."""
    directory = s.tokenizer_name if s.tokenizer_name and os.path.isdir(s.tokenizer_name) else \
        s.model_name_or_path
    if s.tokenizer_name and directory != s.tokenizer_name:
        plan.notes.append("--tokenizer_name=%s: a hub name, not fetched: the tokenizer of "
                          "--model_name_or_path" % s.tokenizer_name)
    vocab = os.path.join(directory, "vocab.txt")
    if not os.path.isfile(vocab):
        raise Refused("%s: no such file (expected the WordPiece vocabulary save_pretrained "
                      "writes; a tokenizer.json alone is not read)" % vocab)
    path = os.path.join(directory, "tokenizer_config.json")
    config = support.read_json_object(path, "it", "the tokenizer's settings") \
        if os.path.isfile(path) else {}
    lower = config.get("do_lower_case", True)
    if not isinstance(lower, bool):
        raise Refused("%s: do_lower_case: expected true or false, got %s" % (path, json.dumps(lower)))
    limit = config.get("model_max_length")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit != int(limit)):
        raise Refused("%s: model_max_length: expected an integer, got %s" % (path, json.dumps(limit)))
    check_tokenizer(directory, path, config, lower, vocab)
    length = s.max_seq_length
    if limit is not None and int(limit) < length:
        plan.notes.append("The max_seq_length passed (%d) is larger than the maximum length for "
                          "the model (%d): %d, as the script" % (length, limit, int(limit)))
        length = int(limit)
    return ["--vocab_file=" + vocab, "--do_lower_case=%s" % ("true" if lower else "false"),
            "--max_seq_length=%d" % length]


def check_tokenizer(directory, config_path, config, lower, vocab):
    """Refuses the tokenizer settings bertbench's BERT WordPiece (google's BasicTokenizer: accents
    stripped exactly when lower-casing, CJK characters split, control characters removed, words of
    over 100 characters [UNK]) would silently tokenize otherwise: tokenizer_config.json's
    strip_accents/tokenize_chinese_chars, tokenizer.json's normalizer type and clean_text, model and
    vocabulary, and added tokens that are not in vocab.txt (HF makes each one token)."""
    def refuse(where, key, value, want):
        raise Refused("%s: %s: %s, expected %s (bertbench's WordPiece tokenizes as google's "
                      "BasicTokenizer with do_lower_case %s)" % (where, key, json.dumps(value), want,
                                                                 "true" if lower else "false"))
    if config.get("strip_accents") not in (None, lower):
        refuse(config_path, "strip_accents", config["strip_accents"], "null or do_lower_case's value")
    if config.get("tokenize_chinese_chars", True) is not True:
        refuse(config_path, "tokenize_chinese_chars", config["tokenize_chinese_chars"], "true")
    with open(vocab, encoding="utf-8", errors="replace") as f:
        tokens = set(line.rstrip("\r\n").strip() for line in f)
    added = os.path.join(directory, "added_tokens.json")
    extra = list(support.read_json_object(added, "it", "the added tokens").keys()) if os.path.isfile(added) else []
    path = os.path.join(directory, "tokenizer.json")
    if os.path.isfile(path):
        tok = support.read_json_object(path, "it", "a tokenizers JSON document")
        norm = tok.get("normalizer") or {}
        if norm.get("type") != "BertNormalizer":
            refuse(path, "normalizer type", norm.get("type"), "\"BertNormalizer\"")
        # BertTokenizerFast rebuilds the normalizer's lowercase, strip_accents and
        # handle_chinese_chars from tokenizer_config.json (checked above); clean_text stays
        if norm.get("clean_text", True) is not True:
            refuse(path, "normalizer clean_text", norm.get("clean_text"), "true")
        model = tok.get("model") or {}
        if model.get("type") != "WordPiece":
            refuse(path, "model type", model.get("type"), "\"WordPiece\"")
        if model.get("max_input_chars_per_word", 100) != 100:
            refuse(path, "model max_input_chars_per_word", model.get("max_input_chars_per_word"), "100")
        lacking = sorted(set(model["vocab"]) - tokens) if isinstance(model.get("vocab"), dict) else []
        if lacking:
            raise Refused("%s: its vocabulary has %d token(s) vocab.txt lacks (e.g. %s): expected the "
                          "vocabulary of %s" % (path, len(lacking), json.dumps(lacking[0]), vocab))
        extra += [t.get("content") for t in tok.get("added_tokens") or [] if isinstance(t, dict)]
    missing = [t for t in extra if t not in tokens]
    if missing:
        raise Refused("%s: added token %s is not in %s: HF's tokenizer makes it one token, bertbench's "
                      "WordPiece would split it (expected added tokens that vocab.txt holds)"
                      % (added if os.path.isfile(added) else path, json.dumps(missing[0]), vocab))


def build(words, instances, stamp):
    """The plan (support.Plan's fields) for the script's words on the launcher's instances."""
    s = parse_script(words)
    check_line(s, words)
    plan = support.Plan(os.path.join(s.output_dir, "bertbench-" + stamp))
    model = support.hf_model_flags(s, plan.run_dir, plan.notes, plan.writes)
    predict = eval_file(s, plan)
    batch = eval_batch(s)
    text = ["--predict_file=" + predict] + tokenizer_flags(s, plan) + [
        "--doc_stride=%d" % s.doc_stride, "--n_best_size=%d" % s.n_best_size,
        "--max_answer_length=%d" % s.max_answer_length, "--predict_batch_size=%d" % batch,
        "--dtype=" + ("bf16" if s.bf16 else "fp32")]
    if s.version_2_with_negative:
        text += ["--version_2_with_negative",
                 "--null_score_diff_threshold=%r" % s.null_score_diff_threshold]
    if s.max_eval_samples is not None:
        text.append("--max_eval_samples=%d" % s.max_eval_samples)
    ignored = [f for f, v in [("--use_ipex", s.use_ipex), ("--jit_mode", s.jit_mode),
                              ("--profile", s.profile), ("--overwrite_cache", s.overwrite_cache),
                              ("--preprocessing_num_workers", s.preprocessing_num_workers)] if v]
    if ignored:
        plan.notes.append("no effect on bertbench (IPEX, TorchScript, the profiler, datasets' "
                          "cache): " + ", ".join(ignored))
    if not s.pad_to_max_length:
        plan.notes.append("--no_pad_to_max_length: bertbench pads every feature to "
                          "--max_seq_length (the script pads each batch to its longest: the same "
                          "logits where it reads them, a different time)")
    out = [os.path.join(plan.run_dir, "instance_%d" % inst.index) for inst in instances]
    plan.streams = [[["squad", "--do_predict", "--transformers_qa", "--output_dir=" + out[i],
                      "--threads=%d" % inst.threads] + text + model]
                    for i, inst in enumerate(instances)]
    plan.finish = lambda i, binary: finish(s, out[i], batch)
    return plan


def finish(s, run_out, batch):
    """The script's lines for one instance's run, and its files in --output_dir."""
    speed = read_json(os.path.join(run_out, "predict_speed.json"))
    times = speed.get("batch_seconds", [])
    if len(times) <= 10:
        raise Refused("%d batch(es) of %d: Intel's Throughput line times the batches after the "
                      "10th and divides by zero here (ZeroDivisionError: the script stops before "
                      "its predictions and metrics; bertbench's are in %s)" % (
                          len(times), batch, run_out))
    features = speed["sequences"]
    examples = count_questions(run_out)
    stamp = time.strftime("%m/%d/%Y %H:%M:%S")
    log = "%s - INFO - %s - %s"
    now = datetime.datetime.now()
    trainer = "[INFO|trainer.py:%d] " + now.strftime("%Y-%m-%d %H:%M:%S,") + \
        "%03d >> %%s" % (now.microsecond // 1000)
    lines = [log % (stamp, "__main__", "*** Evaluate ***"),
             trainer % (2181, "***** Running Evaluation *****"),
             trainer % (2183, "  Num examples = %d" % features),
             trainer % (2186, "  Batch size = %d" % batch)]
    if not s.use_legacy_prediction_loop:  # Intel patched evaluation_loop only
        lines.append("Throughput: {:.3f} sentence/s".format(
            batch * (len(times) - 10) / sum(times[10:])))
    lines.append(log % (stamp, "utils_qa", "Post-processing %d example predictions split into %d "
                        "features." % (examples, features)))
    os.makedirs(s.output_dir, exist_ok=True)
    copied = []
    for ours, theirs in (("predictions", "predictions"), ("nbest_predictions", "nbest_preds"),
                         ("null_odds", "null_odds")):
        src = os.path.join(run_out, ours + ".json")
        if os.path.isfile(src):
            dst = os.path.join(s.output_dir, "eval_%s.json" % ours)
            lines.append(log % (stamp, "utils_qa", "Saving %s to %s." % (theirs, dst)))
            write_atomic(dst, support.read_text(src))
            copied.append(dst)
    if not os.path.isfile(os.path.join(run_out, "eval_results.json")):
        raise Refused("%s has questions without answers: the script's squad metric fails on them "
                      "(ValueError); bertbench's predictions are in %s" % (
                          s.validation_file or s.dataset_name, run_out))
    metric = read_json(os.path.join(run_out, "eval_results.json"))
    metrics = {"eval_" + k: v for k, v in metric.items()}
    metrics["eval_samples"] = features
    lines += log_metrics(metrics)
    save_metrics(s.output_dir, metrics)
    return lines, ["%s: the script's lines from bertbench's run in %s (Throughput: its formula "
                   "over bertbench's time of each batch); copied %s" % (
                       SCRIPT, run_out, ", ".join(copied))]


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Refused("%s: cannot read bertbench's output: %s" % (path, e))


def count_questions(run_out):
    with open(os.path.join(run_out, "predictions.json")) as f:
        return len(json.load(f))


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def log_metrics(metrics):
    """Trainer.log_metrics("eval", ...): floats rounded to 4 places, keys sorted, aligned."""
    shown = {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()}
    kw = max(len(str(k)) for k in shown)
    vw = max(len(str(v)) for v in shown.values())
    return ["***** eval metrics *****"] + [
        "  {:<{}} = {:>{}}".format(k, kw, str(shown[k]), vw) for k in sorted(shown)]


def save_metrics(output_dir, metrics):
    """Trainer.save_metrics("eval", ...): eval_results.json, and all_results.json updated."""
    write_atomic(os.path.join(output_dir, "eval_results.json"),
                 json.dumps(metrics, indent=4, sort_keys=True))
    path = os.path.join(output_dir, "all_results.json")
    merged = {}
    if os.path.isfile(path):
        try:
            with open(path) as f:
                merged = json.load(f)
        except (OSError, ValueError):
            merged = {}
    merged.update(metrics)
    write_atomic(path, json.dumps(merged, indent=4, sort_keys=True))
