#!/usr/bin/env bash
# The one prepared visit to a GPU machine (docs/gpu.md): unpacks what scripts/gpu-pack.sh built
# here, records the machine's facts, and then, most important first, each step limited by what is
# left of the visit: the backend conformance test on the GPU, the engine on the GPU against the CPU
# engine (and its bf16 against PyTorch's autocast), training steps of bertbench and the PyTorch
# peer at the same points, alternated (with a per-op profile of a BERT-large step), inference,
# training on the GPU against the CPU (gpu-train-check.sh), the backend's GEMM rate (the ceiling
# MFU is read against), each attention kernel, the compiled peer. Everything goes into
# OUT_DIR/gpu-check.tar.gz (written at exit, however the script ends: the run tool brings back only
# a few files a call), with a copy of the log, gpu-check.log, beside it.
# Usage (on the GPU machine, from the repository root): scripts/gpu-check.sh [OUT_DIR]
#   DEADLINE=S (default 540) is the visit's length in seconds: each step's limit is the smaller of
#   its own and what is left; a step that would get under 20 s is skipped and says so (the run
#   tool allows 600 s a command).
#   PEER_ARGS="..." adds to the PyTorch peer's points, COMPILE_ARGS replaces its compiled subset;
#   SKIP_PEER=1 leaves the peer out.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
[[ $# -le 1 && "${1:-}" != -* ]] || { echo "gpu-check: expected [OUT_DIR] (--help), got $*" >&2; exit 2; }
cd "$(dirname "$0")/.."
DEST=${1:-${OUT:-gpu-out}}
mkdir -p "$DEST"
OUT=$(mktemp -d /tmp/gpu-check.XXXXXX)
# (the runs' checkpoints and feature files stay out: tens of MB that nobody reads back)
trap 'tar -C "$OUT" --exclude="*.safetensors" --exclude="*.tf_record" -czf "$DEST/gpu-check.tar.gz" . &&
  cp "$OUT/gpu-check.log" "$DEST/"; rm -rf "$OUT"' EXIT
exec > >(tee "$OUT/gpu-check.log") 2>&1
status=0
end=$((SECONDS + ${DEADLINE:-540}))
step() { echo; echo "== $* ($(date -u +%H:%M:%S), $((end - SECONDS)) s left)"; }
# limit CAP: the seconds a step may take, the smaller of CAP and what is left; 0 when under 20 s
limit() { local left=$((end - SECONDS)); (( left < 20 )) && { echo 0; return; }; echo $(( $1 < left ? $1 : left )); }
# run CAP CMD...: CMD under that limit; skipped (a failure) when no time is left
run() {
  local t; t=$(limit "$1"); shift
  if (( t == 0 )); then echo "gpu-check: skipped for lack of time: $*"; status=1; return 1; fi
  timeout -k 10 "$t" "$@" || { local rc=$?; echo "gpu-check: exit $rc$([[ $rc == 124 ]] && echo " (its limit, $t s)"): $*"; status=1; return 1; }
}

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
bench=("$BB/bin/bertbench" bench --device=cuda --threads=4)
peer() { [[ ${SKIP_PEER:-0} == 1 ]] || PYTHONUNBUFFERED=1 run "$@"; }
peer_py=(python3 bench/peer/torch_gpu_bench.py)

step "bertbench version (its backends)"
run 30 "$BB/bin/bertbench" version > "$OUT/version.json"
python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["system_info"]["backends"], indent=1))' \
  "$OUT/version.json" || true

step "backend conformance (CPU and CUDA against the double reference)"
run 120 "$BB/bin/test_backend" --gtest_output="json:$OUT/backend_ops.json" 2>&1 | grep -v '^\[       OK\|^\[ RUN' || status=1

step "the BERT engine on the CUDA backend against the CPU engine (one pretraining and one SQuAD step; materialized and fused attention), and its bf16 against PyTorch's CUDA autocast"
BB_SOURCE_DIR=$PWD BB_TORCH_PYTHON=$(command -v python3) run 120 "$BB/bin/test_model" \
  --gtest_filter='*EngineCuda.*:EngineBackend.*:Parity.Bf16OnTheGpu*' --gtest_output="json:$OUT/engine_cuda.json" 2>&1 | grep -v '^\[ RUN' || status=1

