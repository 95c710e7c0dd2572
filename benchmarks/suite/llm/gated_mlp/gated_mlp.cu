// SwiGLU feed-forward block: out = (silu(x Wg) * (x Wu)) Wd, x: (M, hidden), Wg/Wu: (hidden, inter),
// Wd: (inter, hidden). The host entry owns device buffers, launches the fused gate/up kernel and then a
// tiled GEMM for the down projection.
#include <cuda_runtime.h>

#define TILE 16

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

__global__ void gate_up_kernel(const float* __restrict__ x, const float* __restrict__ wg, const float* __restrict__ wu,
                               float* __restrict__ h, int M, int hidden, int inter) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || f >= inter) return;
  float g = 0.0f, u = 0.0f;
  for (int k = 0; k < hidden; ++k) {
    const float xv = x[(size_t)m * hidden + k];
    g += xv * wg[(size_t)k * inter + f];
    u += xv * wu[(size_t)k * inter + f];
  }
  h[(size_t)m * inter + f] = silu(g) * u;
}

__global__ void down_proj_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                 int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(size_t)row * K + k0 + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (k0 + threadIdx.y < K && col < N) ? B[(size_t)(k0 + threadIdx.y) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

extern "C" void gated_mlp_forward(const float* x, const float* w_gate, const float* w_up, const float* w_down,
                                  float* out, int M, int hidden, int inter) {
  float *d_x, *d_wg, *d_wu, *d_wd, *d_h, *d_out;
  cudaMalloc(&d_x, sizeof(float) * M * hidden);
  cudaMalloc(&d_wg, sizeof(float) * hidden * inter);
  cudaMalloc(&d_wu, sizeof(float) * hidden * inter);
  cudaMalloc(&d_wd, sizeof(float) * inter * hidden);
  cudaMalloc(&d_h, sizeof(float) * M * inter);
  cudaMalloc(&d_out, sizeof(float) * M * hidden);
  cudaMemcpy(d_x, x, sizeof(float) * M * hidden, cudaMemcpyHostToDevice);
  cudaMemcpy(d_wg, w_gate, sizeof(float) * hidden * inter, cudaMemcpyHostToDevice);
  cudaMemcpy(d_wu, w_up, sizeof(float) * hidden * inter, cudaMemcpyHostToDevice);
  cudaMemcpy(d_wd, w_down, sizeof(float) * inter * hidden, cudaMemcpyHostToDevice);

  dim3 block(TILE, TILE);
  dim3 grid_up((inter + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gate_up_kernel<<<grid_up, block>>>(d_x, d_wg, d_wu, d_h, M, hidden, inter);
  dim3 grid_down((hidden + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  down_proj_kernel<<<grid_down, block>>>(d_h, d_wd, d_out, M, hidden, inter);
  cudaDeviceSynchronize();

  cudaMemcpy(out, d_out, sizeof(float) * M * hidden, cudaMemcpyDeviceToHost);
  cudaFree(d_x);
  cudaFree(d_wg);
  cudaFree(d_wu);
  cudaFree(d_wd);
  cudaFree(d_h);
  cudaFree(d_out);
}
