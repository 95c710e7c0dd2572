// 3x3 max pooling, stride 2, padding 1 on NCHW (TVM style); padded cells never win.
extern "C" __global__ void __launch_bounds__(256) default_function_kernel(float* __restrict__ pool_max, const float* __restrict__ data, int nc, int h, int w, int oh, int ow) {
  float pool_max_local[1];
  if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < (nc * oh) * ow) {
    int ax3 = (((int)blockIdx.x) * 256 + ((int)threadIdx.x)) % ow;
    int ax2 = ((((int)blockIdx.x) * 256 + ((int)threadIdx.x)) / ow) % oh;
    int ax01 = (((int)blockIdx.x) * 256 + ((int)threadIdx.x)) / (ow * oh);
    pool_max_local[0] = -3.402823e+38f;
    for (int rv0 = 0; rv0 < 3; ++rv0) {
      for (int rv1 = 0; rv1 < 3; ++rv1) {
        pool_max_local[0] = max(pool_max_local[0], (((((1 <= ((ax2 * 2) + rv0)) && (((ax2 * 2) + rv0) < (h + 1))) && (1 <= ((ax3 * 2) + rv1))) && (((ax3 * 2) + rv1) < (w + 1))) ? data[((((ax01 * h) + (((ax2 * 2) + rv0) - 1)) * w) + (((ax3 * 2) + rv1) - 1))] : -3.402823e+38f));
      }
    }
    pool_max[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = pool_max_local[0];
  }
}
