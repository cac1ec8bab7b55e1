#!/usr/bin/env python3
"""Predicted data-parallel scaling efficiency of BERT pretraining across nodes (docs/distributed.md,
"Scaling model").

Per optimizer step every node computes its own batch (weak scaling: the per-node batch stays fixed,
the global batch grows with N) and then all-reduces the fp32 gradients. A ring all-reduce of B bytes
over N nodes sends and receives 2(N-1)/N x B bytes per node, so

    t_comm  = 2(N-1)/N x B / bandwidth  (+ 2(N-1) x buckets x latency, with --latency_us)
    exposed = t_comm                                   without overlap
            = max(0, t_comm - overlap x t_compute)     when the all-reduce runs during the backward
    efficiency = t_compute / (t_compute + exposed)

B is the gradient buffer bertbench all-reduces: every tensor of the pretraining ParamTable
(src/model/param_table.cpp), each padded to 16 floats, x 4 bytes. t_compute is a measured compute
time per step on one node at the per-node batch (no communication), given with --step_s; a model
without one gets the measured one scaled by the ratio of training FLOPs per sequence (the engine's
forward_flops formula, docs/engine.md, at full-length sequences) and is marked "derived".

Example (the per-step time from a bench run: batch_size / sequences_per_second of a train point):
    scripts/mpi-scaling-model.py --step_s base=7.39 --batch 32
    scripts/mpi-scaling-model.py --step_s base=0.9,large=2.8 --nodes 8,32,256 --gbps 25,100
    scripts/mpi-scaling-model.py --bert_config_file my_config.json --step_s my_config=1.2
"""
import argparse
import json
import sys

