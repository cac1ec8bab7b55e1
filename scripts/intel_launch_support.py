"""The machine and the log lines behind scripts/launch_benchmark.py (Intel's model zoo launcher).

Machine: this process's CPUs by NUMA node, socket and core, read from Linux sysfs, and lscpu's
"Core(s) per socket", which Intel's platform_util.py reads for its thread rules. Placement: the
per-rank binding of Intel's bert_large training under MPI (`numactl -N i -m i` for rank i).
Log lines: the lines Intel's scripts print and its quickstarts grep, in their exact formats,
computed from what bertbench measured (train_log.jsonl, the bench JSON); nothing is invented.
"""
import glob
import json
import os
import re


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
