// cuBLASLt on the CPU runtime: handles only (programs that create one for later use build and run; a program
// that calls cublasLtMatmul does not build here, and says so).
#pragma once
#include "cublas_v2.h"

struct cublasLtContext { int unused; };
typedef cublasLtContext* cublasLtHandle_t;
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext{0};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { delete handle; return CUBLAS_STATUS_SUCCESS; }
