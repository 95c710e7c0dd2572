// cuComplex.h on the CPU runtime.
#pragma once
#include "cuda_runtime.h"
#include "xpiler/complex.h"
