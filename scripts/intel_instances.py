"""Intel model zoo launcher's multi-instance inference (`--numa-cores-per-instance`) for BERT-large
SQuAD, as benchmarks/common/base_model_init.py's run_numactl_multi_instance runs it, with one
`bertbench bench` per instance: the half of scripts/launch_benchmark.py that cuts the CPUs, starts
the instances, writes Intel's log files and the lines its quickstarts grep
(inference_realtime_multi_instance.sh: 4 cores each; inference_throughput_multi_instance.sh:
`socket`, one socket's cores each; both sum every instance's `Total throughput (examples/sec): X`).

Intel's rules (IntelAI/models 02a1c531): each NUMA node's CPU list is the first
sockets x cores-per-socket / nodes CPUs numactl lists for it (its physical cores under Linux's
numbering); without --socket-id the nodes' lists are joined and cut into consecutive groups of N
CPUs (a group may span two nodes), with --socket-id only that node's list; a remainder shorter
than N is left idle (`NOTE: Skipping remainder of R cores for instance k`); `socket` means N =
cores per socket. Each instance runs `OMP_NUM_THREADS=... numactl --localalloc
--physcpubind=<its CPUs> <command with --output-dir replaced by <out>/instance_<k>>`, all at once,
its output appended to <out>/<model>_<precision>_inference_bs<B>_cores<N>_instance<k>.log after
the command line and a blank line; then <...>_all_instances.log joins them in order.
"""
import os
import shlex
import shutil
import subprocess

import intel_launch_support as support
from intel_launch_support import Refused


def cores_per_instance(value):
    """Intel's --numa-cores-per-instance type: 'socket' (any case) or a positive integer."""
    if value.strip().lower() == "socket":
        return "socket"
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise Refused("--numa-cores-per-instance=%s: Invalid number of cores per instance (%s). The "
                  "value must be a positive integer or 'socket' (Intel's launcher rejects it)" % (
                      value, value))


def check(args, machine, n):
    """Intel's base_benchmark_util checks of the value against the machine (launch_benchmark.py
    refuses it with MPI before)."""
    if n == "socket":
        return
    if args.socket_id != -1 and n > machine.cores_per_socket:
        raise Refused("The number of --numa-cores-per-instance (%d) cannot exceed the number of "
                      "cores per socket %d when a single socket (--socket-id %d) is being used. "
                      "(Intel's launcher raises this ValueError)" % (
                          n, machine.cores_per_socket, args.socket_id))
    system = machine.cores_per_socket * machine.socket_count
    if n > system:
        raise Refused("The number of --numa-cores-per-instance (%d) cannot exceed the number of "
                      "system cores (%d). (Intel's launcher raises this ValueError)" % (n, system))


def groups(machine, socket_id, n, notes):
    """The CPUs of each instance, Intel's way."""
    nodes = machine.nodes()
    per_node = int(machine.socket_count * machine.cores_per_socket / max(len(nodes), 1))
    lists = {node: sorted(c[0] for c in machine.cpus if c[1] == node)[:per_node]
             for node in nodes}
    cpus = lists.get(socket_id, []) if socket_id != -1 else [c for node in nodes
                                                             for c in lists[node]]
    out = [cpus[i:i + n] for i in range(0, len(cpus) - n + 1, n)]
    if len(cpus) % n:
        notes.append("NOTE: Skipping remainder of %d cores for instance %d (Intel's note: those "
                     "CPUs stay idle)" % (len(cpus) % n, len(out)))
    if not out:
        raise Refused("--numa-cores-per-instance=%d: no instance fits in the %d CPU(s) Intel's "
                      "rule lists here (its launcher then runs nothing)" % (n, len(cpus)))
    return out


