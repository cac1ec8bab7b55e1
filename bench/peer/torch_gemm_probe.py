#!/usr/bin/env python3
"""GFLOP/s of torch.matmul (fp32) at BERT-base's dense-layer shapes, in whatever BLAS environment
it is started in (LD_LIBRARY_PATH, OPENBLAS_CORETYPE, OMP_WAIT_POLICY): how fast PyTorch's own GEMM
is, apart from the rest of its step (docs/PERFORMANCE-peers-strongest-zen5.md).

  torch_gemm_probe.py [--threads=2] [--tokens=4096] [--reps=10]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for k, n in ((768, 3072), (3072, 768), (768, 768)):  # FFN in, FFN out, Q/K/V/attention out
        x, w = torch.randn(a.tokens, k), torch.randn(k, n)
        for _ in range(2):
            torch.matmul(x, w)
        t = time.perf_counter()
        for _ in range(a.reps):
            torch.matmul(x, w)
        dt = (time.perf_counter() - t) / a.reps
        print(f"{a.tokens} x {k} x {n}: {2 * a.tokens * k * n / dt / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
