#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of bertbench from Debian packages.
# Idempotent: when everything is present it only checks and returns (about a second).
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ make pkg-config git ca-certificates
  ccache                                          # rebuilds; the engine regression's baseline build
  libgtest-dev libgmock-dev libbenchmark-dev      # tests, microbenchmarks
  libdnnl-dev                                     # float GEMM (oneDNN's sgemm, OpenMP runtime)
  libopenblas-openmp-dev                          # double GEMM for the tests (OpenMP build too)
  libopenblas0-pthread                            # bench-compare: the "default" PyTorch peer's BLAS
  libutf8proc-dev                                 # Unicode data for the WordPiece tokenizer
  nlohmann-json3-dev libfmt-dev                   # JSON, formatting
  libsnappy-dev                                   # TensorFlow checkpoint (tensor bundle) index blocks
  libhdf5-dev zlib1g-dev                          # NVIDIA's HDF5 pretraining shards (zlib: the deflate bomb check)
  clang-14 libclang-rt-14-dev                     # libFuzzer targets for every reader
  libopenmpi-dev openmpi-bin                      # MPI data-parallel runs (mpirun -np N bertbench ...)
  iproute2                                        # scripts/mpi-netns.sh: multi-node tests in network namespaces
  numactl                                         # scripts/launch_benchmark.py: Intel's numactl placement
  python3 python3-numpy python3-torch             # independent reference (parity tests, peer bench)
  python3-h5py                                    # hostile HDF5 shards built in tests (virtual, external, bombs)
)
# The demo data comes from the npm registry; some images ship node/npm outside Debian.
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all dependencies present"
