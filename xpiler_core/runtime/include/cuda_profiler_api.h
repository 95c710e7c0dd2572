// cuda_profiler_api.h on the CPU runtime: cudaProfilerStart/Stop are declared with the runtime API.
#pragma once
#include "cuda_runtime.h"
