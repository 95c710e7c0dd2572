// cuda_pipeline_primitives.h on the CPU: the pipeline primitives (see xpiler/async_copy.h).
#pragma once
#include "xpiler/async_copy.h"
