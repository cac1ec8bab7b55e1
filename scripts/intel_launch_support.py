"""The machine and the log lines behind scripts/launch_benchmark.py (Intel's model zoo launcher)
and scripts/ipex_launch.py (IPEX's launcher over Intel's PyTorch scripts).

Machine: this process's CPUs by NUMA node, socket and core, read from Linux sysfs, and lscpu's
"Core(s) per socket", which Intel's platform_util.py reads for its thread rules. Placement: the
per-rank binding of Intel's bert_large training under MPI (`numactl -N i -m i` for rank i).
Log lines: the lines Intel's scripts print and its quickstarts grep, in their exact formats,
computed from what bertbench measured (train_log.jsonl, the bench JSON); nothing is invented.
Models: a transformers script's --config_name / --model_name_or_path / --model_type as bertbench
flags (hf_model_flags).
"""
import argparse
import glob
import json
import os
import re
import sys


# transformers' BertConfig() defaults (--model_type bert without a config file): BERT-base.
HF_BERT = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
           "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
           "layer_norm_eps": 1e-12}


class Refused(Exception):
    """A line bertbench cannot run as Intel's scripts would: the reason."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors (an unknown flag, a missing required one, a bad value) are one-line
    refusals naming the parser's program, not a usage text."""

    def error(self, message):
        # the launcher's own parser: its error line already starts with its name
        own = self.prog == os.path.basename(sys.argv[0])
        raise Refused(message if own else "%s: %s" % (self.prog, message))


class Plan:
    """What scripts/ipex_launch.py runs for one script line: `notes` said first, `writes` ({path:
    text}) written first, `setup` (bertbench argument lists) run once before the instances,
    `streams[i]`: instance i's bertbench runs (argument lists; each bound to the instance's CPUs),
    all instances' streams at once, and `finish(i, binary)`: ([lines for instance i's log], [lines for the launcher's log])
    after they all succeeded. bertbench's own files go to `run_dir`."""

    def __init__(self, run_dir):
        self.run_dir, self.notes, self.writes, self.setup, self.streams = run_dir, [], {}, [], []
        self.finish = lambda i, binary: ([], [])


