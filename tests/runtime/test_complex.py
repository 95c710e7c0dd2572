"""cuComplex.h and hip_complex.h on the runtime, checked against numpy's complex arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from xpiler_core.dialect import Dialect

BODY = r"""
__global__ void complex_ops(const @F@* a, const @F@* b, @F@* prod, @F@* quot, float* mag,
                            const @D@* c, @D@* dprod, double* dmag, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  prod[i] = @P@Cfmaf(a[i], @P@Conjf(b[i]), make_@P@FloatComplex(0.5f, -1.0f));
  quot[i] = @P@Cdivf(a[i], b[i]);
  mag[i] = @P@Cabsf(@P@Csubf(a[i], b[i]));
  dprod[i] = @P@Cmul(c[i], @P@ComplexFloatToDouble(a[i]));
  dmag[i] = @P@Cabs(c[i]) + @P@Creal(c[i]) * @P@Cimag(c[i]);
}
extern "C" void t_complex(const @F@* a, const @F@* b, @F@* prod, @F@* quot, float* mag, const @D@* c, @D@* dprod,
                          double* dmag, int n) {
  complex_ops<<<(n + 63) / 64, 64>>>(a, b, prod, quot, mag, c, dprod, dmag, n);
}
"""
SOURCES = {
    Dialect.CUDA: "#include <cuComplex.h>\n" + BODY.replace("@F@", "cuFloatComplex").replace(
        "@D@", "cuDoubleComplex").replace("@P@", "cu"),
    Dialect.HIP: "#include <hip/hip_runtime.h>\n#include <hip/hip_complex.h>\n" + BODY.replace(
        "@F@", "hipFloatComplex").replace("@D@", "hipDoubleComplex").replace("@P@", "hip"),
}


@pytest.mark.parametrize("dialect", [Dialect.CUDA, Dialect.HIP])
def test_complex_arithmetic_matches_numpy(built_factory, dialect: Dialect) -> None:  # type: ignore[no-untyped-def]
    lib = built_factory(SOURCES[dialect], dialect, 64 if dialect is Dialect.HIP else 32)
    n = 150
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    b = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    c = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    empty64, empty128 = np.zeros(n, np.complex64), np.zeros(n, np.complex128)
    outs = lib.outputs("t_complex", [a.view(np.float32), b.view(np.float32), empty64.view(np.float32),
                                     empty64.view(np.float32), np.zeros(n, np.float32), c.view(np.float64),
                                     empty128.view(np.float64), np.zeros(n, np.float64), np.int32(n)])
    prod, quot, mag, dprod, dmag = outs[2].view(np.complex64), outs[3].view(np.complex64), outs[4], \
        outs[6].view(np.complex128), outs[7]
    np.testing.assert_allclose(prod, a * np.conj(b) + np.complex64(0.5 - 1j), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(quot, a / b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mag, np.abs(a - b), rtol=1e-6)
    np.testing.assert_allclose(dprod, c * a.astype(np.complex128), rtol=1e-12)
    np.testing.assert_allclose(dmag, np.abs(c) + c.real * c.imag, rtol=1e-12)
