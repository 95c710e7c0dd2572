// Embedding lookup: out[i, :] = table[idx[i], :]. threadIdx.x walks the embedding dimension,
// threadIdx.y picks one of 8 lookups per block.
__global__ void embedding_gather_kernel(const float* __restrict__ table, const int* __restrict__ idx,
                                        float* __restrict__ out, int num_idx, int dim) {
  const int i = blockIdx.x * blockDim.y + threadIdx.y;
  if (i >= num_idx) return;
  const int row = idx[i];
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    out[(size_t)i * dim + d] = table[(size_t)row * dim + d];
  }
}
