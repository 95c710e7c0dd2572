// c = a + b with the addition written in inline PTX (the rules cannot translate this asm).
extern "C" __global__ void add_ptx(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float r;
        asm volatile("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a[i]), "f"(b[i]));
        c[i] = r;
    }
}
