// Host emulation (cuda_runtime.h) of the classic cuBLAS calls the CUDA backend makes: a column-major
// GEMM on host memory, fp32 or bf16 operands, fp32 accumulation in k order (emu_runtime.cpp).
#pragma once

#include "cuda_runtime.h"
#include "library_types.h"

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
using cublasHandle_t = struct EmuBlas*;

cublasStatus_t cublasCreate(cublasHandle_t* h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t ta, int lda, const void* B,
                            cudaDataType_t tb, int ldb, const void* beta, void* C, cudaDataType_t tc, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
