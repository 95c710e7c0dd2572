// ReLU in HIP: a grid-stride kernel and a host entry that launches it with hipLaunchKernelGGL.
#include <hip/hip_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

extern "C" hipError_t relu_forward(const float* x, float* y, int n, hipStream_t stream) {
    const int block = 256;
    const int grid = (n + block - 1) / block;
    hipLaunchKernelGGL(relu_kernel, dim3(grid), dim3(block), 0, stream, x, y, n);
    return hipGetLastError();
}
