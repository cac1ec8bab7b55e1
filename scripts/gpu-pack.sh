#!/usr/bin/env bash
# Builds the CUDA programs here (-DBB_CUDA=ON in build-cuda/, with this machine's CUDA toolkit) and
# packs them, with the shared libraries they need that a GPU machine lacks (oneDNN, OpenBLAS, fmt,
# libgomp ...; not glibc, libstdc++, the CUDA runtime or cuBLASLt, which it has), into
# gpu-pack/bundle.tar.xz (git-ignored), for scripts/gpu-check.sh to run there, with the golden data
# scripts/gpu-train-check.sh trains on. docs/gpu.md.
# Usage: scripts/gpu-pack.sh            (then the device run carries gpu-pack/)
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $NVCC ]] || { echo "gpu-pack: no nvcc (set NVCC=/path/to/nvcc; a CUDA 12/13 toolkit with cuBLASLt)" >&2; exit 2; }
TARGETS=(bertbench test_backend test_model backend_gemm)
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DBB_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null
cmake --build build-cuda --target "${TARGETS[@]}" -j "$(nproc)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp build-cuda/bertbench build-cuda/tests/test_backend build-cuda/tests/test_model build-cuda/bench/backend_gemm "$stage/bin/"
# Everything ldd resolves except glibc's own libraries (the GPU machine's newer glibc must keep its
# set whole) and what any Linux with a CUDA driver and toolkit has.
keep_out='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|libanl|libnsl|libstdc\+\+|libgcc_s|libcublasLt|libcublas|libcudart|libcuda)\.so'
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=>/ {print $3}' | while read -r lib; do
    base=$(basename "$lib")
    [[ $base =~ $keep_out ]] || cp -Ln "$lib" "$stage/lib/$base"
  done
done
# The data of gpu-train-check.sh: golden records, vocabulary and SQuAD files from ../shared
golden=${BB_SHARED_DIR:-../shared}/golden
mkdir -p "$stage/data"
cp "$golden/pretraining/public_128_s12345_d2.tfrecord" "$stage/data/train.tfrecord"
cp "$golden/eval_pick/public_128_eval100.tfrecord" "$stage/data/eval.tfrecord"
cp "$golden/vocab.txt" "$golden/squad_pipeline/train-v1.1.json" "$golden/squad_pipeline/dataset-v1.1.json" "$stage/data/"
mkdir -p gpu-pack
tar -C "$stage" -cJf gpu-pack/bundle.tar.xz.tmp .
mv gpu-pack/bundle.tar.xz.tmp gpu-pack/bundle.tar.xz
echo "gpu-pack: gpu-pack/bundle.tar.xz ($(du -h gpu-pack/bundle.tar.xz | cut -f1)): $(ls "$stage/bin" | tr '\n' ' ')+ $(ls "$stage/lib" | wc -l) libraries"
