// CUDA declares part of its device API in this header; the runtime declares all of it in cuda_runtime.h.
#pragma once
#include "cuda_runtime.h"
