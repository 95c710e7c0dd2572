// cuBLAS on the CPU runtime: handles, modes, and the GEMM family computed on the host (device memory is host
// memory here), so programs that call cuBLAS run — and are checked — like the rest of their code. Only what
// is implemented is declared: a program calling anything else does not build, and says so.
#pragma once
#include <cstdint>
#include <cstdlib>

#include "half.h"

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14, CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum {
  CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2, CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
} cublasMath_t;
typedef enum {
  CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_16F_PEDANTIC = 65, CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69, CUBLAS_COMPUTE_32F_FAST_16F = 74, CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77, CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72, CUBLAS_COMPUTE_32I_PEDANTIC = 73
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
#ifndef XPILER_CUDA_DATA_TYPE
#define XPILER_CUDA_DATA_TYPE
typedef enum cudaDataType_t {
  CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_8I = 3, CUDA_R_32I = 10, CUDA_R_16BF = 14
} cudaDataType;
#endif

struct cublasContext { cublasMath_t math; cublasPointerMode_t pointer_mode; void* stream; };
typedef cublasContext* cublasHandle_t;

inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext{CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST, nullptr};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t handle) { delete handle; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t* mode) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *mode = h->math;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetPointerMode(cublasHandle_t h, cublasPointerMode_t mode) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->pointer_mode = mode;  // device memory is host memory: both modes read the same way
  return CUBLAS_STATUS_SUCCESS;
}
template <class S>
inline cublasStatus_t cublasSetStream(cublasHandle_t h, S stream) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = (void*)stream;  // streams are synchronous on this runtime
  return CUBLAS_STATUS_SUCCESS;
}
inline const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}
inline const char* cublasGetStatusString(cublasStatus_t s) { return cublasGetStatusName(s); }

// The helper API's copies between host and device memory: strided vectors and column-major matrices, each a 2-D
// copy of the runtime (recorded like the program's own copies; the stream of the Async forms runs at once).
namespace xpiler {
// `count` runs of `run` bytes, `src_step`/`dst_step` elements apart: a vector's elements (runs of one element,
// steps inc) or a column-major matrix's columns (runs of rows, steps ld)
inline cublasStatus_t blas_copy(int count, int run, int elemSize, const void* src, int src_step, void* dst,
                                int dst_step, cudaMemcpyKind kind) {
  if (count < 0 || run < 0 || elemSize <= 0 || src_step <= 0 || dst_step <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (count == 0 || run == 0) return CUBLAS_STATUS_SUCCESS;
  return cudaMemcpy2D(dst, size_t(dst_step) * elemSize, src, size_t(src_step) * elemSize, size_t(run) * elemSize,
                      count, kind) ? CUBLAS_STATUS_MAPPING_ERROR : CUBLAS_STATUS_SUCCESS;
}
}  // namespace xpiler
inline cublasStatus_t cublasSetVector(int n, int elemSize, const void* x, int incx, void* y, int incy) {
  return xpiler::blas_copy(n, 1, elemSize, x, incx, y, incy, cudaMemcpyHostToDevice);
}
inline cublasStatus_t cublasGetVector(int n, int elemSize, const void* x, int incx, void* y, int incy) {
  return xpiler::blas_copy(n, 1, elemSize, x, incx, y, incy, cudaMemcpyDeviceToHost);
}
inline cublasStatus_t cublasSetMatrix(int rows, int cols, int elemSize, const void* A, int lda, void* B, int ldb) {
  if (lda < rows || ldb < rows) return CUBLAS_STATUS_INVALID_VALUE;
  return xpiler::blas_copy(cols, rows, elemSize, A, lda, B, ldb, cudaMemcpyHostToDevice);
}
inline cublasStatus_t cublasGetMatrix(int rows, int cols, int elemSize, const void* A, int lda, void* B, int ldb) {
  if (lda < rows || ldb < rows) return CUBLAS_STATUS_INVALID_VALUE;
  return xpiler::blas_copy(cols, rows, elemSize, A, lda, B, ldb, cudaMemcpyDeviceToHost);
}
template <class S>
inline cublasStatus_t cublasSetVectorAsync(int n, int e, const void* x, int incx, void* y, int incy, S) {
  return cublasSetVector(n, e, x, incx, y, incy);
}
template <class S>
inline cublasStatus_t cublasGetVectorAsync(int n, int e, const void* x, int incx, void* y, int incy, S) {
  return cublasGetVector(n, e, x, incx, y, incy);
}
template <class S>
inline cublasStatus_t cublasSetMatrixAsync(int r, int c, int e, const void* A, int lda, void* B, int ldb, S) {
  return cublasSetMatrix(r, c, e, A, lda, B, ldb);
}
template <class S>
inline cublasStatus_t cublasGetMatrixAsync(int r, int c, int e, const void* A, int lda, void* B, int ldb, S) {
  return cublasGetMatrix(r, c, e, A, lda, B, ldb);
}

namespace xpiler {
inline double blas_load(const void* p, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_64F: return static_cast<const double*>(p)[i];
    case CUDA_R_16F: return static_cast<float>(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF: return static_cast<float>(static_cast<const __nv_bfloat16*>(p)[i]);
    case CUDA_R_8I: return static_cast<const int8_t*>(p)[i];
    case CUDA_R_32I: return static_cast<const int32_t*>(p)[i];
  }
  return 0.0;
}
inline void blas_store(void* p, cudaDataType t, int64_t i, double v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case CUDA_R_64F: static_cast<double*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __half(static_cast<float>(v)); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(p)[i] = __nv_bfloat16(static_cast<float>(v)); break;
    case CUDA_R_8I: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case CUDA_R_32I: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
  }
}
inline bool blas_type_ok(int t) { return t == 0 || t == 1 || t == 2 || t == 3 || t == 10 || t == 14; }
// Column-major C = alpha * op(A) * op(B) + beta * C for `batch` matrices `stride_*` elements apart.
// Products are summed in the compute type's precision (float for the 32F and 16F modes, double for 64F).
inline cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                double alpha, const void* A, cudaDataType at, int lda, int64_t sa, const void* B,
                                cudaDataType bt, int ldb, int64_t sb, double beta, void* C, cudaDataType ct,
                                int ldc, int64_t sc, int batch, bool wide) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < (m > 1 ? m : 1) ||
      lda < ((ta == CUBLAS_OP_N ? m : k) > 1 ? (ta == CUBLAS_OP_N ? m : k) : 1) ||
      ldb < ((tb == CUBLAS_OP_N ? k : n) > 1 ? (tb == CUBLAS_OP_N ? k : n) : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!blas_type_ok(at) || !blas_type_ok(bt) || !blas_type_ok(ct)) return CUBLAS_STATUS_NOT_SUPPORTED;
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double accd = 0.0;
        float accf = 0.0f;
        for (int p = 0; p < k; ++p) {
          int64_t ia = b * sa + (ta == CUBLAS_OP_N ? i + (int64_t)p * lda : p + (int64_t)i * lda);
          int64_t ib = b * sb + (tb == CUBLAS_OP_N ? p + (int64_t)j * ldb : j + (int64_t)p * ldb);
          double prod = blas_load(A, at, ia) * blas_load(B, bt, ib);
          if (wide) accd += prod; else accf += static_cast<float>(prod);
        }
        int64_t ic = b * sc + i + (int64_t)j * ldc;
        double acc = wide ? accd : accf;
        // beta == 0: C is not read (it may hold NaNs), as cuBLAS specifies
        blas_store(C, ct, ic, alpha * acc + (beta == 0.0 ? 0.0 : beta * blas_load(C, ct, ic)));
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
inline double blas_scalar(const void* p, cublasComputeType_t c) {
  if (c == CUBLAS_COMPUTE_64F || c == CUBLAS_COMPUTE_64F_PEDANTIC) return *static_cast<const double*>(p);
  if (c == CUBLAS_COMPUTE_16F || c == CUBLAS_COMPUTE_16F_PEDANTIC) return static_cast<float>(*static_cast<const __half*>(p));
  if (c == CUBLAS_COMPUTE_32I || c == CUBLAS_COMPUTE_32I_PEDANTIC) return *static_cast<const int32_t*>(p);
  return *static_cast<const float*>(p);
}
inline bool blas_wide(cublasComputeType_t c) { return c == CUBLAS_COMPUTE_64F || c == CUBLAS_COMPUTE_64F_PEDANTIC; }
}  // namespace xpiler

inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
  return xpiler::blas_gemm(h, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, *beta, C,
                           CUDA_R_32F, ldc, 0, 1, false);
}
inline cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const double* alpha, const double* A, int lda, const double* B, int ldb,
                                  const double* beta, double* C, int ldc) {
  return xpiler::blas_gemm(h, ta, tb, m, n, k, *alpha, A, CUDA_R_64F, lda, 0, B, CUDA_R_64F, ldb, 0, *beta, C,
                           CUDA_R_64F, ldc, 0, 1, true);
}
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float* alpha, const float* A, int lda,
                                                long long sa, const float* B, int ldb, long long sb,
                                                const float* beta, float* C, int ldc, long long sc, int batch) {
  return xpiler::blas_gemm(h, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, *beta, C,
                           CUDA_R_32F, ldc, sc, batch, false);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void* alpha, const void* A, cudaDataType at, int lda, const void* B,
                                   cudaDataType bt, int ldb, const void* beta, void* C, cudaDataType ct, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t) {
  return xpiler::blas_gemm(h, ta, tb, m, n, k, xpiler::blas_scalar(alpha, compute), A, at, lda, 0, B, bt, ldb, 0,
                           xpiler::blas_scalar(beta, compute), C, ct, ldc, 0, 1, xpiler::blas_wide(compute));
}
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void* alpha, const void* A, cudaDataType at,
                                                 int lda, long long sa, const void* B, cudaDataType bt, int ldb,
                                                 long long sb, const void* beta, void* C, cudaDataType ct, int ldc,
                                                 long long sc, int batch, cublasComputeType_t compute,
                                                 cublasGemmAlgo_t) {
  return xpiler::blas_gemm(h, ta, tb, m, n, k, xpiler::blas_scalar(alpha, compute), A, at, lda, sa, B, bt, ldb, sb,
                           xpiler::blas_scalar(beta, compute), C, ct, ldc, sc, batch, xpiler::blas_wide(compute));
}
