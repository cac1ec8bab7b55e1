#!/usr/bin/env python3
"""Intel's PyTorch BERT lines under IPEX's launcher, run by bertbench.

Intel's model zoo times CPU BERT with `python -m intel_extension_for_pytorch.cpu.launch
[launcher flags] SCRIPT [script flags]`. The same line runs here with the launcher's module
replaced by this script, for three scripts (the script's path is only checked for its name):

- run_pretrain_mlperf.py --benchmark (training quickstarts run_bert_pretrain_phase{1,2}.sh):
  scripts/ipex_pretrain.py, one `bertbench pretrain`;
- transformers' legacy run_squad.py with Intel's patch (inference quickstarts
  run_multi_instance_throughput.sh, run_multi_instance_realtime.sh, run_accuracy.sh):
  scripts/ipex_squad.py, `bertbench bench --task=squad` per instance or `bertbench squad
  --do_predict` and its score;
- transformers' run_qa.py with Intel's patch (BERT-base inference quickstarts of the same names):
  scripts/ipex_qa.py, `bertbench squad --do_predict --transformers_qa` per instance.

The launcher's part is here: its CPU pools (all physical cores as one instance by default; a NUMA
node's with --nodes-list; --cores-list; --ncores-per-instance / --ninstances; --throughput-mode:
one instance per NUMA node; --latency-mode: 4 cores each), OMP_NUM_THREADS (kept when set, else the
instance's cores) as --threads, each run bound with `numactl -C <cpus> -m <nodes>` (taskset without
numactl), all instances at once, and its log files: <log_dir>/<prefix>_<YYYYmmddHHMMSS>_instance_<i>_
cores_<cpus>.log with instance i's output and the lines the script prints (what the quickstarts
grep), <prefix>_<time>_instances.log with the launcher's own lines. What differs is said in one
line; what bertbench cannot run is refused in one line saying why, before anything is written.
docs/compatibility.md has the tables.

Environment: BERTBENCH (the binary; default <repo>/build/bertbench, else bertbench on PATH),
BERTBENCH_CPU_TOPOLOGY=SxCxT (plan for another machine; for tests).
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import intel_launch_support as support  # noqa: E402
import ipex_pretrain  # noqa: E402
import ipex_qa  # noqa: E402
import ipex_squad  # noqa: E402
from intel_launch_support import Refused  # noqa: E402

PROG = "ipex_launch.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {ipex_pretrain.SCRIPT: ipex_pretrain, ipex_squad.SCRIPT: ipex_squad,
           ipex_qa.SCRIPT: ipex_qa}


class Instance:
    """One instance of the launcher: its index and CPUs, their NUMA nodes, the launcher's name for
    them (as in its log file names) and the threads its process gets."""

    def __init__(self, index, cpus, nodes, name, threads):
        self.index, self.cpus, self.nodes, self.name = index, cpus, nodes, name
        self.threads = threads


def parse_launcher(argv):
    """The launcher's flags as IPEX 2.3's cpu/launch declares them (each with its underscore
    spelling; abbreviations as its argparse takes them; `choices` checked), its deprecated flags
    applied over the current ones afterwards as its process_deprecated_params does, the program
    and its words."""
    p = support.ArgumentParser(prog=PROG)
    a = p.add_argument
    a("-m", "--module", dest="module", action="store_true")
    a("--no-python", "--no_python", dest="no_python", action="store_true")
    a("--log-dir", "--log_dir", dest="log_dir", default="")
    a("--log-file-prefix", "--log_file_prefix", dest="log_prefix", default="run")
    a("program")
    a("program_args", nargs=argparse.REMAINDER)
    # common and multi-instance flags
    a("--ncores-per-instance", "--ncores_per_instance", dest="ncores", type=int, default=0)
    a("--nodes-list", "--nodes_list", dest="nodes", default="")
    a("--use-e-cores", "--use_e_cores", dest="use_e_cores", action="store_true")
    a("--memory-allocator", "--memory_allocator", dest="memory_allocator", default="auto",
      choices=["auto", "default", "tcmalloc", "jemalloc"])
    a("--omp-runtime", "--omp_runtime", dest="omp_runtime", default="auto",
      choices=["auto", "default", "intel"])
    a("--ninstances", type=int, default=0)
    a("--instance-idx", "--instance_idx", dest="instance_idx", default="")
    a("--use-logical-cores", "--use_logical_cores", dest="logical", action="store_true")
    a("--skip-cross-node-cores", "--skip_cross_node_cores", "--bind-numa-node", "--bind_numa_node",
      dest="bind_numa_node", action="store_true")  # --bind-numa-node: its name before 2.3
    a("--multi-task-manager", "--multi_task_manager", dest="task_manager", default="auto",
      choices=["auto", "none", "numactl", "taskset"])
    a("--latency-mode", "--latency_mode", dest="latency_mode", action="store_true")
    a("--throughput-mode", "--throughput_mode", dest="throughput_mode", action="store_true")
    a("--cores-list", "--cores_list", dest="cores", default="")
    a("--benchmark", action="store_true")
    a("--strategy", default="close")  # before 2.3
    # distributed flags (refused: check_launcher)
    a("--nnodes", type=int, default=0)
    a("--nprocs-per-node", "--nprocs_per_node", dest="nprocs", type=int, default=0)
    a("--ccl-worker-count", "--ccl_worker_count", dest="ccl_worker_count", type=int, default=4)
    a("--logical-cores-for-ccl", "--logical_cores_for_ccl", dest="ccl_logical", action="store_true")
    a("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1")
    a("--master-port", "--master_port", dest="master_port", type=int, default=29500)
    a("--hostfile", default="")
    a("--extra-mpi-params", "--extra_mpi_params", dest="extra_mpi_params", default="")
    # auto-IPEX (refused: check_launcher)
    a("--auto-ipex", "--auto_ipex", dest="auto_ipex", action="store_true")
    a("--dtype", default="float32", choices=["float32", "bfloat16"])
    a("--auto-ipex-verbose", "--auto_ipex_verbose", dest="auto_ipex_verbose", action="store_true")
    a("--disable-ipex-graph-mode", "--disable_ipex_graph_mode", dest="disable_ipex_graph_mode",
      action="store_true")
    # deprecated spellings, applied over the current ones after parsing
    a("--nproc_per_node", dest="old_nprocs", type=int, default=-1)
    a("--more_mpi_params", dest="old_mpi_params", default="")
    a("--ncore_per_instance", dest="old_ncores", type=int, default=-1)
    a("--node_id", dest="old_node_id", type=int, default=-1)
    a("--core_list", dest="old_cores", default="")
    a("--logical_core_for_ccl", dest="old_ccl_logical", action="store_true")
    a("--use_logical_core", dest="old_logical", action="store_true")
    a("--log_path", dest="old_log_dir", default="")
    for flag in ("--enable_tcmalloc", "--enable_jemalloc", "--use_default_allocator",
                 "--disable_numactl", "--disable_taskset", "--disable_iomp", "--multi_instance",
                 "--distributed"):
        a(flag, action="store_true")
    args = p.parse_args(argv)
    for new, old, unset in (("nprocs", "old_nprocs", -1), ("extra_mpi_params", "old_mpi_params", ""),
                            ("ncores", "old_ncores", -1), ("cores", "old_cores", ""),
                            ("ccl_logical", "old_ccl_logical", False), ("logical", "old_logical", False),
                            ("log_dir", "old_log_dir", "")):
        if getattr(args, old) != unset:
            setattr(args, new, getattr(args, old))
    if args.old_node_id != -1:
        args.nodes = str(args.old_node_id)
    for flag, allocator in (("use_default_allocator", "default"), ("enable_jemalloc", "jemalloc"),
                            ("enable_tcmalloc", "tcmalloc")):
        if getattr(args, flag):
            args.memory_allocator = allocator
    if args.disable_numactl:
        args.task_manager = "taskset"
    if args.disable_taskset:
        args.task_manager = "numactl"
    return args


def check_launcher(launcher):
    many = [f for f, v in [("--distributed", launcher.distributed), ("--nnodes", launcher.nnodes),
                           ("--nprocs-per-node (--nproc_per_node)", launcher.nprocs),
                           ("--hostfile", launcher.hostfile)] if v]
    if many:
        raise Refused("%s: a distributed run is not mapped here (Intel's DDP lines run one "
                      "process per rank; bertbench's data parallel is `mpirun -np N bertbench "
                      "pretrain`, docs/distributed.md)" % many[0])
    if launcher.latency_mode and launcher.throughput_mode:
        raise Refused("--latency-mode and --throughput-mode: the launcher refuses both at once")
    auto = [f for f, v in [("--auto-ipex", launcher.auto_ipex),
                           ("--dtype=%s" % launcher.dtype, launcher.dtype != "float32"),
                           ("--auto-ipex-verbose", launcher.auto_ipex_verbose),
                           ("--disable-ipex-graph-mode", launcher.disable_ipex_graph_mode)] if v]
    if auto:
        raise Refused("%s: auto-IPEX rewrites the script's model (ipex.optimize, its --dtype) "
                      "before it runs; not mapped here (the scripts' own precision flags are)" % auto[0])
    if launcher.module or launcher.no_python:
        raise Refused("-m / --no-python: expected the path of %s" % " or ".join(SCRIPTS))
    if os.path.basename(launcher.program) not in SCRIPTS:
        raise Refused("%s: bertbench maps Intel's BERT-large scripts %s" % (
            launcher.program, " and ".join(SCRIPTS)))


def pool_name(ids):
    """The launcher's name for a pool: its CPUs in pool order, as a list or as "a-b" ranges (a
    single CPU too), whichever has fewer items, "," as "_"."""
    ranges = []
    for c in ids:
        if ranges and c == ranges[-1][1] + 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    text = (",".join(map(str, ids)) if len(ids) <= len(ranges)
            else ",".join("%d-%d" % (a, b) for a, b in ranges))
    return text.replace(",", "_")


def id_list(flag, text):
    """The ids of a launcher list ("0,2-3"; IPEX's parse_list_argument), sorted; a word that is
    neither an id nor a range a-b with a <= b is refused naming the flag."""
    ids = set()
    for elem in (e.strip() for e in text.strip().split(",") if text.strip()):
        ends = [x.strip() for x in elem.split("-")]
        if not all(x.isdigit() for x in ends) or len(ends) > 2 or int(ends[0]) > int(ends[-1]):
            raise Refused("%s=%s: expected ids and ranges a-b (a <= b), comma separated; found %r"
                          % (flag, text, elem))
        ids.update(range(int(ends[0]), int(ends[-1]) + 1))
    return sorted(ids)


def instance_pools(args):
    """The instances as the launcher cuts them (IPEX cpu_info.py gen_pools_ondemand): the listed
    cores or nodes (all by default), physical cores only unless --use-logical-cores, then
    --ncores-per-instance cores each (the first --ninstances of them), or --ninstances equal parts
    (one by default); --throughput-mode is one instance per NUMA node, --latency-mode 4 cores
    each."""
    machine = support.Machine()
    ncores, ninstances, logical, bind = (args.ncores, args.ninstances, args.logical,
                                         args.bind_numa_node)
    nodes_arg = args.nodes
    # The modes set the instances' sizes; IPEX 2.3 warns that --nodes-list no longer applies but
    # still cuts the pool from it (launcher_multi_instances.py launch), as here.
    if args.latency_mode:
        ncores, ninstances, logical = 4, 0, False
    if args.throughput_mode:
        ninstances, ncores, logical = len(machine.nodes()), 0, False
    # the launcher's asserts (cpu_info.py gen_pools_ondemand), after the modes set the sizes
    if ncores < 0:
        raise Refused("--ncores-per-instance=%d: Argument --ncores-per-instance cannot be a negative "
                      "value. (the launcher asserts)" % ncores)
    if ninstances < 0:
        raise Refused("--ninstances=%d: Argument --ninstances cannot be a negative value. (the "
                      "launcher asserts)" % ninstances)
    if args.cores:
        want = set(id_list("--cores-list", args.cores))
        cpus = [c for c in machine.cpus if c[0] in want]
        if len(cpus) != len(want):
            raise Refused("--cores-list=%s: CPUs %s are not available here" % (
                args.cores, support.cpulist(want - {c[0] for c in cpus})))
    else:
        nodes = id_list("--nodes-list", nodes_arg) or machine.nodes()
        missing = [n for n in nodes if n not in machine.nodes()]
        if missing:
            raise Refused("--nodes-list=%s: NUMA node %s has no CPU available here (nodes: %s)" % (
                nodes_arg, missing[0], ",".join(map(str, machine.nodes()))))
        cpus = [c for c in machine.cpus if c[1] in nodes]
    cores = {}
    for cpu, node, socket, core in cpus:
        cores.setdefault((socket, core), []).append((cpu, node))
    pool = []
    for key in sorted(cores, key=lambda k: min(cores[k])):
        pool += sorted(cores[key]) if logical else [min(cores[key])]
    groups = ([[c for c in pool if c[1] == n] for n in sorted({n for _, n in pool})] if bind
              else [pool])
    if ncores > 0:
        parts = [g[i * ncores:(i + 1) * ncores] for g in groups for i in range(len(g) // ncores)]
        if ninstances > len(parts) or not parts:
            raise Refused("%s: the pool has %d core(s) (the launcher asserts)" % (
                "--latency-mode (4 cores per instance)" if args.latency_mode else
                "--ncores-per-instance=%d --ninstances=%d" % (ncores, ninstances), len(pool)))
        if 0 < ninstances < len(parts):
            if args.strategy != "close":
                raise Refused("--strategy=%s: only the launcher's default, close (the first "
                              "instances), is mapped" % args.strategy)
            parts = parts[:ninstances]
    else:
        n = ninstances or 1
        if bind and n != len(groups):
            raise Refused("--bind-numa-node with %d instances over %d NUMA nodes: one instance "
                          "per node is mapped" % (n, len(groups)))
        size = len(pool) // n
        parts = groups if bind else [pool[i * size:(i + 1) * size] for i in range(n)]
        if size == 0:
            raise Refused("--ninstances=%d: more instances than the pool's %d core(s)" % (
                n, len(pool)))
    idx = list(range(len(parts)))
    if args.instance_idx.strip() not in ("", "-1"):
        try:
            idx = sorted(set(int(i) for i in args.instance_idx.split(",")))
        except ValueError:
            raise Refused("--instance-idx=%s: expected a comma list of indices" % args.instance_idx)
        if any(i < 0 or i >= len(parts) for i in idx):
            raise Refused("--instance-idx=%s: expected indices below %d" % (args.instance_idx,
                                                                            len(parts)))
    threads = os.environ.get("OMP_NUM_THREADS", "")  # the launcher keeps a value already set
    if threads and not (threads.isdigit() and int(threads) > 0):
        raise Refused("OMP_NUM_THREADS=%s: expected a positive number of threads" % threads)
    # bertbench refuses more threads than the CPUs it may use (IPEX's would run them on fewer CPUs)
    return [Instance(i, sorted(c for c, _ in parts[i]), sorted({n for _, n in parts[i]}),
                     pool_name([c for c, _ in parts[i]]),
                     min(int(threads), len(parts[i])) if threads else len(parts[i]))
            for i in idx]


def bertbench_binary():
    binary = os.environ.get("BERTBENCH") or os.path.join(REPO, "build", "bertbench")
    return binary if os.access(binary, os.X_OK) else "bertbench"


def bound(inst, binary, args, manager):
    """The command of one bertbench run of instance `inst`, bound as the launcher binds it with
    --multi-task-manager `manager` (auto: numactl where it is installed, else taskset; none: not
    bound)."""
    if manager == "none":
        return [binary] + args
    if manager in ("auto", "numactl") and shutil.which("numactl"):
        bind = ["numactl", "-C", support.cpulist(inst.cpus), "-m", ",".join(map(str, inst.nodes))]
    else:
        bind = ["taskset", "-c", support.cpulist(inst.cpus)]
    return bind + [binary] + args


class Logs:
    """stdout, the launcher's own log and each instance's log (when --log-dir is given)."""

    def __init__(self, launcher, stamp, instances):
        self.lock, self.own, self.inst = threading.Lock(), None, [None] * len(instances)
        if launcher.log_dir:
            log_dir = os.path.dirname(launcher.log_dir + "/")
            os.makedirs(log_dir, exist_ok=True)
            prefix = os.path.join(log_dir, "%s_%s" % (launcher.log_prefix, stamp))
            self.own = open(prefix + "_instances.log", "w")
            self.inst = [open("%s_instance_%d_cores_%s.log" % (prefix, inst.index, inst.name), "w")
                         for inst in instances]

    def say(self, line, files):
        line = line if line.endswith("\n") else line + "\n"
        with self.lock:
            for f in [sys.stdout] + files:
                if f:
                    f.write(line)
                    f.flush()

    def close(self):
        for f in [self.own] + self.inst:
            if f:
                f.close()


def run_all(commands, logs):
    """Runs the commands at once, each one's output passed on line by line to stdout and its log
    files as it comes; the first non-zero status (0 when all succeeded)."""
    procs, pumps = [], []
    for words, files in commands:
        logs.say("%s: running: %s" % (PROG, " ".join(shlex.quote(w) for w in words)), [logs.own])
        try:
            procs.append(subprocess.Popen(words, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        except OSError as e:
            logs.say("%s: error: %s: cannot run it: %s (hint: BERTBENCH names the binary)" % (
                PROG, words[0], e.strerror), [logs.own])
            for p in procs:  # the ones started: stopped, their output drained
                p.kill()
            for t in pumps:
                t.join()
            for p in procs:
                p.wait()
            return 1

        def pump(proc=procs[-1], files=files):
            for line in proc.stdout:
                logs.say(line, files)

        pumps.append(threading.Thread(target=pump))
        pumps[-1].start()
    for t in pumps:
        t.join()
    return next((s for s in [p.wait() for p in procs] if s != 0), 0)


def main(argv):
    stamp = time.strftime("%Y%m%d%H%M%S")
    try:
        launcher = parse_launcher(argv)
        check_launcher(launcher)
        words = launcher.program_args
        words = words[1:] if words[:1] == ["--"] else words
        instances = instance_pools(launcher)
        plan = SCRIPTS[os.path.basename(launcher.program)].build(words, instances, stamp)
    except Refused as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    binary = bertbench_binary()
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if omp and any(inst.threads < int(omp) for inst in instances):
        plan.notes.append("OMP_NUM_THREADS=%s: more threads than an instance's CPUs; each instance runs "
                          "as many threads as it has CPUs (%s), as bertbench takes no more threads than "
                          "the CPUs it may use" % (omp, ", ".join(str(i.threads) for i in instances)))
    made = not os.path.exists(plan.run_dir)

    def remove_ours():  # a run that did not start leaves no directory of ours behind
        if made and os.path.isdir(plan.run_dir) and \
                set(os.listdir(plan.run_dir)) <= {os.path.basename(p) for p in plan.writes}:
            for path in plan.writes:
                if os.path.exists(path):
                    os.remove(path)
            os.rmdir(plan.run_dir)

    try:
        os.makedirs(plan.run_dir, exist_ok=True)
        for path, text in plan.writes.items():
            with open(path, "w") as f:
                f.write(text)
    except OSError as e:
        remove_ours()
        print("%s: error: --output_dir: cannot write %s there (%s)" % (
            PROG, e.filename or plan.run_dir, e.strerror), file=sys.stderr)
        return 1
    try:
        logs = Logs(launcher, stamp, instances)
    except OSError as e:
        remove_ours()
        print("%s: error: --log-dir=%s: cannot write the launcher's logs there (%s: %s)" % (
            PROG, launcher.log_dir, e.filename, e.strerror), file=sys.stderr)
        return 1
    ignored = [f for f, v in [("--memory-allocator=" + launcher.memory_allocator,
                               launcher.memory_allocator != "auto"),
                              ("--omp-runtime=" + launcher.omp_runtime, launcher.omp_runtime != "auto"),
                              ("--benchmark", launcher.benchmark)] if v]
    if ignored:
        plan.notes.append("launcher flags with no effect on bertbench (its own allocator): " +
                          ", ".join(ignored))
    for n in plan.notes:
        logs.say("%s: %s" % (PROG, n), [logs.own])
    status = 0
    for args in plan.setup:
        status = status or run_all([([binary] + args, [logs.own])], logs)
    if status == 0:
        status = run_all([(bound(instances[i], binary, args, launcher.task_manager), [logs.inst[i]])
                          for i, streams in enumerate(plan.streams) for args in streams], logs)
    if status != 0:
        remove_ours()
    for i in range(len(instances) if status == 0 else 0):
        try:
            lines, own = plan.finish(i, binary)
        except Refused as e:
            logs.say("%s: error: %s" % (PROG, e), [logs.own])
            status = 1
            break
        for line in lines:
            logs.say(line, [logs.inst[i]])
        for line in own:
            logs.say("%s: %s" % (PROG, line), [logs.own])
    logs.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
