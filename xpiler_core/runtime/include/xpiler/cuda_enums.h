// Enumerations of the CUDA runtime API, names and values as CUDA 13.0 declares them (driver_types.h),
// as X-macros: X(suffix, value). The runtime's cuda/hip API and the CPU translation's prelude expand them
// with their own prefix (cudaErrorInvalidValue, cudaDevAttrWarpSize, cudaComputeModeDefault).
#pragma once

#define XPILER_CUDA_ERRORS(X) \
  X(Success, 0) X(ErrorInvalidValue, 1) X(ErrorMemoryAllocation, 2) X(ErrorInitializationError, 3) \
  X(ErrorCudartUnloading, 4) X(ErrorProfilerDisabled, 5) X(ErrorProfilerNotInitialized, 6) \
  X(ErrorProfilerAlreadyStarted, 7) X(ErrorProfilerAlreadyStopped, 8) X(ErrorInvalidConfiguration, 9) \
  X(ErrorInvalidPitchValue, 12) X(ErrorInvalidSymbol, 13) X(ErrorInvalidHostPointer, 16) \
  X(ErrorInvalidDevicePointer, 17) X(ErrorInvalidTexture, 18) X(ErrorInvalidTextureBinding, 19) \
  X(ErrorInvalidChannelDescriptor, 20) X(ErrorInvalidMemcpyDirection, 21) X(ErrorAddressOfConstant, 22) \
  X(ErrorTextureFetchFailed, 23) X(ErrorTextureNotBound, 24) X(ErrorSynchronizationError, 25) \
  X(ErrorInvalidFilterSetting, 26) X(ErrorInvalidNormSetting, 27) X(ErrorMixedDeviceExecution, 28) \
  X(ErrorNotYetImplemented, 31) X(ErrorMemoryValueTooLarge, 32) X(ErrorStubLibrary, 34) \
  X(ErrorInsufficientDriver, 35) X(ErrorCallRequiresNewerDriver, 36) X(ErrorInvalidSurface, 37) \
  X(ErrorDuplicateVariableName, 43) X(ErrorDuplicateTextureName, 44) X(ErrorDuplicateSurfaceName, 45) \
  X(ErrorDevicesUnavailable, 46) X(ErrorIncompatibleDriverContext, 49) X(ErrorMissingConfiguration, 52) \
  X(ErrorPriorLaunchFailure, 53) X(ErrorLaunchMaxDepthExceeded, 65) X(ErrorLaunchFileScopedTex, 66) \
  X(ErrorLaunchFileScopedSurf, 67) X(ErrorSyncDepthExceeded, 68) X(ErrorLaunchPendingCountExceeded, 69) \
  X(ErrorInvalidDeviceFunction, 98) X(ErrorNoDevice, 100) X(ErrorInvalidDevice, 101) \
  X(ErrorDeviceNotLicensed, 102) X(ErrorSoftwareValidityNotEstablished, 103) X(ErrorStartupFailure, 127) \
  X(ErrorInvalidKernelImage, 200) X(ErrorDeviceUninitialized, 201) X(ErrorMapBufferObjectFailed, 205) \
  X(ErrorUnmapBufferObjectFailed, 206) X(ErrorArrayIsMapped, 207) X(ErrorAlreadyMapped, 208) \
  X(ErrorNoKernelImageForDevice, 209) X(ErrorAlreadyAcquired, 210) X(ErrorNotMapped, 211) \
  X(ErrorNotMappedAsArray, 212) X(ErrorNotMappedAsPointer, 213) X(ErrorECCUncorrectable, 214) \
  X(ErrorUnsupportedLimit, 215) X(ErrorDeviceAlreadyInUse, 216) X(ErrorPeerAccessUnsupported, 217) \
  X(ErrorInvalidPtx, 218) X(ErrorInvalidGraphicsContext, 219) X(ErrorNvlinkUncorrectable, 220) \
  X(ErrorJitCompilerNotFound, 221) X(ErrorUnsupportedPtxVersion, 222) X(ErrorJitCompilationDisabled, 223) \
  X(ErrorUnsupportedExecAffinity, 224) X(ErrorUnsupportedDevSideSync, 225) X(ErrorContained, 226) \
  X(ErrorInvalidSource, 300) X(ErrorFileNotFound, 301) X(ErrorSharedObjectSymbolNotFound, 302) \
  X(ErrorSharedObjectInitFailed, 303) X(ErrorOperatingSystem, 304) X(ErrorInvalidResourceHandle, 400) \
  X(ErrorIllegalState, 401) X(ErrorLossyQuery, 402) X(ErrorSymbolNotFound, 500) X(ErrorNotReady, 600) \
  X(ErrorIllegalAddress, 700) X(ErrorLaunchOutOfResources, 701) X(ErrorLaunchTimeout, 702) \
  X(ErrorLaunchIncompatibleTexturing, 703) X(ErrorPeerAccessAlreadyEnabled, 704) \
  X(ErrorPeerAccessNotEnabled, 705) X(ErrorSetOnActiveProcess, 708) X(ErrorContextIsDestroyed, 709) \
  X(ErrorAssert, 710) X(ErrorTooManyPeers, 711) X(ErrorHostMemoryAlreadyRegistered, 712) \
  X(ErrorHostMemoryNotRegistered, 713) X(ErrorHardwareStackError, 714) X(ErrorIllegalInstruction, 715) \
  X(ErrorMisalignedAddress, 716) X(ErrorInvalidAddressSpace, 717) X(ErrorInvalidPc, 718) \
  X(ErrorLaunchFailure, 719) X(ErrorCooperativeLaunchTooLarge, 720) X(ErrorTensorMemoryLeak, 721) \
  X(ErrorNotPermitted, 800) X(ErrorNotSupported, 801) X(ErrorSystemNotReady, 802) \
  X(ErrorSystemDriverMismatch, 803) X(ErrorCompatNotSupportedOnDevice, 804) X(ErrorMpsConnectionFailed, 805) \
  X(ErrorMpsRpcFailure, 806) X(ErrorMpsServerNotReady, 807) X(ErrorMpsMaxClientsReached, 808) \
  X(ErrorMpsMaxConnectionsReached, 809) X(ErrorMpsClientTerminated, 810) X(ErrorCdpNotSupported, 811) \
  X(ErrorCdpVersionMismatch, 812) X(ErrorStreamCaptureUnsupported, 900) X(ErrorStreamCaptureInvalidated, 901) \
  X(ErrorStreamCaptureMerge, 902) X(ErrorStreamCaptureUnmatched, 903) X(ErrorStreamCaptureUnjoined, 904) \
  X(ErrorStreamCaptureIsolation, 905) X(ErrorStreamCaptureImplicit, 906) X(ErrorCapturedEvent, 907) \
  X(ErrorStreamCaptureWrongThread, 908) X(ErrorTimeout, 909) X(ErrorGraphExecUpdateFailure, 910) \
  X(ErrorExternalDevice, 911) X(ErrorInvalidClusterSize, 912) X(ErrorFunctionNotLoaded, 913) \
  X(ErrorInvalidResourceType, 914) X(ErrorInvalidResourceConfiguration, 915) X(ErrorUnknown, 999) \
  X(ErrorApiFailureBase, 10000)

