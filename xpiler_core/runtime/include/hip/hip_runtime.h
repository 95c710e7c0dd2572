// HIP on the CPU: the xpiler runtime's hip_runtime.h (warp size 64 by default, as on CDNA).
#pragma once
#ifndef XPILER_DIALECT_HIP
#define XPILER_DIALECT_HIP 1
#endif
#include "../xpiler/device.h"
#include "../xpiler/api.h"
#include "../xpiler/warp32.h"
XPILER_RUNTIME_API(hip)
XPILER_GRAPH_API(hip)
// the include guards of HIP's own headers: libraries test them to see the runtime API
#define HIP_INCLUDE_HIP_HIP_RUNTIME_H
#define HIP_INCLUDE_HIP_DRIVER_TYPES_H
// Through a generic lambda, so a function template named without arguments deduces them (as with <<<>>>).
#define hipLaunchKernelGGL(K, G, B, S, ST, ...)                                                          \
  ::xpiler::launch(::xpiler::deduced_kernel(#K, [](auto... xpiler_args) { K(xpiler_args...); }), G, B, S, \
                   ST)(__VA_ARGS__)
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::xpiler::dynamic_shared_memory());
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define __AMDGCN_WAVEFRONT_SIZE XPILER_WARP_SIZE
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)
#define hipStreamNonBlocking 1
#define hipStreamDefault 0
#define hipEventDefault 0
#define hipMemAttachGlobal 1
#define hipHostMallocDefault 0
#define hipHostMallocPortable 1
#define hipHostMallocMapped 2
#define hipHostMallocWriteCombined 4
#define hipHostMalloc hipHostAlloc
#define hipHostFree hipFreeHost
#define HIP_SYMBOL(x) x
typedef hipDeviceProp hipDeviceProp_t;
// device attributes in CUDA's numbering (the runtime answers them by number), HIP's spelling
#define XP_HIPATTR(name, value) hipDeviceAttribute##name = value,
enum hipDeviceAttribute_t {
  XPILER_CUDA_DEVICE_ATTRS(XP_HIPATTR)
  hipDeviceAttributeMemoryBusWidth = 37, hipDeviceAttributeSharedMemPerBlockOptin = 97,
  hipDeviceAttributeMultiprocessorCount = 16, hipDeviceAttributePciDomainID = 50,
};
#undef XP_HIPATTR
#define XP_HIPMODE(name, value) hipComputeMode##name = value,
enum hipComputeMode { XPILER_CUDA_COMPUTE_MODES(XP_HIPMODE) };
#undef XP_HIPMODE

