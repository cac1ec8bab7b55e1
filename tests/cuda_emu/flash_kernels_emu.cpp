// flash_kernels.cu (the fused attention on the CUDA cores) compiled for the host emulation.
#include "backend/cuda/flash_kernels.cu"
