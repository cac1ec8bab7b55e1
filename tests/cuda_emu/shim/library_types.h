// Host emulation (cuda_runtime.h): the data types cuBLAS takes.
#pragma once

enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