#define XPILER_CUDA_DEVICE_ATTRS(X) \
  X(MaxThreadsPerBlock, 1) X(MaxBlockDimX, 2) X(MaxBlockDimY, 3) X(MaxBlockDimZ, 4) X(MaxGridDimX, 5) \
  X(MaxGridDimY, 6) X(MaxGridDimZ, 7) X(MaxSharedMemoryPerBlock, 8) X(TotalConstantMemory, 9) X(WarpSize, 10) \
  X(MaxPitch, 11) X(MaxRegistersPerBlock, 12) X(ClockRate, 13) X(TextureAlignment, 14) X(GpuOverlap, 15) \
  X(MultiProcessorCount, 16) X(KernelExecTimeout, 17) X(Integrated, 18) X(CanMapHostMemory, 19) \
  X(ComputeMode, 20) X(MaxTexture1DWidth, 21) X(MaxTexture2DWidth, 22) X(MaxTexture2DHeight, 23) \
  X(MaxTexture3DWidth, 24) X(MaxTexture3DHeight, 25) X(MaxTexture3DDepth, 26) X(MaxTexture2DLayeredWidth, 27) \
  X(MaxTexture2DLayeredHeight, 28) X(MaxTexture2DLayeredLayers, 29) X(SurfaceAlignment, 30) \
  X(ConcurrentKernels, 31) X(EccEnabled, 32) X(PciBusId, 33) X(PciDeviceId, 34) X(TccDriver, 35) \
  X(MemoryClockRate, 36) X(GlobalMemoryBusWidth, 37) X(L2CacheSize, 38) X(MaxThreadsPerMultiProcessor, 39) \
  X(AsyncEngineCount, 40) X(UnifiedAddressing, 41) X(MaxTexture1DLayeredWidth, 42) \
  X(MaxTexture1DLayeredLayers, 43) X(MaxTexture2DGatherWidth, 45) X(MaxTexture2DGatherHeight, 46) \
  X(MaxTexture3DWidthAlt, 47) X(MaxTexture3DHeightAlt, 48) X(MaxTexture3DDepthAlt, 49) X(PciDomainId, 50) \
  X(TexturePitchAlignment, 51) X(MaxTextureCubemapWidth, 52) X(MaxTextureCubemapLayeredWidth, 53) \
  X(MaxTextureCubemapLayeredLayers, 54) X(MaxSurface1DWidth, 55) X(MaxSurface2DWidth, 56) \
  X(MaxSurface2DHeight, 57) X(MaxSurface3DWidth, 58) X(MaxSurface3DHeight, 59) X(MaxSurface3DDepth, 60) \
  X(MaxSurface1DLayeredWidth, 61) X(MaxSurface1DLayeredLayers, 62) X(MaxSurface2DLayeredWidth, 63) \
  X(MaxSurface2DLayeredHeight, 64) X(MaxSurface2DLayeredLayers, 65) X(MaxSurfaceCubemapWidth, 66) \
  X(MaxSurfaceCubemapLayeredWidth, 67) X(MaxSurfaceCubemapLayeredLayers, 68) X(MaxTexture1DLinearWidth, 69) \
  X(MaxTexture2DLinearWidth, 70) X(MaxTexture2DLinearHeight, 71) X(MaxTexture2DLinearPitch, 72) \
  X(MaxTexture2DMipmappedWidth, 73) X(MaxTexture2DMipmappedHeight, 74) X(ComputeCapabilityMajor, 75) \
  X(ComputeCapabilityMinor, 76) X(MaxTexture1DMipmappedWidth, 77) X(StreamPrioritiesSupported, 78) \
  X(GlobalL1CacheSupported, 79) X(LocalL1CacheSupported, 80) X(MaxSharedMemoryPerMultiprocessor, 81) \
  X(MaxRegistersPerMultiprocessor, 82) X(ManagedMemory, 83) X(IsMultiGpuBoard, 84) \
  X(MultiGpuBoardGroupID, 85) X(HostNativeAtomicSupported, 86) X(SingleToDoublePrecisionPerfRatio, 87) \
  X(PageableMemoryAccess, 88) X(ConcurrentManagedAccess, 89) X(ComputePreemptionSupported, 90) \
  X(CanUseHostPointerForRegisteredMem, 91) X(Reserved92, 92) X(Reserved93, 93) X(Reserved94, 94) \
  X(CooperativeLaunch, 95) X(Reserved96, 96) X(MaxSharedMemoryPerBlockOptin, 97) X(CanFlushRemoteWrites, 98) \
  X(HostRegisterSupported, 99) X(PageableMemoryAccessUsesHostPageTables, 100) \
  X(DirectManagedMemAccessFromHost, 101) X(MaxBlocksPerMultiprocessor, 106) X(MaxPersistingL2CacheSize, 108) \
  X(MaxAccessPolicyWindowSize, 109) X(ReservedSharedMemoryPerBlock, 111) X(SparseCudaArraySupported, 112) \
  X(HostRegisterReadOnlySupported, 113) X(TimelineSemaphoreInteropSupported, 114) \
  X(MemoryPoolsSupported, 115) X(GPUDirectRDMASupported, 116) X(GPUDirectRDMAFlushWritesOptions, 117) \
  X(GPUDirectRDMAWritesOrdering, 118) X(MemoryPoolSupportedHandleTypes, 119) X(ClusterLaunch, 120) \
  X(DeferredMappingCudaArraySupported, 121) X(Reserved122, 122) X(Reserved123, 123) X(Reserved124, 124) \
  X(IpcEventSupport, 125) X(MemSyncDomainCount, 126) X(Reserved127, 127) X(Reserved128, 128) \
  X(Reserved129, 129) X(NumaConfig, 130) X(NumaId, 131) X(Reserved132, 132) X(MpsEnabled, 133) \
  X(HostNumaId, 134) X(D3D12CigSupported, 135) X(VulkanCigSupported, 138) X(GpuPciDeviceId, 139) \
  X(GpuPciSubsystemId, 140) X(Reserved141, 141) X(HostNumaMemoryPoolsSupported, 142) \
  X(HostNumaMultinodeIpcSupported, 143) X(HostMemoryPoolsSupported, 144) X(Reserved145, 145) \
  X(OnlyPartialHostNativeAtomicSupported, 147) X(Max, 148)