step "training steps, bertbench and the PyTorch peer (eager) alternated: bf16, full-length synthetic batches"
# the same points each round: BERT-base and -large, seq 128 and 512, batch 16 and 64
points=(--model=base,large --seq_len=128,512 --batch_size=16,64)
for round in 1 2; do
  run 100 "${bench[@]}" --mode=train "${points[@]}" --dtype=bf16 --steps=10 --warmup=3 --json="$OUT/bench_train_r$round.json"
  peer 100 "${peer_py[@]}" --variant=eager --mode=train "${points[@]}" ${PEER_ARGS:-} --json="$OUT/torch_train_r$round.json"
done

step "per-op profile of one BERT-large training step on the GPU (CUDA events), bf16 and fp32, seq 128 batch 64"
run 90 "${bench[@]}" --mode=train --model=large --seq_len=128 --batch_size=64 --dtype=bf16,fp32 --steps=5 --warmup=2 \
  --json="$OUT/bench_train_profile.json" --profile --profile_svg="$OUT/bench_train_profile.svg"

step "inference: bertbench and the peer (eager; batch-1 latency), BERT-base and -large, seq 128"
run 90 "${bench[@]}" --mode=infer --model=base,large --seq_len=128 --batch_size=1,64 --dtype=bf16 --steps=10 --warmup=3 \
  --json="$OUT/bench_infer.json"
peer 90 "${peer_py[@]}" --variant=eager --mode=infer,latency --model=base,large --seq_len=128 --batch_size=64 \
  --latency_queries=50 --json="$OUT/torch_infer.json"

step "training on the GPU against the CPU: pretraining curves, checkpoints across devices, SQuAD answers"
run 150 bash scripts/gpu-train-check.sh "$BB/bin/bertbench" "$BB/data" "$OUT"

step "GEMM rate of the CUDA backend (cuBLASLt): bertbench bench --mode=gemm (BERT-large's linear shapes, 4096 tokens) and torch's 8192^3"
run 60 "${bench[@]}" --mode=gemm --model=large --dtype=bf16,fp32 --gemm_reps=3 --json="$OUT/bench_gemm.json"
run 60 python3 - <<'PY'
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

step "attention kernels: a bf16 training step with each (BERT-base, seq 128 and 512, batch 16; fused: tensor cores, fused-cores: CUDA cores)"
for att in materialized fused fused-cores; do
  BB_ATTENTION=${att%-cores} BB_CUDA_FLASH=$([[ $att == *-cores ]] && echo cores || echo tensor) run 45 \
    "${bench[@]}" --mode=train --model=base --seq_len=128,512 --batch_size=16 --dtype=bf16 \
    --steps=5 --warmup=2 --json="$OUT/bench_attention_$att.json"
done
step "the fused attention's CUDA-core kernel with bf16 operands too (BB_CUDA_FLASH=cores; the tensor cores' is the default)"
BB_CUDA_FLASH=cores run 40 "$BB/bin/test_backend" --gtest_filter='All/BackendOps.FlashAttentionAcrossTiles/cuda' \
  --gtest_output="json:$OUT/backend_flash_cores.json" 2>&1 | grep -v '^\[       OK\|^\[ RUN' || status=1

step "scaling model: 8 GPUs from the measured step (scripts/mpi-scaling-model.py; NVLink 4 ~3600 Gb/s per GPU, NDR 400 Gb/s)"
run 30 python3 - "$OUT/bench_train_r1.json" <<'PY'
import json, subprocess, sys
for p in json.load(open(sys.argv[1]))["points"]:
    if p["mode"] == "train" and p["dtype"] == "bf16" and p["model"] == "large" and p["batch_size"] == 64:
        step_s = p["batch_size"] / p["sequences_per_second"]
        print(f"measured bf16 step: {step_s:.4f} s for batch {p['batch_size']} (BERT-{p['model']} seq {p['seq_len']})")
        subprocess.run([sys.executable, "scripts/mpi-scaling-model.py", f"--models={p['model']}",
                        f"--step_s={p['model']}={step_s}", f"--batch={p['batch_size']}", "--nodes=8",
                        "--gbps=3600,400"], check=True)
PY

step "PyTorch peer, torch.compile"
peer 170 "${peer_py[@]}" --variant=compile ${COMPILE_ARGS:---mode=train --model=large --seq_len=128 --batch_size=64} \
  --json="$OUT/torch_compile.json"
step "done, status $status"
exit $status
