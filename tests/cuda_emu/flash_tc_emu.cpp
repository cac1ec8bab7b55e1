// flash_tc.cu (the fused attention on the tensor cores) compiled for the host emulation.
#include "backend/cuda/flash_tc.cu"