# The presets of src/model/config.cpp (BertConfig::preset): L, H, A, I; vocab 30522, 512
# positions, 2 token types.
PRESETS = {
    "tiny": (2, 128, 2, 512),
    "mini": (4, 256, 4, 1024),
    "small": (4, 512, 8, 2048),
    "medium": (8, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
ALIGN = 16  # floats: each tensor's offset in the flat buffer is 64-byte aligned


def preset(name):
    L, H, A, I = PRESETS[name]
    return {"num_hidden_layers": L, "hidden_size": H, "num_attention_heads": A,
            "intermediate_size": I, "vocab_size": 30522, "max_position_embeddings": 512,
            "type_vocab_size": 2}


def tensor_sizes(c):
    """Sizes of the pretraining ParamTable's tensors, in its order (param_table.cpp)."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    sizes = [V * H, c.get("type_vocab_size", 2) * H, c.get("max_position_embeddings", 512) * H, H, H]
    for _ in range(c["num_hidden_layers"]):
        sizes += [H * H, H] * 3                      # query, key, value
        sizes += [H * H, H, H, H]                    # attention output dense, LayerNorm
        sizes += [H * I, I, I * H, H, H, H]          # intermediate, output dense, LayerNorm
    sizes += [H * H, H]                              # pooler
    sizes += [H * H, H, H, H, V, 2 * H, 2]           # MLM transform + LayerNorm, output bias, NSP
    return sizes


def parameters(c):
    return sum(tensor_sizes(c))


def reduced_bytes(c):
    return 4 * sum((s + ALIGN - 1) // ALIGN * ALIGN for s in tensor_sizes(c))


def train_flops_per_sequence(c, seq, preds):
    """3 x forward_flops (docs/engine.md) of one full-length sequence."""
    L, H, I, V = c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    fwd = L * (2 * seq * (4 * H * H + 2 * H * I) + 4 * seq * seq * H)
    fwd += 2 * H * H + 4 * H + 2 * preds * H * H + 2 * preds * H * V
    return 3 * fwd


def parse_list(text, kind, what):
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sys.exit(f"mpi-scaling-model: {what}: expected a comma-separated list of numbers, got \"{text}\"")
    if not values or any(v <= 0 for v in values):
        sys.exit(f"mpi-scaling-model: {what}: expected positive numbers, got \"{text}\"")
    return values


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__[__doc__.index("Per optimizer"):])
    ap.add_argument("--models", default="base,large", help="presets (tiny ... large), comma list")
    ap.add_argument("--bert_config_file", action="append", default=[],
                    help="a bert_config.json to include (named by its file stem); repeatable")
    ap.add_argument("--step_s", required=True,
                    help="measured compute seconds per step on one node: MODEL=S[,MODEL=S...]")
    ap.add_argument("--batch", type=int, default=0,
                    help="per-node batch of those steps (only printed, for the record)")
    ap.add_argument("--seq_len", type=int, default=128, help="for the FLOP ratio of derived times")
    ap.add_argument("--max_predictions", type=int, default=20, help="for the FLOP ratio of derived times")
    ap.add_argument("--nodes", default="8,32,256", help="node counts, comma list")
    ap.add_argument("--gbps", default="25,100", help="link bandwidths in Gb/s, comma list")
    ap.add_argument("--overlap", type=float, default=2.0 / 3.0,
                    help="fraction of the compute time the all-reduce can hide behind (the backward "
                         "is about 2/3 of a step); 0 = no overlap column")
    ap.add_argument("--latency_us", type=float, default=0.0,
                    help="per-message latency (us), added as 2(N-1) x buckets x latency")
    ap.add_argument("--bucket_mb", type=float, default=4.0,
                    help="all-reduce bucket size in MiB (bench --bucket_mb; bertbench's default 4)")
    ap.add_argument("--target", type=float, default=0.9,
                    help="efficiency for the 'compute time needed' column")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of Markdown")
    a = ap.parse_args()

    configs = {}
    for name in [m.strip() for m in a.models.split(",") if m.strip()]:
        if name not in PRESETS:
            sys.exit(f"mpi-scaling-model: --models: unknown preset \"{name}\" (expected one of {', '.join(PRESETS)})")
        configs[name] = preset(name)
    for path in a.bert_config_file:
        try:
            with open(path) as f:
                c = json.load(f)
            for key in ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size"):
                if not isinstance(c.get(key), int) or c[key] <= 0:
                    raise ValueError(f"{key}: expected a positive integer, got {c.get(key)!r}")
        except (OSError, ValueError) as e:
            sys.exit(f"mpi-scaling-model: --bert_config_file {path}: {e}")
        configs[path.rsplit("/", 1)[-1].rsplit(".", 1)[0]] = c
    if not configs:
        sys.exit("mpi-scaling-model: no model (--models or --bert_config_file)")

    measured = {}
    for item in a.step_s.split(","):
        name, _, value = item.partition("=")
        name = name.strip()
        try:
            measured[name] = float(value)
        except ValueError:
            sys.exit(f"mpi-scaling-model: --step_s: expected MODEL=SECONDS, got \"{item}\"")
        if measured[name] <= 0:
            sys.exit(f"mpi-scaling-model: --step_s: {name}: expected seconds > 0, got {value}")
        if name not in configs:
            if name in PRESETS:
                configs[name] = preset(name)
            else:
                sys.exit(f"mpi-scaling-model: --step_s: \"{name}\" is not a model of --models or --bert_config_file")
    nodes = parse_list(a.nodes, int, "--nodes")
    gbps = parse_list(a.gbps, float, "--gbps")
    if not 0 <= a.overlap <= 1:
        sys.exit(f"mpi-scaling-model: --overlap: expected a fraction in [0, 1], got {a.overlap}")
    if not 0 < a.target < 1:
        sys.exit(f"mpi-scaling-model: --target: expected a fraction in (0, 1), got {a.target}")

    # A model without a measured time: the first measured model's time x the FLOP ratio.
    ref = next(iter(measured))
    ref_flops = train_flops_per_sequence(configs[ref], a.seq_len, a.max_predictions)
    rows = []
    for name, c in configs.items():
        if name in measured:
            step, how = measured[name], "measured"
        else:
            step = measured[ref] * train_flops_per_sequence(c, a.seq_len, a.max_predictions) / ref_flops
            how = f"derived from {ref} by FLOPs"
        B = reduced_bytes(c)
        buckets = max(1, -(-B // int(a.bucket_mb * (1 << 20))))
        for g in gbps:
            for n in nodes:
                comm = 2 * (n - 1) / n * B / (g * 1e9 / 8) + 2 * (n - 1) * buckets * a.latency_us * 1e-6
                eff_none = step / (step + comm)
                exposed = max(0.0, comm - a.overlap * step)
                eff_overlap = step / (step + exposed)
                # compute time per step needed for the target efficiency
                need_none = comm * a.target / (1 - a.target)
                need_overlap = comm / (a.overlap + (1 - a.target) / a.target)
                rows.append({"model": name, "parameters": parameters(c), "bytes": B,
                             "step_s": step, "step_source": how, "gbps": g, "nodes": n,
                             "allreduce_s": comm, "efficiency_no_overlap": eff_none,
                             "efficiency_overlap": eff_overlap,
                             "step_s_for_target_no_overlap": need_none,
                             "step_s_for_target_overlap": need_overlap})
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"Ring all-reduce 2(N-1)/N x bytes / bandwidth"
          + (f" + 2(N-1) x buckets x {a.latency_us:g} us" if a.latency_us else "")
          + f"; overlap = {a.overlap:.2f} of the step" + (f"; per-node batch {a.batch}" if a.batch else "")
          + f"; target efficiency {a.target:.0%}.\n")
    for name in configs:
        r0 = next(r for r in rows if r["model"] == name)
        print(f"- {name}: {r0['parameters']:,} parameters, {r0['bytes'] / 1e6:.1f} MB all-reduced per step, "
              f"compute {r0['step_s']:.3f} s per step ({r0['step_source']})")
    print()
    t = f"{a.target:.0%}"
    print(f"| model | Gb/s | nodes | all-reduce (s) | efficiency, no overlap | efficiency, overlapped "
          f"| compute s/step for {t}, no overlap | for {t}, overlapped |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['gbps']:g} | {r['nodes']} | {r['allreduce_s']:.3f} "
              f"| {r['efficiency_no_overlap']:.1%} | {r['efficiency_overlap']:.1%} "
              f"| {r['step_s_for_target_no_overlap']:.2f} | {r['step_s_for_target_overlap']:.2f} |")


if __name__ == "__main__":
    main()
