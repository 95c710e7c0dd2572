// CUDA on the CPU: the xpiler runtime's cuda_runtime.h.
#pragma once
#include "xpiler/device.h"
#include "xpiler/api.h"
XPILER_RUNTIME_API(cuda)
#define cudaStreamNonBlocking 1
#define cudaStreamDefault 0
#define cudaEventDefault 0
#define cudaEventDisableTiming 2
#define cudaMemAttachGlobal 1
#define cudaHostAllocDefault 0
#define cudaFuncAttributeMaxDynamicSharedMemorySize 8
#define cudaDevAttrMaxThreadsPerBlock 1
#define cudaDevAttrMaxSharedMemoryPerBlock 8
#define cudaDevAttrWarpSize 10
#define cudaDevAttrMultiProcessorCount 16