#define XPILER_CUDA_COMPUTE_MODES(X) \
  X(Default, 0) X(Exclusive, 1) X(Prohibited, 2) X(ExclusiveProcess, 3)

// The driver API's CUresult (cuda.h), names without their CUDA_ prefix: X(SUCCESS, 0), X(ERROR_INVALID_VALUE, 1)...
#define XPILER_CUDA_DRIVER_ERRORS(X) \
  X(SUCCESS, 0) X(ERROR_INVALID_VALUE, 1) X(ERROR_OUT_OF_MEMORY, 2) X(ERROR_NOT_INITIALIZED, 3) \
  X(ERROR_DEINITIALIZED, 4) X(ERROR_PROFILER_DISABLED, 5) X(ERROR_PROFILER_NOT_INITIALIZED, 6) \
  X(ERROR_PROFILER_ALREADY_STARTED, 7) X(ERROR_PROFILER_ALREADY_STOPPED, 8) X(ERROR_STUB_LIBRARY, 34) \
  X(ERROR_CALL_REQUIRES_NEWER_DRIVER, 36) X(ERROR_DEVICE_UNAVAILABLE, 46) X(ERROR_NO_DEVICE, 100) \
  X(ERROR_INVALID_DEVICE, 101) X(ERROR_DEVICE_NOT_LICENSED, 102) X(ERROR_INVALID_IMAGE, 200) \
  X(ERROR_INVALID_CONTEXT, 201) X(ERROR_CONTEXT_ALREADY_CURRENT, 202) X(ERROR_MAP_FAILED, 205) \
  X(ERROR_UNMAP_FAILED, 206) X(ERROR_ARRAY_IS_MAPPED, 207) X(ERROR_ALREADY_MAPPED, 208) \
  X(ERROR_NO_BINARY_FOR_GPU, 209) X(ERROR_ALREADY_ACQUIRED, 210) X(ERROR_NOT_MAPPED, 211) \
  X(ERROR_NOT_MAPPED_AS_ARRAY, 212) X(ERROR_NOT_MAPPED_AS_POINTER, 213) X(ERROR_ECC_UNCORRECTABLE, 214) \
  X(ERROR_UNSUPPORTED_LIMIT, 215) X(ERROR_CONTEXT_ALREADY_IN_USE, 216) X(ERROR_PEER_ACCESS_UNSUPPORTED, 217) \
  X(ERROR_INVALID_PTX, 218) X(ERROR_INVALID_GRAPHICS_CONTEXT, 219) X(ERROR_NVLINK_UNCORRECTABLE, 220) \
  X(ERROR_JIT_COMPILER_NOT_FOUND, 221) X(ERROR_UNSUPPORTED_PTX_VERSION, 222) \
  X(ERROR_JIT_COMPILATION_DISABLED, 223) X(ERROR_UNSUPPORTED_EXEC_AFFINITY, 224) \
  X(ERROR_UNSUPPORTED_DEVSIDE_SYNC, 225) X(ERROR_CONTAINED, 226) X(ERROR_INVALID_SOURCE, 300) \
  X(ERROR_FILE_NOT_FOUND, 301) X(ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302) \
  X(ERROR_SHARED_OBJECT_INIT_FAILED, 303) X(ERROR_OPERATING_SYSTEM, 304) X(ERROR_INVALID_HANDLE, 400) \
  X(ERROR_ILLEGAL_STATE, 401) X(ERROR_LOSSY_QUERY, 402) X(ERROR_NOT_FOUND, 500) X(ERROR_NOT_READY, 600) \
  X(ERROR_ILLEGAL_ADDRESS, 700) X(ERROR_LAUNCH_OUT_OF_RESOURCES, 701) X(ERROR_LAUNCH_TIMEOUT, 702) \
  X(ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703) X(ERROR_PEER_ACCESS_ALREADY_ENABLED, 704) \
  X(ERROR_PEER_ACCESS_NOT_ENABLED, 705) X(ERROR_PRIMARY_CONTEXT_ACTIVE, 708) X(ERROR_CONTEXT_IS_DESTROYED, 709) \
  X(ERROR_ASSERT, 710) X(ERROR_TOO_MANY_PEERS, 711) X(ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712) \
  X(ERROR_HOST_MEMORY_NOT_REGISTERED, 713) X(ERROR_HARDWARE_STACK_ERROR, 714) X(ERROR_ILLEGAL_INSTRUCTION, 715) \
  X(ERROR_MISALIGNED_ADDRESS, 716) X(ERROR_INVALID_ADDRESS_SPACE, 717) X(ERROR_INVALID_PC, 718) \
  X(ERROR_LAUNCH_FAILED, 719) X(ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720) X(ERROR_TENSOR_MEMORY_LEAK, 721) \
  X(ERROR_NOT_PERMITTED, 800) X(ERROR_NOT_SUPPORTED, 801) X(ERROR_SYSTEM_NOT_READY, 802) \
  X(ERROR_SYSTEM_DRIVER_MISMATCH, 803) X(ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804) \
  X(ERROR_MPS_CONNECTION_FAILED, 805) X(ERROR_MPS_RPC_FAILURE, 806) X(ERROR_MPS_SERVER_NOT_READY, 807) \
  X(ERROR_MPS_MAX_CLIENTS_REACHED, 808) X(ERROR_MPS_MAX_CONNECTIONS_REACHED, 809) \
  X(ERROR_MPS_CLIENT_TERMINATED, 810) X(ERROR_CDP_NOT_SUPPORTED, 811) X(ERROR_CDP_VERSION_MISMATCH, 812) \
  X(ERROR_STREAM_CAPTURE_UNSUPPORTED, 900) X(ERROR_STREAM_CAPTURE_INVALIDATED, 901) \
  X(ERROR_STREAM_CAPTURE_MERGE, 902) X(ERROR_STREAM_CAPTURE_UNMATCHED, 903) \
  X(ERROR_STREAM_CAPTURE_UNJOINED, 904) X(ERROR_STREAM_CAPTURE_ISOLATION, 905) \
  X(ERROR_STREAM_CAPTURE_IMPLICIT, 906) X(ERROR_CAPTURED_EVENT, 907) X(ERROR_STREAM_CAPTURE_WRONG_THREAD, 908) \
  X(ERROR_TIMEOUT, 909) X(ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910) X(ERROR_EXTERNAL_DEVICE, 911) \
  X(ERROR_INVALID_CLUSTER_SIZE, 912) X(ERROR_FUNCTION_NOT_LOADED, 913) X(ERROR_INVALID_RESOURCE_TYPE, 914) \
  X(ERROR_INVALID_RESOURCE_CONFIGURATION, 915) X(ERROR_KEY_ROTATION, 916) X(ERROR_UNKNOWN, 999)
