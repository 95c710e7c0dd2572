// cuda_fp8.h on the CPU: the e4m3 and e5m2 8-bit floats (one byte each, pairs and quads), their conversions
// rounding to nearest, ties to even, with CUDA's saturation modes (see xpiler/fp8.h).
#pragma once
#include "xpiler/fp8.h"
