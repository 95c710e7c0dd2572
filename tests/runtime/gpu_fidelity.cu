// Warp, block and atomic semantics whose results a CUDA GPU defines exactly: printed from the host.
#include <cstdio>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void warp_ops(const int* in, int* out) {
  int t = threadIdx.x, lane = t % 32, warp = t / 32;
  int v = in[blockIdx.x * blockDim.x + t];
  int sum = v;
  for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
  int x = v;
  for (int o = 1; o < 32; o *= 2) x = max(x, __shfl_xor_sync(0xffffffffu, x, o));
  unsigned odd = __ballot_sync(0xffffffffu, v & 1);
  int up = __shfl_up_sync(0xffffffffu, v, 3);
  int idx = __shfl_sync(0xffffffffu, v, (lane * 7) % 32);
  int any = __any_sync(0xffffffffu, v > 90), all = __all_sync(0xffffffffu, v >= 0);
  unsigned low = 0;
  if (lane < 20) low = __ballot_sync(0x000fffffu, v % 3 == 0);
  int width8 = __shfl_sync(0xffffffffu, v, 0, 8);
  int base = (blockIdx.x * blockDim.x + t) * 10;
  out[base + 0] = sum; out[base + 1] = x; out[base + 2] = (int)odd; out[base + 3] = up;
  out[base + 4] = idx; out[base + 5] = any * 2 + all; out[base + 6] = (int)low; out[base + 7] = width8;
  out[base + 8] = __popc(odd) + __ffs(odd) * 100 + __clz(odd) * 10000;
  out[base + 9] = warp;
}

__global__ void block_ops(const int* in, int* out, int* counters) {
  int t = threadIdx.x;
  int v = in[blockIdx.x * blockDim.x + t];
  int c = __syncthreads_count(v % 5 == 0);
  int o = __syncthreads_or(v == 77);
  int a = __syncthreads_and(v < 100);
  atomicAdd(&counters[0], v);
  atomicMax(&counters[1], v * 3 - 50);
  atomicMin(&counters[2], v - 17);
  atomicOr(&counters[3], 1 << (v % 31));
  atomicXor(&counters[4], v);
  unsigned old = atomicInc((unsigned*)&counters[5], 37u);
  (void)old;
  if (t == 0) { out[blockIdx.x * 3] = c; out[blockIdx.x * 3 + 1] = o; out[blockIdx.x * 3 + 2] = a; }
}

__global__ void groups(const int* in, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  int s = cg::reduce(tile, v, cg::plus<int>());
  int m = cg::reduce(tile, v, cg::greater<int>());
  int shifted = tile.shfl_down(v, 1);
  int r = tile.thread_rank() + 100 * tile.meta_group_rank();
  unsigned b = tile.ballot(v & 2);
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * 5;
  out[base] = s; out[base + 1] = m; out[base + 2] = shifted; out[base + 3] = r; out[base + 4] = (int)b;
}

__global__ void float_ops(const float* in, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  float w = v;
  for (int o = 16; o > 0; o /= 2) w += __shfl_down_sync(0xffffffffu, w, o);
  out[i * 4] = w; out[i * 4 + 1] = sqrtf(v); out[i * 4 + 2] = fmaf(v, 0.5f, 1.25f); out[i * 4 + 3] = floorf(v / 3.0f);
}

int main() {
  const int blocks = 3, threads = 128, n = blocks * threads;
  int h[n]; float hf[n];
  for (int i = 0; i < n; ++i) { h[i] = (i * 37 + 11) % 101; hf[i] = (float)((i * 13) % 29) * 0.25f; }
  int *din, *dout, *dcnt; float *dfin, *dfout;
  cudaMalloc(&din, n * sizeof(int)); cudaMalloc(&dout, n * 10 * sizeof(int)); cudaMalloc(&dcnt, 6 * sizeof(int));
  cudaMalloc(&dfin, n * sizeof(float)); cudaMalloc(&dfout, n * 4 * sizeof(float));
  cudaMemcpy(din, h, sizeof h, cudaMemcpyHostToDevice);
  cudaMemcpy(dfin, hf, sizeof hf, cudaMemcpyHostToDevice);
  int init[6] = {0, -1000, 1000, 0, 0, 0};
  cudaMemcpy(dcnt, init, sizeof init, cudaMemcpyHostToDevice);
  static int out[n * 10];
  warp_ops<<<blocks, threads>>>(din, dout);
  cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
  long long check = 0;
  for (int i = 0; i < n * 10; ++i) check = check * 31 + out[i];
  printf("warp ops: %lld\n", check);
  for (int i = 0; i < 40; ++i) printf("%d%c", out[i * 10 + i % 10], i % 20 == 19 ? '\n' : ' ');
  block_ops<<<blocks, threads>>>(din, dout, dcnt);
  int cnt[6];
  cudaMemcpy(out, dout, blocks * 3 * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(cnt, dcnt, sizeof cnt, cudaMemcpyDeviceToHost);
  for (int b = 0; b < blocks; ++b) printf("block %d: count %d or %d and %d\n", b, out[b * 3], out[b * 3 + 1], out[b * 3 + 2]);
  printf("atomics: %d %d %d %d %d %d\n", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4], cnt[5]);
  groups<<<blocks, threads>>>(din, dout);
  cudaMemcpy(out, dout, n * 5 * sizeof(int), cudaMemcpyDeviceToHost);
  check = 0;
  for (int i = 0; i < n * 5; ++i) check = check * 31 + out[i];
  printf("groups: %lld\n", check);
  float_ops<<<blocks, threads>>>(dfin, dfout);
  static float fo[n * 4];
  cudaMemcpy(fo, dfout, sizeof fo, cudaMemcpyDeviceToHost);
  double fsum = 0;
  for (int i = 0; i < n * 4; ++i) fsum += fo[i] * ((i % 7) + 1);
  printf("floats: %.4f %.4f %.4f\n", fsum, fo[0], fo[4 * 33]);
  cudaError_t e = cudaGetLastError();
  printf("%s\n", e == cudaSuccess ? "no error" : cudaGetErrorString(e));
  return 0;
}
