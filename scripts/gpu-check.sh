#!/usr/bin/env bash
# The one prepared visit to a GPU machine (docs/gpu.md): unpacks what scripts/gpu-pack.sh built
# here, records the machine's facts, runs the backend conformance test on the GPU, trains on the
# GPU against the CPU (gpu-train-check.sh), measures training and inference steps, the backend's
# GEMM rate (the ceiling MFU is read against) and the PyTorch peer, and writes all of it to one
# folder. Three runs of the earlier set of steps took 189-205 s on an H100; the training check, the
# training bench and the attention kernels' tests and bench added since (not yet run) should add
# 4-5 minutes.
# The run tool's limit is 600 s a command: with SKIP_PEER=1 the peer's 5 minutes of caps are left out.
# Usage (on the GPU machine, from the repository root): scripts/gpu-check.sh [OUT_DIR]
#   PEER_ARGS="..." adds to the PyTorch peer's eager sweep, COMPILE_ARGS replaces its compiled
#   subset; SKIP_PEER=1 leaves the peer out.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
[[ $# -le 1 && "${1:-}" != -* ]] || { echo "gpu-check: expected [OUT_DIR] (--help), got $*" >&2; exit 2; }
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-gpu-out}}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
status=0
step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }

step facts
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv || status=1
command -v nvcc >/dev/null && nvcc --version | tail -2
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
  "cudnn", torch.backends.cudnn.version(), "transformers", transformers.__version__)' || true
uname -r; nproc; grep -m1 'model name' /proc/cpuinfo
# The directory of library $1: the CUDA toolkit's, else a pip wheel's (nvidia/<subdir>/lib for each
# further argument); "" when none has it.
lib_dir() {
  local name=$1 d; shift
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(python3 -c 'import nvidia, os, sys; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in sys.argv[1:]))' "$@" 2>/dev/null); do
    if [[ -e $d/$name ]]; then echo "$d"; return; fi
  done
}
CUBLAS_DIR=$(lib_dir libcublasLt.so.13 cu13 cublas)  # cuBLASLt 13
echo "libcublasLt.so.13: ${CUBLAS_DIR:-not found}"
NCCL_DIR=$(lib_dir libnccl.so.2 nccl cu13)  # NCCL, loaded at run time by the CUDA backend's collectives
echo "libnccl.so.2: ${NCCL_DIR:-not found}"
# with NCCL there, the collectives test must run rather than skip
[[ -n $NCCL_DIR ]] && export BB_EXPECT_NCCL=1

step unpack
BB=/tmp/bertbench-gpu
rm -rf "$BB" && mkdir -p "$BB"
if ! tar -C "$BB" -xJf gpu-pack/bundle.tar.xz; then
  echo "gpu-check: no gpu-pack/bundle.tar.xz (run scripts/gpu-pack.sh first and carry gpu-pack)"; exit 2
fi
export LD_LIBRARY_PATH="$BB/lib${CUBLAS_DIR:+:$CUBLAS_DIR}${NCCL_DIR:+:$NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for b in "$BB"/bin/*; do ldd "$b" | grep -i "not found" && status=1; done

step "bertbench version (its backends)"
"$BB/bin/bertbench" version > "$OUT/version.json" || status=1
python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["system_info"]["backends"], indent=1))' \
  "$OUT/version.json" || true

step "backend conformance (CPU and CUDA against the double reference)"
timeout 240 "$BB/bin/test_backend" --gtest_output="json:$OUT/backend_ops.json" 2>&1 | grep -v '^\[       OK\|^\[ RUN' || status=1

step "the fused attention's CUDA-core kernel with bf16 operands too (BB_CUDA_FLASH=cores; the tensor cores' is the default)"
BB_CUDA_FLASH=cores timeout 60 "$BB/bin/test_backend" --gtest_filter='All/BackendOps.FlashAttentionAcrossTiles/cuda' \
  --gtest_output="json:$OUT/backend_flash_cores.json" 2>&1 | grep -v '^\[       OK\|^\[ RUN' || status=1

step "the BERT engine on the CUDA backend against the CPU engine (one pretraining and one SQuAD step; materialized and fused attention), and its bf16 against PyTorch's CUDA autocast"
BB_SOURCE_DIR=$PWD BB_TORCH_PYTHON=$(command -v python3) timeout 150 "$BB/bin/test_model" \
  --gtest_filter='*EngineCuda.*:EngineBackend.*:Parity.Bf16OnTheGpu*' 2>&1 | grep -v '^\[ RUN' || status=1

step "training on the GPU against the CPU: pretraining curves, checkpoints across devices, SQuAD answers"
timeout 420 bash scripts/gpu-train-check.sh "$BB/bin/bertbench" "$BB/data" "$OUT" || status=1

