#pragma once
#include "cuda_runtime.h"
#define CUDA_VERSION 12000
