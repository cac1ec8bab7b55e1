#!/usr/bin/env bash
# scripts/gpu-train-check.sh with the emulated GPU (tests/cuda_emu) as --device=cuda: the training
# loop, optimizer state, checkpoints and SQuAD on the CUDA backend's code, against the CPU.
# Usage: gpu_train_check_emu.sh BERTBENCH_EMU SHARED_DIR
set -euo pipefail
bb=$1 golden=$2/golden
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/data"
ln -s "$golden/pretraining/public_128_s12345_d2.tfrecord" "$work/data/train.tfrecord"
ln -s "$golden/eval_pick/public_128_eval100.tfrecord" "$work/data/eval.tfrecord"
for f in vocab.txt squad_pipeline/train-v1.1.json squad_pipeline/dataset-v1.1.json; do
  ln -s "$golden/$f" "$work/data/$(basename "$f")"
done
# 6 steps, checkpoints evaluated on 2 batches, and 1 epoch: the emulated GPU runs a pretraining
# step of the small model in about 4 s (the kernels' threads switch at every barrier), an eval
# batch in about 3, the SQuAD run in one to two minutes (beside other tests on a 2-core Zen 5 it
# once passed the GPU's 120 s limit: 4x the limits here). Alone on a 2-core Zen 5: 132 s, against
# 187 s with 10 steps and all 7 eval batches.
STEPS=6 EVAL_STEPS=2 SQUAD_EPOCHS=1 TIMEOUT_SCALE=4 bash "$root/scripts/gpu-train-check.sh" "$bb" "$work/data" "$work/out"
