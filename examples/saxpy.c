/* SAXPY on the CPU: y = a * x + y, parallelized and vectorized with OpenMP. */
#include <stddef.h>

void saxpy(int n, float a, const float *restrict x, float *restrict y) {
#pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; ++i) {
        y[i] = a * x[i] + y[i];
    }
}
