// kernels.cu compiled for the host emulation (shim/cuda_runtime.h).
#include "backend/cuda/kernels.cu"
