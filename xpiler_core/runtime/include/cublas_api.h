// cuBLAS on the CPU runtime (xpiler/blas.h).
#pragma once
#include "cuda_runtime.h"
#include "xpiler/blas.h"
