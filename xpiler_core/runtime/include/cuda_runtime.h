// CUDA on the CPU: the xpiler runtime's cuda_runtime.h.
#pragma once
#include "xpiler/device.h"
#include "xpiler/api.h"
XPILER_RUNTIME_API(cuda)
XPILER_GRAPH_API(cuda)
#define cudaStreamNonBlocking 1
#define cudaStreamDefault 0
#define cudaEventDefault 0
#define cudaEventDisableTiming 2
#define cudaMemAttachGlobal 1
#define cudaHostAllocDefault 0
#define cudaHostAllocPortable 1
#define cudaHostAllocMapped 2
#define cudaHostAllocWriteCombined 4
#define cudaHostRegisterDefault 0
#define CUDART_CB  // the calling convention of stream callbacks: nothing on Linux
#define cudaFuncAttributeMaxDynamicSharedMemorySize 8
#define XP_DEVATTR(name, value) cudaDevAttr##name = value,
enum cudaDeviceAttr { XPILER_CUDA_DEVICE_ATTRS(XP_DEVATTR) };
#undef XP_DEVATTR
#define XP_COMPUTEMODE(name, value) cudaComputeMode##name = value,
enum cudaComputeMode { XPILER_CUDA_COMPUTE_MODES(XP_COMPUTEMODE) };
#undef XP_COMPUTEMODE
// the include guards of CUDA's own headers: libraries test them to see the runtime API (helper_cuda.h)
#define __CUDA_RUNTIME_H__
// the CUDA version programs see (passes/support/build_macros.py: the newest whose device API is covered in full)
#define CUDART_VERSION 12000
#ifdef __CUDACC__
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#endif
#define __DRIVER_TYPES_H__