def plan(args, machine, cmd, out, precision_label, batch, want, why, fit, binary, notes):
    """The instances: [(words, log path, bench JSON path)] and the combined log's path.
    `cmd`: the bertbench command of one run writing to `out`; `want`/`why`: the intra-op threads
    Intel gives each instance (--num-intra-threads, else its cores); `fit(want, why, cpus)`: the
    threads bertbench can run there."""
    n = cores_per_instance(args.numa_cores_per_instance)
    check(args, machine, n)
    size = machine.cores_per_socket if n == "socket" else n
    if n == "socket":
        notes.append("--numa-cores-per-instance=socket: %d cores per instance (the cores per "
                     "socket, as Intel's launcher resolves it outside a cgroup-v1 cpuset)" % size)
    cut = groups(machine, args.socket_id, size, notes)
    if want is None:
        want, why = size, "Intel's default with --numa-cores-per-instance: the instance's cores"
    if args.num_cores != -1:
        notes.append("--num-cores=%d: no effect with --numa-cores-per-instance (Intel's "
                     "multi-instance runs ignore it)" % args.num_cores)
    if os.environ.get("OMP_NUM_THREADS"):  # --num-inter-threads is in the launcher's no-effect list
        notes.append("OMP_NUM_THREADS: no effect (bertbench runs one thread pool of --threads per instance)")
    numactl = shutil.which("numactl")
    if not numactl:
        notes.append("numactl not found: taskset binds each instance's CPUs (Intel's launcher "
                     "runs nothing without numactl)")
    stem = os.path.join(out, "%s_%s_inference_bs%d_cores%d" % (
        args.model_name, precision_label, batch, size))
    runs = []
    for k, cpus in enumerate(cut):
        threads, clause = fit(want, why, cpus)
        if clause and k == 0:
            notes.append("--threads=%d per instance: %s" % (threads, clause))
        here = os.path.join(out, "instance_%d" % k)
        bind = (["numactl", "--localalloc", "--physcpubind=" + ",".join(map(str, cpus))]
                if numactl else ["taskset", "-c", ",".join(map(str, cpus))])
        words = bind + [binary] + [w.replace(out, here) for w in cmd] + ["--threads=%d" % threads]
        runs.append((words, "%s_instance%d.log" % (stem, k),
                     os.path.join(here, "bench_squad_infer.json")))
    return runs, stem + "_all_instances.log"


def refuse_nonempty(out):
    """Intel's BERT model_init.py: multi-instance runs need an empty --output-dir."""
    if os.path.isdir(out) and os.listdir(out):
        raise Refused("ERROR: The output directory (%s) is not empty. BERT multi-instance runs "
                      "require empty output directories in order to prevent conflicts with files "
                      "generated by previous runs. Please provide an empty folder using the "
                      "--output-dir argument. (Intel's model_init.py exits on it)" % out)


def run(runs, combined, in_graph, say):
    """Starts every instance at once, waits for all, then appends Intel's lines to each log and
    writes the combined log. Returns (status: the first non-zero, the instances' Total
    throughput figures)."""
    procs = []
    for words, log, json_path in runs:
        os.makedirs(os.path.dirname(json_path), exist_ok=True)
        with open(log, "w") as f:
            f.write(" ".join(shlex.quote(w) for w in words) + "\n\n")
        with open(log, "a") as f:
            procs.append(subprocess.Popen(words, stdout=f, stderr=subprocess.STDOUT))
    statuses = [p.wait() for p in procs]
    figures = []
    for (words, log, json_path), status in zip(runs, statuses):
        if status != 0:  # its error line, which is in the log
            err = next((l for l in reversed(support.read_text(log).splitlines()) if "error:" in l), "")
            say("instance %s failed (exit %d)%s" % (log, status, ": " + err if err else ""))
            continue
        point = support.first_bench_point(json_path)
        lines = support.inference_lines(point, in_graph) if point else []
        with open(log, "a") as f:
            f.write("".join(line + "\n" for line in lines))
        figures += [float(line.rsplit(" ", 1)[1]) for line in lines
                    if line.startswith("Total throughput")]
    with open(combined, "w") as f:
        for _, log, _ in runs:
            f.write(support.read_text(log))
    return next((s for s in statuses if s != 0), 0), figures
