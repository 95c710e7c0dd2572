#pragma once
#include "cuda_runtime.h"
#define CUDA_VERSION 12000
// The driver API's error type and codes (programs that name them in their error helpers); the driver API's
// calls themselves are not modeled.
#include "xpiler/cuda_enums.h"
#define XPILER_DRIVER_ERROR(name, value) CUDA_##name = value,
typedef enum cudaError_enum { XPILER_CUDA_DRIVER_ERRORS(XPILER_DRIVER_ERROR) } CUresult;
#undef XPILER_DRIVER_ERROR
inline CUresult cuGetErrorName(CUresult e, const char** s) { *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR"; return CUDA_SUCCESS; }
inline CUresult cuGetErrorString(CUresult e, const char** s) { *s = e == CUDA_SUCCESS ? "no error" : "error"; return CUDA_SUCCESS; }
inline CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
