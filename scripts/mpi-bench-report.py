#!/usr/bin/env python3
"""Summarises scripts/mpi-bench.sh's JSON files (argv[1], default docs/perf-mpi) as Markdown on
stdout: the one-machine comparison (mpirun -np 2 x 1 thread against one process x 2 threads, per
round and the median ratio) and the two-namespace-host rows (throughput, scaling efficiency,
bytes all-reduced per step, bus bandwidth, exposed communication)."""
import glob
import json
import os
import statistics
import sys


def point(path):
    with open(path) as f:
        j = json.load(f)
    return j["points"][0], j


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "docs/perf-mpi"
    ones = sorted(glob.glob(os.path.join(out, "local-1proc-r*.json")))
    twos = sorted(glob.glob(os.path.join(out, "local-2ranks-r*.json")))
    if not ones or len(ones) != len(twos):
        sys.exit(f"mpi-bench-report: expected as many local-1proc-r*.json as local-2ranks-r*.json in {out}")
    first, meta = point(ones[0])
    print(f"CPU: {meta['system_info'].get('cpu_model', '?')}; {meta['system_info'].get('cpu_cores', '?')} CPUs; "
          f"commit {meta['build_info'].get('git_commit', '?')}\n")
    print(f"### One machine: `mpirun -np 2` x 1 thread against one process x 2 threads "
          f"(BERT-{first['model']}, seq {first['seq_len']}, global batch {first['batch_size']}, training)\n")
    print("| round | 1 process, 2 threads (seq/s) | 2 ranks x 1 thread (seq/s) | ratio | exposed comm | all-reduce per step |")
    print("|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for k, (a, b) in enumerate(zip(ones, twos), 1):
        pa, _ = point(a)
        pb, _ = point(b)
        m = pb["mpi"]
        r = pb["sequences_per_second"] / pa["sequences_per_second"]
        ratios.append(r)
        print(f"| {k} | {pa['sequences_per_second']:.2f} | {pb['sequences_per_second']:.2f} | {r:.3f} | "
              f"{100 * m['exposed_comm_fraction']:.1f}% | {m['allreduce_bytes_per_step'] / 1e6:.0f} MB |")
    print(f"\nMedian ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"goal >= 0.95.\n")
    hosts = sorted(glob.glob(os.path.join(out, "netns-*.json")))
    if not hosts:
        print("Two-host rows: not measured (network namespaces unavailable).")
        return
    print("### Two network-namespace hosts, one rank x 1 thread each, TCP through a bridge\n")
    print("| model | global batch | total seq/s | 1 rank seq/s | scaling efficiency | bytes per step | "
          "all-reduce time | bus bandwidth | step compute | exposed comm |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for h in hosts:
        p, _ = point(h)
        m = p["mpi"]
        one = m.get("sequences_per_second_1rank")
        eff = m.get("scaling_efficiency")
        print(f"| {p['model']} | {p['batch_size']} | {m['sequences_per_second_total']:.2f} | "
              f"{one:.2f} | {100 * eff:.1f}% | {m['allreduce_bytes_per_step'] / 1e6:.1f} MB | "
              f"{m['allreduce_ms_median']:.0f} ms | {m['allreduce_bus_gbps']:.2f} GB/s | "
              f"{m['step_ms_compute']:.0f} ms | {100 * m['exposed_comm_fraction']:.1f}% |"
              if one is not None and eff is not None else
              f"| {p['model']} | {p['batch_size']} | {m['sequences_per_second_total']:.2f} | - | - | "
              f"{m['allreduce_bytes_per_step'] / 1e6:.1f} MB | {m['allreduce_ms_median']:.0f} ms | "
              f"{m['allreduce_bus_gbps']:.2f} GB/s | {m['step_ms_compute']:.0f} ms | "
              f"{100 * m['exposed_comm_fraction']:.1f}% |")


if __name__ == "__main__":
    main()
