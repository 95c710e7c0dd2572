// Row-wise softmax: one block per row, a warp-shuffle reduction per warp and a shared-memory
// reduction across the warps of the block. Host entry launches it on a stream.
#include <cuda_runtime.h>
#include <math.h>

constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T warp_reduce_max(T value) {
#pragma unroll
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
    }
    return value;
}

template <typename T>
__device__ __forceinline__ T warp_reduce_sum(T value) {
#pragma unroll
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        value += __shfl_down_sync(kFullMask, value, offset);
    }
    return __shfl_sync(kFullMask, value, 0);
}

// y[row, :] = softmax(x[row, :]); BLOCK threads per row, BLOCK a multiple of 32.
template <typename T, int BLOCK = 256>
__global__ void __launch_bounds__(BLOCK) softmax_warp(const T* __restrict__ x, T* __restrict__ y, int rows,
                                                      int cols) {
    __shared__ float warp_partial[BLOCK / 32];
    __shared__ float row_stat;
    const int row = blockIdx.x;
    if (row >= rows) {
        return;
    }
    const int lane = threadIdx.x % warpSize;
    const int warp = threadIdx.x / warpSize;
    const T* in = x + static_cast<size_t>(row) * cols;
    T* out = y + static_cast<size_t>(row) * cols;

    float local_max = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        local_max = fmaxf(local_max, static_cast<float>(in[c]));
    }
    local_max = warp_reduce_max(local_max);
    if (lane == 0) {
        warp_partial[warp] = local_max;
    }
    __syncthreads();
    if (warp == 0) {
        float v = lane < BLOCK / 32 ? warp_partial[lane] : -INFINITY;
        v = warp_reduce_max(v);
        if (lane == 0) {
            row_stat = v;
        }
    }
    __syncthreads();
    const float row_max = row_stat;

    float local_sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        local_sum += __expf(static_cast<float>(in[c]) - row_max);
    }
    local_sum = warp_reduce_sum(local_sum);
    __syncthreads();
    if (lane == 0) {
        warp_partial[warp] = local_sum;
    }
    __syncthreads();
    if (warp == 0) {
        float v = lane < BLOCK / 32 ? warp_partial[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) {
            row_stat = v;
        }
    }
    __syncthreads();
    const float inv_sum = 1.0f / row_stat;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        out[c] = static_cast<T>(__expf(static_cast<float>(in[c]) - row_max) * inv_sum);
    }
}

extern "C" void softmax_forward(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
    constexpr int kBlock = 256;
    softmax_warp<float, kBlock><<<rows, kBlock, 0, stream>>>(x, y, rows, cols);
}
