// 3x3 convolution, stride 1, padding 1, NCHW data and KCRS weights, one output per thread (TVM style).
extern "C" __global__ void __launch_bounds__(256) default_function_kernel(float* __restrict__ conv2d_nchw, const float* __restrict__ data, const float* __restrict__ kernel, int n, int c, int h, int w, int k) {
  float conv2d_nchw_local[1];
  if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < ((n * k) * h) * w) {
    int ow = (((int)blockIdx.x) * 256 + ((int)threadIdx.x)) % w;
    int oh = ((((int)blockIdx.x) * 256 + ((int)threadIdx.x)) / w) % h;
    int ok = ((((int)blockIdx.x) * 256 + ((int)threadIdx.x)) / (w * h)) % k;
    int on = (((int)blockIdx.x) * 256 + ((int)threadIdx.x)) / ((w * h) * k);
    conv2d_nchw_local[0] = 0.000000e+00f;
    for (int rc = 0; rc < c; ++rc) {
      for (int ry = 0; ry < 3; ++ry) {
        for (int rx = 0; rx < 3; ++rx) {
          conv2d_nchw_local[0] = (conv2d_nchw_local[0] + ((((((1 <= (oh + ry)) && ((oh + ry) < (h + 1))) && (1 <= (ow + rx))) && ((ow + rx) < (w + 1))) ? data[((((((on * c) + rc) * h) + ((oh + ry) - 1)) * w) + ((ow + rx) - 1))] : 0.000000e+00f) * kernel[((((((ok * c) + rc) * 3) + ry) * 3) + rx)]));
        }
      }
    }
    conv2d_nchw[((((int)blockIdx.x) * 256) + ((int)threadIdx.x))] = conv2d_nchw_local[0];
  }
}
