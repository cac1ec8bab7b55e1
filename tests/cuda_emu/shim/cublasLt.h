// Host emulation (cuda_runtime.h) of the cuBLASLt calls the CUDA backend makes: descriptors that
// keep their attributes, a heuristic that offers one algorithm, and cublasLtMatmul as the
// column-major D = alpha·op(A)·op(B) + beta·C (+ bias per row of D with the BIAS epilogue) on host
// memory, fp32 accumulation in k order (emu_runtime.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cublas_v2.h"

using cublasLtHandle_t = struct EmuLt*;
using cublasLtMatmulDesc_t = struct EmuMatmulDesc*;
using cublasLtMatrixLayout_t = struct EmuLayout*;
using cublasLtMatmulPreference_t = struct EmuPreference*;
struct cublasLtMatmulAlgo_t {
    uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};
enum cublasLtEpilogue_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 };
enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
};
enum cublasLtMatmulPreferenceAttributes_t {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h);
size_t cublasLtGetVersion();
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                              const void* v, size_t bytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a, const void* v,
                                                    size_t bytes);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t p,
                                              int requested, cublasLtMatmulHeuristicResult_t* results,
                                              int* returned);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t la, const void* B, cublasLtMatrixLayout_t lb, const void* beta,
                              const void* C, cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t st);
