// y = 2 x + 1, one thread per element.
#include <cuda_runtime.h>

__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = 2.0f * x[i] + 1.0f;
    }
}