def cpulist(cpus):
    """[0, 1, 2, 5] -> '0-2,5' (the sysfs/numactl form)."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def parse_cpulist(text):
    cpus = []
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            cpus.extend(range(int(a), int(b or a) + 1))
    return cpus


class Machine:
    """CPUs as (cpu, node, socket, core) for the CPUs this process may use (its affinity), and
    cores_per_socket and socket_count over the whole machine (lscpu's figures).
    BERTBENCH_CPU_TOPOLOGY=SxCxT describes another machine instead (S sockets of C cores of T
    threads, one NUMA node per socket, Linux's numbering), for dry runs and tests."""

    def __init__(self):
        fake = os.environ.get("BERTBENCH_CPU_TOPOLOGY")
        if fake:
            m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", fake)
            if not m:
                raise ValueError("BERTBENCH_CPU_TOPOLOGY=%s: expected SOCKETSxCORESxTHREADS, e.g. "
                                 "2x28x2" % fake)
            s, c, t = (int(g) for g in m.groups())
            self.cpus = [(k * s * c + i * c + j, i, i, j)
                         for k in range(t) for i in range(s) for j in range(c)]
            self.cores_per_socket, self.socket_count = c, s
            return
        allowed = os.sched_getaffinity(0)
        node_of = {}
        for d in glob.glob("/sys/devices/system/node/node[0-9]*"):
            with open(os.path.join(d, "cpulist")) as f:
                for cpu in parse_cpulist(f.read()):
                    node_of[cpu] = int(d.rsplit("node", 1)[1])
        cores, self.cpus = {}, []
        for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
            cpu = int(d.split("/")[-2][3:])
            try:
                with open(d + "/physical_package_id") as f:
                    socket = int(f.read())
                with open(d + "/core_id") as f:
                    core = int(f.read())
            except OSError:
                continue
            cores.setdefault(socket, set()).add(core)
            if cpu in allowed:
                self.cpus.append((cpu, node_of.get(cpu, 0), socket, core))
        if not self.cpus:  # no sysfs topology: every allowed CPU its own core on node 0
            self.cpus = [(cpu, 0, 0, cpu) for cpu in allowed]
        self.cpus.sort()
        self.cores_per_socket = max((len(v) for v in cores.values()), default=len(self.cpus))
        self.socket_count = max(len(cores), 1)

    def available(self):
        return [c[0] for c in self.cpus]

    def nodes(self):
        return sorted({c[1] for c in self.cpus})

    def node_cores(self, node):
        """The node's physical cores, each as the list of its CPUs (hyper-threads)."""
        cores = {}
        for cpu, n, socket, core in self.cpus:
            if n == node:
                cores.setdefault((socket, core), []).append(cpu)
        return [cores[k] for k in sorted(cores, key=lambda k: min(cores[k]))]


def rank_placement(machine, ranks, binder):
    """[(binding words, CPUs)] for each rank, as Intel's bert_large training/*/model_init.py:
    rank i runs under `numactl -N i -m i` (NUMA node i's CPUs and memory). With more ranks than
    nodes (Intel's numactl then fails), rank i takes node i mod K and the ranks on one node share
    its physical cores out evenly. binder: 'numactl' or 'taskset' (CPUs only). Raises ValueError
    when a rank would get no core."""
    nodes = machine.nodes()
    out = []
    for i in range(ranks):
        node = nodes[i % len(nodes)]
        cores = machine.node_cores(node)
        if ranks <= len(nodes):
            cpus = sorted(c for core in cores for c in core)
            words = (["numactl", "-N", str(node), "-m", str(node)] if binder == "numactl"
                     else ["taskset", "-c", cpulist(cpus)])
        else:
            share = [r for r in range(ranks) if r % len(nodes) == i % len(nodes)]
            k, j = len(share), share.index(i)
            if len(cores) < k:
                raise ValueError("%d ranks on NUMA node %d, which has %d physical core(s) here: at "
                                 "least one core per rank" % (k, node, len(cores)))
            cpus = sorted(c for core in cores[j * len(cores) // k:(j + 1) * len(cores) // k]
                          for c in core)
            words = (["numactl", "--physcpubind=" + cpulist(cpus), "-m", str(node)]
                     if binder == "numactl" else ["taskset", "-c", cpulist(cpus)])
        out.append((words, cpus))
    return out


def new_jsonl(path, before):
    """The lines a run appended to a JSONL log whose text was `before` (a resumed run first cuts
    lines past its checkpoint, then appends), parsed."""
    try:
        with open(path) as f:
            after = f.read().splitlines()
    except OSError:
        return []
    old = before.splitlines()
    i = 0
    while i < len(old) and i < len(after) and old[i] == after[i]:
        i += 1
    return [json.loads(line) for line in after[i:] if line.strip()]


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def examples_per_sec_lines(updates, global_batch, ranks, every):
    """TF's ExamplesPerSecondHook as Intel's TPUEstimator runs it:
    `INFO:tensorflow:examples/sec: %g` per process (its train_batch_size, the per-rank batch)
    every `every` steps, over the steps since the last line, the first step only starting the
    clock. updates: train_log.jsonl entries (each
    sequences_per_second = global_batch / the update's seconds). Returns (lines, note or None)."""
    dts = [global_batch / u["sequences_per_second"] for u in updates
           if u.get("sequences_per_second")]
    per_rank = global_batch / ranks
    start = 1 if len(dts) > 1 else 0
    windows = [dts[i:i + every] for i in range(start, len(dts) - every + 1, every)]
    note = None
    if not windows and dts:
        windows = [dts[start:]]
        note = ("TF logs examples/sec every %d steps after the first; this run had %d, so one line "
                "covers steps %d-%d" % (every, len(dts), start + 1, len(dts)))
    return ["INFO:tensorflow:examples/sec: %g" % (per_rank * len(w) / sum(w))
            for w in windows], note


def pretraining_summary_lines(updates, global_batch, ranks, steps_per_update):
    """run_pretraining.py's LoggerHook.end(): per process, steps are micro-steps (session runs),
    the first 2 excluded (with accumulation: the first update, which holds them). Returns (lines,
    note)."""
    ms = [1e3 * global_batch / u["sequences_per_second"] for u in updates
          if u.get("sequences_per_second")]
    k = steps_per_update
    skip = 2 if k == 1 else 1  # updates holding the 2 warm-up micro-steps
    note = None
    if len(ms) <= skip:
        note = ("LoggerHook leaves out the first 2 steps; this run had %d, so none is left out"
                % (len(ms) * k))
        skip = 0
    if not ms:
        return [], note
    timed = ms[skip:]
    total = sum(timed)
    per_iter = total / (len(timed) * k)
    batch = global_batch // (ranks * k)
    lines = ["self._step: %d" % (len(ms) * k),
             "Total time spent (after warmup): %.2f ms" % total,
             "Time spent per iteration (after warmup): %.2f ms" % per_iter]
    if batch == 1:
        lines.append("Latency is %.3f ms" % per_iter)
    lines.append("Throughput is %.3f samples/sec" % (batch * 1000 / per_iter))
    return lines, note


def first_bench_point(path):
    """The first point of a `bertbench bench --json` file; None when it has none or cannot be
    read (the run failed)."""
    try:
        with open(path) as f:
            points = json.load(f).get("points") or []
    except (OSError, ValueError):
        return None
    return points[0] if points else None


def inference_lines(point, in_graph):
    """Inference run_squad.py's benchmark figures from a bench point (its timed step_ms): with a
    frozen graph do_benchmark()'s `Total throughput (examples/sec): X`, else the estimator loop's
    `Throughput: X`, both batch x steps / the steps' summed time, as Intel times them."""
    steps, batch = point["step_ms"], point["batch_size"]
    seconds = sum(steps) / 1e3
    rate = batch * len(steps) / seconds
    if in_graph:
        return ["Thread {0} has throughput {1}".format(1, rate),
                "Total throughput (examples/sec): {0}".format(rate)]
    warm = point["warmup_steps"] * batch
    return ["Total examples: %d, Warmup examples: %d, Benchmark examples: %d, Benchmark time: %f "
            "secs" % (warm + batch * len(steps), warm, batch * len(steps), seconds),
            "Throughput: %3.2f" % rate]


def read_json_object(path, what, kind):
    """The JSON object in `path`; a one-line refusal naming `what` (cannot read) or `kind` (not
    an object)."""
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused("%s: cannot read %s: %s" % (path, what, e))
    if not isinstance(value, dict):
        raise Refused("%s: expected a JSON object (%s)" % (path, kind))
    return value


def hf_model_flags(s, run_dir, notes, writes):
    """--bert_config_file (and --init_checkpoint) for a transformers script's model flags
    (s.config_name, s.model_name_or_path, s.model_type), read as AutoConfig reads them ("gelu" is
    the erf form there). A config to write goes to `writes`."""
    if s.config_name or (s.model_name_or_path and os.path.isdir(s.model_name_or_path)):
        path = s.config_name or os.path.join(s.model_name_or_path, "config.json")
        config = read_json_object(path, "the model config", "a BERT config")
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
