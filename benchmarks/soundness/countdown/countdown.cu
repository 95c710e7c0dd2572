// Each thread counts its own copy of n down while it strides over y (stride: the grid's thread count).
__global__ void countdown(float* y, int n, int stride, int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  while (n > 0 && i < len) {
    y[i] += 1.0f;
    i += stride;
    n--;
  }
}
