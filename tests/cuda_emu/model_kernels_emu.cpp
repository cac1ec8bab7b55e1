// model_kernels.cu compiled for the host emulation (shim/cuda_runtime.h).
#include "backend/cuda/model_kernels.cu"