step "bertbench bench --mode=train --device=cuda --profile: training steps on the GPU, per-op times from CUDA events (BERT-base, seq 128)"
timeout 150 "$BB/bin/bertbench" bench --mode=train --device=cuda --model=base --seq_len=128 \
  --batch_size=32 --dtype=bf16,fp32 --steps=10 --warmup=3 --threads=4 --json="$OUT/bench_train.json" \
  --profile --profile_svg="$OUT/bench_train_profile.svg" || status=1

step "attention kernels on the GPU: a bf16 training step with each (BERT-base, seq 128 and 512, batch 16; fused: tensor cores, fused-cores: CUDA cores)"
for att in materialized fused fused-cores; do
  BB_ATTENTION=${att%-cores} BB_CUDA_FLASH=$([[ $att == *-cores ]] && echo cores || echo tensor) timeout 90 \
    "$BB/bin/bertbench" bench --mode=train --device=cuda --model=base --seq_len=128,512 --batch_size=16 --dtype=bf16 \
    --steps=5 --warmup=2 --threads=4 --json="$OUT/bench_attention_$att.json" || status=1
done

step "scaling model: 8 GPUs from the measured step (scripts/mpi-scaling-model.py; NVLink 4 ~3600 Gb/s per GPU, NDR 400 Gb/s)"
python3 - "$OUT/bench_train.json" <<'PY' || status=1
import json, subprocess, sys
for p in json.load(open(sys.argv[1]))["points"]:
    if p["mode"] == "train" and p["dtype"] == "bf16":
        step_s = p["batch_size"] / p["sequences_per_second"]
        print(f"measured bf16 step: {step_s:.4f} s for batch {p['batch_size']} (BERT-base seq {p['seq_len']})")
        subprocess.run([sys.executable, "scripts/mpi-scaling-model.py", "--models=base",
                        f"--step_s=base={step_s}", f"--batch={p['batch_size']}", "--nodes=8",
                        "--gbps=3600,400"], check=True)
PY

step "bertbench bench --mode=infer --device=cuda: the engine on the GPU (BERT-base, -large; seq 128)"
timeout 240 "$BB/bin/bertbench" bench --mode=infer --device=cuda --model=base,large --seq_len=128 \
  --batch_size=1,8,64 --dtype=bf16,fp32 --steps=10 --warmup=3 --threads=4 || status=1

step "GEMM rate of the CUDA backend (cuBLASLt)"
timeout 150 "$BB/bin/backend_gemm" --device=cuda --repeats=3 --min_time=0.3 | tee "$OUT/gemm.jsonl" || status=1
echo "-- bertbench bench --mode=gemm --device=cuda (BERT-large's linear shapes, 4096 tokens)"
timeout 120 "$BB/bin/bertbench" bench --mode=gemm --device=cuda --model=large --dtype=bf16,fp32 --gemm_reps=3 \
  --json="$OUT/bench_gemm.json" || status=1
echo "-- the same, bf16, with cuBLASLt's candidates timed (CudaOptions::gemm_autotune)"
timeout 150 "$BB/bin/backend_gemm" --device=cuda --dtype=bf16 --autotune --repeats=3 --min_time=0.3 \
  | tee "$OUT/gemm_autotune.jsonl" || status=1
python3 - <<'PY' || true
import torch, time
for dt in (torch.bfloat16, torch.float32):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(8192, 8192, device="cuda", dtype=dt) - 0.5
    b = torch.rand(8192, 8192, device="cuda", dtype=dt) - 0.5
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter(); n = 20 if dt == torch.bfloat16 else 3
    for _ in range(n): a @ b
    torch.cuda.synchronize(); s = time.perf_counter() - t
    print(f"torch {dt} 8192^3: {2 * 8192**3 * n / s / 1e12:.1f} TFLOP/s")
PY

if [[ ${SKIP_PEER:-0} != 1 ]]; then
  # eager: every default point (about a minute); torch.compile: BERT-base seq 128 only by default
  # (each whole-model compile takes a minute or so; COMPILE_ARGS widens it).
  step "PyTorch peer, eager (bench/peer/torch_gpu_bench.py)"
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/peer/torch_gpu_bench.py --variant=eager ${PEER_ARGS:-} \
    --json="$OUT/torch_eager.json" || status=1
  step "PyTorch peer, torch.compile"
  PYTHONUNBUFFERED=1 timeout 170 python3 bench/peer/torch_gpu_bench.py --variant=compile \
    ${COMPILE_ARGS:---model=base --seq_len=128} --json="$OUT/torch_compile.json" || status=1
fi
step "done, status $status"
exit $status
