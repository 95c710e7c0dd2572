// hip_complex.h on the CPU runtime.
#pragma once
#include "hip_runtime.h"
#include "../xpiler/complex.h"
