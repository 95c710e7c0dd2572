"""CPU GEMM tensorization: a block function whose threads compute a matrix product becomes a packed,
register-blocked micro-kernel call (the method's tensorization step for the CPU target).

Input: the output of ``loop_recovery`` (block loops ``xp_bz``/``xp_by``/``xp_bx`` around thread loops). One
symbolic thread of the block body is evaluated (``support/bang_thread``) and the matrix product it computes
is recognized from its dataflow (``support/matmul_shape``): any kernel whose thread stores
``E(sum_k X[row*lda + k] * Y[k*ldb + col])`` (batched over ``blockIdx.z`` or not, through helpers, pointer
offsets, early exits; ``Y`` row-major or ``[N][K]``) is found whatever its spelling; shared-memory staging,
warp shuffles and other shapes stay scalar (the pass refuses with the reason).

Emitted before the block loops, behind run-time preconditions (the recognized block sizes are the launch's,
one thread in z, output rows do not overlap; else the original loops run): per batch, ``xp_sgemm`` over the
rows and columns the guards and the grid cover. ``xp_sgemm`` packs ``B`` in ``kc x NR`` panels and ``A`` in
``MR x kc`` panels (zero padded, so ragged edges need no special path) within ``mc x kc x nc`` cache blocks,
and multiplies them with an ``MR x NR`` register tile of 8-float vectors (GCC vector extensions: AVX and FMA
instructions where the target has them, SSE otherwise); row blocks are shared over OpenMP threads when the
block's work pays for a parallel region. Sums are accumulated in ``float`` as the source does, blocked over
``k`` (a reassociation: the plan verifies the result and drops the pass when it fails). An element-wise
epilogue or several products sharing the left operand go through ``float`` scratch matrices, then the
source's epilogue expression per element. Parameters ``mc``, ``kc``, ``nc`` (cache blocks) are declared for
the tuner.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from xpiler_core import ast as A
from xpiler_core.dialect import Dialect
from xpiler_core.passes.base import ParamSpec, PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, guarded_fast_path, int_param, leave
from xpiler_core.passes.support.bang_thread import (
    Poly,
    ThreadEvaluator,
    module_int_constants,
    stmts_of,
    strip_casts,
)
from xpiler_core.passes.support.cpu_prelude import GEMM_MARK
from xpiler_core.passes.support.function_macros import Macros, expand_macros, function_macros
from xpiler_core.passes.support.implicit_gemm import Coord, Gathered, ImplicitGemm
from xpiler_core.passes.support.implicit_gemm import recognize as recognize_implicit
from xpiler_core.passes.support.matmul_shape import MatmulShape, Operand, recognize
from xpiler_core.passes.support.per_function import is_bound_kernel, rewrite_each
from xpiler_core.printer import print_expr

INFO = PassInfo(
    name="cpu_gemm",
    summary="Threads that compute a matrix product → packed, register-blocked micro-kernel (xp_sgemm)",
    kind="ast",
    directions=("cuda->cpu",),
    params=(
        ParamSpec("mc", "int", 96, "rows of A per cache block (a multiple of the 6-row register tile)",
                  (96, 48, 144, 192)),
        ParamSpec("kc", "int", 256, "depth of a cache block (k values per packed panel)", (256, 128, 384, 512)),
        ParamSpec("nc", "int", 2048, "columns of B per cache block (a multiple of the 16-column register tile)",
                  (2048, 512, 1024, 4096)),
    ),
)

MR, NR = 6, 16
# work (multiply-adds) below which a cache block runs on one thread, and elements below which a gather or a
# scatter does: entering a parallel region whose threads have gone to sleep costs ~50 µs (measured with
# OMP_WAIT_POLICY=passive, which libgomp falls into when threads outnumber cores: a 0.9 MFLOP implicit GEMM took
# 72 µs in two threads against 25 µs in one)
PARALLEL_WORK = 1 << 21
PARALLEL_ELEMENTS = 1 << 18
# floats the gathered operands and the product of an implicit GEMM may take (1 GiB); larger runs the loops
GATHER_FLOATS = 1 << 28

HELPER = GEMM_MARK + r"""
/* C[i*ldc + j] = sum_k A[i*ars + k*acs] * B[k*brs + j*bcs] over [0,M) x [0,N): B packed in kc x 16 panels,
   A in 6 x kc panels (zero padded), a 6 x 16 register tile of 8-float vectors (6 x 32 of 16-float vectors on
   AVX-512), k blocked by kc. */
typedef float xp_gemm_v8 __attribute__((vector_size(32)));
static inline void xp_gemm_micro(long kc, const float *__restrict__ ap, const float *__restrict__ bp, float *c,
                                 long ldc, int mr, int nr, int first) {
  const xp_gemm_v8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
  xp_gemm_v8 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) { acc[i][0] = zero; acc[i][1] = zero; }
  for (long p = 0; p < kc; ++p) {
    xp_gemm_v8 b0, b1;
    memcpy(&b0, bp + p * 16, sizeof b0);
    memcpy(&b1, bp + p * 16 + 8, sizeof b1);
    const float *a = ap + p * 6;
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const float s = a[i];
      const xp_gemm_v8 av = {s, s, s, s, s, s, s, s};
      acc[i][0] += av * b0;
      acc[i][1] += av * b1;
    }
  }
  if (mr == 6 && nr == 16) {
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      float *ci = c + i * ldc;
      if (!first) {
        xp_gemm_v8 c0, c1;
        memcpy(&c0, ci, sizeof c0);
        memcpy(&c1, ci + 8, sizeof c1);
        acc[i][0] += c0;
        acc[i][1] += c1;
      }
      memcpy(ci, &acc[i][0], sizeof acc[i][0]);
      memcpy(ci + 8, &acc[i][1], sizeof acc[i][1]);
    }
    return;
  }
  float tile[6][16];
  memcpy(tile, acc, sizeof tile);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = (first ? 0.0f : c[i * ldc + j]) + tile[i][j];
}
#if defined(__x86_64__) || defined(__i386__)
/* 512-bit FMA where the CPU has it, chosen when the program runs (the output still runs on CPUs without it):
   a 6 x 32 register tile over two adjacent 16-column panels of packed B (the 6 x 16 tile of 8-float vectors
   reaches the AVX2 peak, ~0.6x of a BLAS that uses AVX-512) */
typedef float xp_gemm_v16 __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) static void xp_gemm_micro_wide(
    long kc, const float *__restrict__ ap, const float *__restrict__ bp0, const float *__restrict__ bp1, float *c,
    long ldc, int mr, int nr, int first) {
  xp_gemm_v16 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = (xp_gemm_v16){};
    acc[i][1] = (xp_gemm_v16){};
  }
  for (long p = 0; p < kc; ++p) {
    xp_gemm_v16 b0, b1;
    memcpy(&b0, bp0 + p * 16, sizeof b0);
    memcpy(&b1, bp1 + p * 16, sizeof b1);
    const float *a = ap + p * 6;
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const float s = a[i];
      const xp_gemm_v16 av = {s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
      acc[i][0] += av * b0;
      acc[i][1] += av * b1;
    }
  }
  if (mr == 6 && nr == 32) {
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      float *ci = c + i * ldc;
      if (!first) {
        xp_gemm_v16 c0, c1;
        memcpy(&c0, ci, sizeof c0);
        memcpy(&c1, ci + 16, sizeof c1);
        acc[i][0] += c0;
        acc[i][1] += c1;
      }
      memcpy(ci, &acc[i][0], sizeof acc[i][0]);
      memcpy(ci + 16, &acc[i][1], sizeof acc[i][1]);
    }
    return;
  }
  float tile[6][32];
  memcpy(tile, acc, sizeof tile);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = (first ? 0.0f : c[i * ldc + j]) + tile[i][j];
}
static int xp_gemm_has_wide(void) {
  static const int wide = __builtin_cpu_supports("avx512f");
  return wide;
}
#else
static void xp_gemm_micro_wide(long, const float *, const float *, const float *, float *, long, int, int, int) {}
static int xp_gemm_has_wide(void) { return 0; }
#endif
static void xp_gemm_pack_a(long mc, long kc, const float *a, long ars, long acs, float *ap) {
  for (long i0 = 0; i0 < mc; i0 += 6) {
    const long mr = mc - i0 < 6 ? mc - i0 : 6;
    for (long p = 0; p < kc; ++p)
      for (long i = 0; i < 6; ++i) *ap++ = i < mr ? a[(i0 + i) * ars + p * acs] : 0.0f;
  }
}
static void xp_gemm_pack_b(long kc, long nc, const float *b, long brs, long bcs, float *bp) {
  for (long j0 = 0; j0 < nc; j0 += 16) {
    const long nr = nc - j0 < 16 ? nc - j0 : 16;
    for (long p = 0; p < kc; ++p, bp += 16) {
      const float *row = b + p * brs + j0 * bcs;
      if (nr == 16 && bcs == 1) { memcpy(bp, row, 16 * sizeof(float)); continue; }
      for (long j = 0; j < 16; ++j) bp[j] = j < nr ? row[j * bcs] : 0.0f;
    }
  }
}
static void *xp_gemm_alloc(long floats) {
  const size_t bytes = ((size_t)(floats > 0 ? floats : 1) * sizeof(float) + 63) / 64 * 64;
  void *p = aligned_alloc(64, bytes);
  if (!p) { fprintf(stderr, "xp_sgemm: out of memory\n"); abort(); }
  return p;
}
/* a packing buffer kept by the calling thread between calls (slot 0: B panels, 1: A panels): allocating and
   freeing them on every call cost as much as the multiply on small products */
struct xp_gemm_buffers {
  float *data[2] = {nullptr, nullptr};
  long capacity[2] = {0, 0};
  ~xp_gemm_buffers() { free(data[0]); free(data[1]); } /* freed when the thread ends */
};
static float *xp_gemm_scratch(int slot, long floats) {
  static thread_local xp_gemm_buffers kept;
  if (floats > kept.capacity[slot]) {
    free(kept.data[slot]);
    kept.data[slot] = (float *)xp_gemm_alloc(floats);
    kept.capacity[slot] = floats;
  }
  return kept.data[slot];
}
/* row blocks part, part + parts, ... of one (jc, pc) panel over its columns [jlo, jhi) (no worksharing
   construct: callable on its own or from a team it splits). A packed beforehand (``apk``: 6-row panels of all
   K columns, [ceil(M/6)][K][6], zero padded) is read in place; else each row block is packed here. */
static void xp_gemm_row_blocks(long M, long MC, long blocks, long kc, long jlo, long jhi, long pc, long jc,
                               const float *A, long ars, long acs, const float *apk, long K, const float *bp,
                               float *C, long ldc, int part, int parts) {
  float *ap = apk ? NULL : xp_gemm_scratch(1, (M < MC ? (M + 5) / 6 * 6 : MC) * kc);
  const int wide = xp_gemm_has_wide();
  for (long ib = part; ib < blocks; ib += parts) {
    const long ic = ib * MC, mc = M - ic < MC ? M - ic : MC;
    if (!apk) xp_gemm_pack_a(mc, kc, A + ic * ars + pc * acs, ars, acs, ap);
    long jr = jlo;
    if (wide)
      for (; jhi - jr > 16; jr += 32)
        for (long ir = 0; ir < mc; ir += 6)
          xp_gemm_micro_wide(kc, apk ? apk + (ic + ir) * K + pc * 6 : ap + ir * kc, bp + jr * kc,
                             bp + (jr + 16) * kc, C + (ic + ir) * ldc + jc + jr, ldc,
                             (int)(mc - ir < 6 ? mc - ir : 6), (int)(jhi - jr < 32 ? jhi - jr : 32), pc == 0);
    for (; jr < jhi; jr += 16)
      for (long ir = 0; ir < mc; ir += 6)
        xp_gemm_micro(kc, apk ? apk + (ic + ir) * K + pc * 6 : ap + ir * kc, bp + jr * kc,
                      C + (ic + ir) * ldc + jc + jr, ldc, (int)(mc - ir < 6 ? mc - ir : 6),
                      (int)(jhi - jr < 16 ? jhi - jr : 16), pc == 0);
  }
}
static void xp_sgemm(long M, long N, long K, const float *A, long ars, long acs, const float *B, long brs, long bcs,
                     float *C, long ldc, long MC, long KC, long NC, int a_packed) {
  const float *apk = a_packed ? A : NULL; /* [ceil(M/6)][K][6]: ars and acs unused */
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (long i = 0; i < M; ++i)
      for (long j = 0; j < N; ++j) C[i * ldc + j] = 0.0f;
    return;
  }
  MC = (MC + 5) / 6 * 6;
  NC = (NC + 15) / 16 * 16;
  /* as large as the biggest panel this product packs, not the cache block: small products stay small */
  float *bp = xp_gemm_scratch(0, (K < KC ? K : KC) * (N < NC ? (N + 15) / 16 * 16 : NC));
  for (long jc = 0; jc < N; jc += NC) {
    const long nc = N - jc < NC ? N - jc : NC;
    for (long pc = 0; pc < K; pc += KC) {
      const long kc = K - pc < KC ? K - pc : KC;
      const long blocks = (M + MC - 1) / MC, panels = (nc + 15) / 16;
      /* a team only when the work pays for it: an OpenMP `if` clause would still enter the runtime */
#ifdef _OPENMP
      if ((double)M * nc * kc >= XP_GEMM_PARALLEL_WORK && !omp_in_parallel()) {
#pragma omp parallel
        {
          const int part = omp_get_thread_num(), parts = omp_get_num_threads();
          /* each thread packs its share of B's column panels */
          const long p0 = panels * part / parts, p1 = panels * (part + 1) / parts;
          const long jlo = p0 * 16, jhi = p1 * 16 < nc ? p1 * 16 : nc;
          if (jhi > jlo) xp_gemm_pack_b(kc, jhi - jlo, B + pc * brs + (jc + jlo) * bcs, brs, bcs, bp + jlo * kc);
          if (blocks >= parts || panels < 2 * parts) {
            /* row blocks shared out (a few blocks resized so that every thread gets as many): every thread
               reads all of B and packs only its own rows of A */
            long mcb = MC, nb = blocks;
            if (blocks % parts != 0 && blocks < 4 * parts) {
              nb = (blocks + parts - 1) / parts * parts;
              mcb = ((M + nb - 1) / nb + 5) / 6 * 6;
              nb = (M + mcb - 1) / mcb;
            }
#pragma omp barrier
            xp_gemm_row_blocks(M, mcb, nb, kc, 0, nc, pc, jc, A, ars, acs, apk, K, bp, C, ldc, part, parts);
          } else {
            /* fewer row blocks than threads: each thread multiplies every row block into its own columns
               (A is packed by every thread; it pays only where the rows are too few to share) */
            if (jhi > jlo)
              xp_gemm_row_blocks(M, MC, blocks, kc, jlo, jhi, pc, jc, A, ars, acs, apk, K, bp, C, ldc, 0, 1);
          }
        }
        continue;
      }
#endif
      xp_gemm_pack_b(kc, nc, B + pc * brs + jc * bcs, brs, bcs, bp);
      xp_gemm_row_blocks(M, MC, blocks, kc, 0, nc, pc, jc, A, ars, acs, apk, K, bp, C, ldc, 0, 1);
    }
  }
}
"""


def _block_nest(fn: A.Function) -> tuple[int, A.For] | None:
    """(index in the body, innermost block loop) of the top-level ``xp_bz``/``xp_by``/``xp_bx`` nest."""
    for i, s in enumerate(fn.body.stmts):
        loop: A.Stmt = s
        for var in ("xp_bz", "xp_by", "xp_bx"):
            if isinstance(loop, A.Block) and len(loop.stmts) == 1:
                loop = loop.stmts[0]
            view = loop.canonical() if isinstance(loop, A.For) else None
            if view is None or view.var != var or A.const_int(view.start) != 0 or A.const_int(view.step) != 1:
                break
            if var == "xp_bx":
                assert isinstance(loop, A.For)
                return i, loop
            assert isinstance(loop, A.For)
            loop = loop.body
    return None


def emit(shape: MatmulShape, mc: int, kc: int, nc: int) -> tuple[list[str], list[str]]:
    """(preconditions, the statements that compute the whole launch's output)."""
    pre = ["xp_bdz == 1", *shape.launch.checks] + [f"({c})" for c in shape.preconditions]
    rows = shape.launch.rows
    if shape.rows is not None:
        rows = f"xp_gemm_min({shape.rows.c_text()}, {rows})"
    cols = shape.launch.cols
    if shape.cols is not None:
        cols = f"xp_gemm_min({shape.cols.c_text()}, {cols})"
    pre.append(f"{shape.out.lead.c_text()} >= {cols}")  # output rows do not overlap

    def base(op: Operand, k_offset: str) -> str:
        return f"{op.base} + ({op.origin.c_text()} + xp_gemm_b * {op.batch_stride.c_text()}{k_offset})"

    a = shape.lhs
    k0 = shape.k_lo.c_text()
    lines = [
        f"const long xp_gemm_m = xp_gemm_max(0L, {rows});",
        f"const long xp_gemm_n = xp_gemm_max(0L, {cols});",
        f"const long xp_gemm_k = {shape.k_hi.c_text()} - {k0};",
        f"const long xp_gemm_batches = {'(long)xp_gdz' if shape.batched else '1L'};",
    ]
    direct = shape.epilogue is None and len(shape.rhs) == 1
    accs = [f"xp_mm_acc{i}" for i in range(len(shape.rhs))]
    if not direct:
        lines += [f"float *{acc} = (float *)xp_gemm_alloc(xp_gemm_m * xp_gemm_n);" for acc in accs]
    batch_loop = ["for (long xp_gemm_b = 0; xp_gemm_b < xp_gemm_batches; ++xp_gemm_b) {"]
    a_ptr = base(a, f" + {k0}")
    for b, acc in zip(shape.rhs, accs, strict=True):
        if shape.rhs_filter_layout:  # Y[col * ld + k]
            b_ptr, brs, bcs = base(b, f" + {k0}"), "1L", b.lead.c_text()
        else:  # Y[k * ld + col]
            b_ptr, brs, bcs = base(b, f" + {k0} * {b.lead.c_text()}"), b.lead.c_text(), "1L"
        out_ptr, ldc = (base(shape.out, ""), shape.out.lead.c_text()) if direct else (acc, "xp_gemm_n")
        batch_loop.append(f"xp_sgemm(xp_gemm_m, xp_gemm_n, xp_gemm_k, {a_ptr}, {a.lead.c_text()}, 1L, {b_ptr}, "
                          f"{brs}, {bcs}, {out_ptr}, {ldc}, {mc}, {kc}, {nc}, 0);")
    if direct and shape.batched:
        # batches write disjoint outputs: share them out when they offer more parallelism than one batch's row
        # blocks (each product then runs on its thread; the inner team is nested, hence one thread)
        lines += parallel_lines(
            "omp parallel for schedule(static)",
            f"xp_gemm_batches > 1 && xp_gemm_batches >= (xp_gemm_m + {mc} - 1) / {mc} && "
            "(double)xp_gemm_batches * xp_gemm_m * xp_gemm_n * xp_gemm_k >= XP_GEMM_PARALLEL_WORK",
            [*batch_loop, "}"])
        return pre, lines
    lines += batch_loop
    if direct:
        return pre, [*lines, "}"]
    value = accs[0] + "[xp_e]" if shape.epilogue is None else print_expr(shape.epilogue, Dialect.C)
    lines += parallel_lines("omp parallel for", "xp_gemm_m * xp_gemm_n >= XP_GEMM_PARALLEL_ELEMENTS", [
        "for (long xp_er = 0; xp_er < xp_gemm_m; ++xp_er)",
        "for (long xp_ec = 0; xp_ec < xp_gemm_n; ++xp_ec) {",
        "const long xp_e = xp_er * xp_gemm_n + xp_ec;",
        f"float *const xp_mm_out = {base(shape.out, '')};",
        f"const long xp_eo = xp_er * {shape.out.lead.c_text()} + xp_ec;",
        "xp_mm_out[xp_eo] = (float)(" + value + ");",
        "}",
    ])
    lines.append("}")
    lines += [f"free({acc});" for acc in accs]
    return pre, lines


def parallel_lines(pragma: str, worth_it: str, body: list[str]) -> list[str]:
    """``body`` under ``#pragma`` when ``worth_it`` holds, else a plain copy (an OpenMP ``if`` clause would
    still enter the runtime, ~0.3 µs a call: more than small products take). The text form, for these generated
    lines, of ``ast_support.parallel_or_serial``."""
    return [f"if ({worth_it}) {{", f"#pragma {pragma}", *body, "} else {", *body, "}"]


def _horner(coords: tuple[Coord, ...] | list[tuple[str, str]]) -> str:
    """Row-major linear index of loop variables over the given (name, extent) list."""
    pairs = [(c.atom, f"xp_ig_e_{c.atom}") if isinstance(c, Coord) else c for c in coords]
    out = pairs[0][0]
    for name, extent in pairs[1:]:
        out = f"({out} * {extent} + {name})"
    return out


def _loops(coords: tuple[Coord, ...]) -> list[str]:
    return [f"for (long {c.atom} = 0; {c.atom} < xp_ig_e_{c.atom}; ++{c.atom})" for c in coords]


def gather_run(operand: Gathered, var: str, lo: str, hi: str, step: int = 1) -> list[str]:
    """Statements writing ``operand`` at ``var`` = lo..hi-1 to ``xp_ig_dst``, advanced by ``step`` floats. Zero padding guards linear in
    ``var`` with a constant coefficient become the interval where they hold (zeros before and after it, the
    loads between without a test, so the copy vectorizes); guards free of ``var`` are tested once; any other
    guard keeps the per-element test."""
    run_lo, run_hi, whole, kept = [], [], [], []
    for g in operand.guards:
        try:
            coeff, rest = (g.index - g.bound).split(var)  # the guard holds where coeff * var + rest < 0
        except PassRefused:
            kept.append(g)
            continue
        if coeff == Poly():
            whole.append(f"{g.index.c_text()} < {g.bound.c_text()}")
        elif coeff.atoms() or not coeff.terms:
            kept.append(g)
        else:
            a = coeff.terms[0][1]
            if a > 0:  # var < -rest / a, i.e. var <= ceil(-rest / a) - 1
                run_hi.append(f"-xp_gemm_floordiv({rest.c_text()}, {a}L)")
            else:  # var > rest / -a
                run_lo.append(f"xp_gemm_floordiv({rest.c_text()}, {-a}L) + 1L")
    load = Gathered(operand.base, operand.offset, tuple(kept)).c_value()

    def put(value: str) -> str:
        return f"*xp_ig_dst++ = {value};" if step == 1 else f"{{ *xp_ig_dst = {value}; xp_ig_dst += {step}; }}"

    if not (run_lo or run_hi or whole):
        return [f"for (long {var} = {lo}; {var} < {hi}; ++{var})", put(load)]
    first = _max([lo, *run_lo]) if run_lo else lo
    last = _min_text([hi, *run_hi]) if run_hi else hi
    lines = ["{", f"long xp_run_lo = {first}, xp_run_hi = {last};"]
    test = " && ".join(whole)
    lines.append(f"if (xp_run_hi < xp_run_lo{' || !(' + test + ')' if whole else ''}) "
                 f"xp_run_lo = xp_run_hi = {hi};")
    lines += [f"for (long {var} = {lo}; {var} < xp_run_lo; ++{var}) {put('0.0f')}",
              f"for (long {var} = xp_run_lo; {var} < xp_run_hi; ++{var}) {put(load)}",
              f"for (long {var} = xp_run_hi; {var} < {hi}; ++{var}) {put('0.0f')}", "}"]
    return lines


def _max(values: list[str]) -> str:
    out = values[0]
    for v in values[1:]:
        out = f"xp_gemm_max({out}, {v})"
    return out


def _min_text(values: list[str]) -> str:
    out = values[0]
    for v in values[1:]:
        out = f"xp_gemm_min({out}, {v})"
    return out


def emit_implicit(shape: ImplicitGemm, mc: int, kc: int, nc: int) -> tuple[list[str], list[str]]:
    """(preconditions, statements): gather the two operands into float matrices, multiply, scatter."""
    coords = (*shape.rows, *shape.cols)
    span = [f"xp_gemm_max(0L, {hi.c_text()} - {lo.c_text()})" for _, lo, hi in shape.sums]
    sizes = {"m": " * ".join(f"xp_gemm_max(0L, {c.extent})" for c in shape.rows),
             "n": " * ".join(f"xp_gemm_max(0L, {c.extent})" for c in shape.cols), "k": " * ".join(span)}
    pre = [*shape.preconditions,
           f"(double)({sizes['m']}) * ({sizes['k']}) + (double)({sizes['k']}) * ({sizes['n']}) + "
           f"(double)({sizes['m']}) * ({sizes['n']}) <= {float(GATHER_FLOATS)}"]
    lines = [f"const long xp_ig_e_{c.atom} = xp_gemm_max(0L, {c.extent});" for c in coords]
    lines += [
        f"const long xp_gemm_m = {' * '.join(f'xp_ig_e_{c.atom}' for c in shape.rows)};",
        f"const long xp_gemm_n = {' * '.join(f'xp_ig_e_{c.atom}' for c in shape.cols)};",
        f"const long xp_gemm_k = {sizes['k']};",
        "const long xp_gemm_mp = (xp_gemm_m + 5) / 6 * 6;",
        "float *xp_ig_a = (float *)xp_gemm_alloc(xp_gemm_mp * xp_gemm_k);",
        "float *xp_ig_b = (float *)xp_gemm_alloc(xp_gemm_k * xp_gemm_n);",
        "float *xp_mm_acc0 = (float *)xp_gemm_alloc(xp_gemm_m * xp_gemm_n);",
    ]
    sum_loops = [f"for (long {v} = {lo.c_text()}; {v} < {hi.c_text()}; ++{v})" for v, lo, hi in shape.sums]
    sum_index = _horner([(v if lo == Poly() else f"({v} - {lo.c_text()})", f"({hi.c_text()} - {lo.c_text()})")
                         for v, lo, hi in shape.sums])
    # A: one row of summation terms per row coordinate tuple (an im2col matrix for a convolution), written
    # straight into the micro-kernel's 6-row panels (no second packing pass); rows past M are zero
    last_sum = shape.sums[-1]
    row = _horner(shape.rows)
    lines += parallel_lines(f"omp parallel for collapse({len(shape.rows)})",
                            "xp_gemm_m * xp_gemm_k >= XP_GEMM_PARALLEL_ELEMENTS", [
        *_loops(shape.rows), "{", f"const long xp_row = {row};",
        "float *xp_ig_dst = xp_ig_a + xp_row / 6 * 6 * xp_gemm_k + xp_row % 6;",
        *sum_loops[:-1], *gather_run(shape.lhs, last_sum[0], last_sum[1].c_text(), last_sum[2].c_text(), step=6),
        "}"])
    lines += ["for (long xp_row = xp_gemm_m; xp_row < xp_gemm_mp; ++xp_row)",
              "for (long xp_p = 0; xp_p < xp_gemm_k; ++xp_p)",
              "xp_ig_a[xp_row / 6 * 6 * xp_gemm_k + xp_p * 6 + xp_row % 6] = 0.0f;"]
    # B: one row of column values per summation term
    last_col = shape.cols[-1].atom
    lines += parallel_lines(f"omp parallel for collapse({len(shape.sums)})", "xp_gemm_k * xp_gemm_n >= XP_GEMM_PARALLEL_ELEMENTS", [
        *sum_loops, "{", f"float *xp_ig_dst = xp_ig_b + {sum_index} * xp_gemm_n;",
        *_loops(shape.cols)[:-1], *gather_run(shape.rhs, last_col, "0L", f"xp_ig_e_{last_col}"), "}"])
    lines.append(f"xp_sgemm(xp_gemm_m, xp_gemm_n, xp_gemm_k, xp_ig_a, xp_gemm_k, 1L, xp_ig_b, xp_gemm_n, 1L, "
                 f"xp_mm_acc0, xp_gemm_n, {mc}, {kc}, {nc}, 1);")
    value = "xp_mm_acc0[xp_e]" if shape.epilogue is None else print_expr(shape.epilogue, Dialect.C)
    lines += parallel_lines(f"omp parallel for collapse({len(shape.rows)})", "xp_gemm_m * xp_gemm_n >= XP_GEMM_PARALLEL_ELEMENTS", [
        *_loops(shape.rows), "{", f"long xp_e = {_horner(shape.rows)} * xp_gemm_n;", *_loops(shape.cols), "{",
        f"{shape.out_base}[{shape.out_offset.c_text()}] = (float)({value});", "++xp_e;", "}", "}"])
    lines += ["free(xp_ig_a);", "free(xp_ig_b);", "free(xp_mm_acc0);"]
    return pre, lines


def tensorize(fn: A.Function, helpers: dict[str, A.Function], consts: dict[str, int], mc: int, kc: int,
              nc: int, kinds: dict[str, str] | None = None, macros: Macros | None = None) -> A.Function:
    # read with its function-like macros expanded (``OFFSET(r, c, ld)``, ``FLOAT4(p)``: what each call computes);
    # the fast path goes into the function as written
    found = _block_nest(expand_macros(fn, macros) if macros else fn)
    if found is None:
        raise PassRefused(f"{fn.name}: no block loop nest at the top of the function (run loop_recovery first)")
    i, inner = found
    ptr_params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and len(p.type.pointers) == 1
                  and p.type.base.replace("const", "").strip() == "float"}
    int_params = {p.name for p in fn.params if isinstance(p, A.Param) and p.name and not p.type.pointers}

    def evaluated() -> ThreadEvaluator:
        ev = ThreadEvaluator(int_params, ptr_params, helpers, consts=consts)
        ev.run(stmts_of(inner.body))
        return ev

    def planned(body: A.Stmt = inner.body) -> MatmulShape:
        """The shape with every split of a thread index planned, the divisors the evaluation meets through
        copies of the index added until no new one shows."""
        seen: dict[str, set[int]] = {}
        while True:
            ev = ThreadEvaluator(int_params, ptr_params, helpers, consts=consts)
            ev.plan_splits(stmts_of(body), seen)
            try:
                ev.run(stmts_of(body))
                return recognize(ev)
            except PassRefused:
                if all(found <= seen.get(base, set()) for base, found in ev.divisors.items()):
                    raise
                for base, found in ev.divisors.items():
                    seen.setdefault(base, set()).update(found)

    edge_test = _last_block_test(inner.body)
    if edge_test is not None:
        # blocks on the grid's last row or column run other statements than the rest: each class read alone
        def specialized(body: A.Stmt = inner.body) -> MatmulShape:
            return _edge_and_interior(body, edge_test, planned)

        try:
            shape = specialized()
        except PassRefused as refusal:
            first = refusal
        else:
            return _with_fast_path(fn, i, *emit(shape, mc, kc, nc), shape)
        others = _other_block_readings(inner.body, specialized, mc, kc, nc)
        if not others:
            raise first
        return _with_fast_paths(fn, i, others)
    ev: ThreadEvaluator | None = None
    try:
        ev = evaluated()
        shape = recognize(ev)
    except PassRefused as refusal:
        first = refusal
    else:
        return _with_fast_path(fn, i, *emit(shape, mc, kc, nc), shape)
    try:
        # again with every split of a thread index planned before evaluating (``plan_splits``): a thread that
        # splits its index by several constants in another order than they divide one another
        shape = planned()
    except PassRefused as again:
        if again.reason != first.reason:
            first = PassRefused(f"{first.reason}; with the thread index split by all its divisors: {again.reason}")
    else:
        return _with_fast_path(fn, i, *emit(shape, mc, kc, nc), shape)
    others = _other_block_readings(inner.body, planned, mc, kc, nc)
    if others:
        return _with_fast_paths(fn, i, others)
    if ev is None:
        raise first
    try:
        implicit = recognize_implicit(ev)
    except PassRefused as other:
        raise PassRefused(f"{first.reason}; as an implicit GEMM: {other.reason}") from None
    if kinds is not None:
        kinds[fn.name] = "implicit GEMM (gathered operands)"
    return _with_fast_path(fn, i, *emit_implicit(implicit, mc, kc, nc))


def _last_block_axes(e: A.Expr) -> set[str] | None:
    """The axes of ``blockIdx.a == gridDim.a - 1`` tests joined by ``||`` (the last block along any of them);
    None for another condition."""
    e = strip_casts(e)
    if isinstance(e, A.Binary) and e.op == "||":
        left, right = _last_block_axes(e.left), _last_block_axes(e.right)
        return None if left is None or right is None else left | right
    if not (isinstance(e, A.Binary) and e.op == "=="):
        return None
    for block, last in ((e.left, e.right), (e.right, e.left)):
        block, last = strip_casts(block), strip_casts(last)
        if isinstance(block, A.Name) and block.id in ("xp_bx", "xp_by") and isinstance(last, A.Binary) \
                and last.op == "-" and last.left == A.name(f"xp_gd{block.id[-1]}") and A.const_int(last.right) == 1:
            return {block.id[-1]}
    return None


def _last_block_test(body: A.Stmt) -> A.Expr | None:
    """The one condition the body branches on to treat the grid's last blocks apart (``if (blockIdx.x ==
    gridDim.x - 1 || blockIdx.y == gridDim.y - 1)``: bounds-checked tile loads there, plain ones elsewhere);
    None when there is none or several different ones."""
    tests = {print_expr(n.cond, Dialect.C): n.cond for n in A.walk(body)
             if isinstance(n, A.If) and _last_block_axes(n.cond) is not None}
    return next(iter(tests.values())) if len(tests) == 1 else None


def _edge_and_interior(body: A.Stmt, test: A.Expr, planned: Callable[[A.Stmt], MatmulShape]) -> MatmulShape:
    """The product a body that branches on ``test`` (see :func:`_last_block_test`) computes, read once for the
    blocks where the test holds and once for the others. Both must be the same product over the same operands
    (the last blocks' reading bounds-checked, the others' not); the edge reading is then right for every block
    where the interior blocks stay inside its bounds, which the fast path checks at run time along each axis
    the test names (``(gridDim.y - 1) * tile rows <= M``), with the preconditions of both readings."""
    axes = _last_block_axes(test) or set()

    def taken(holds: bool) -> A.Stmt:
        def fold(n: A.Node) -> A.Node | None:
            if isinstance(n, A.If) and print_expr(n.cond, Dialect.C) == print_expr(test, Dialect.C):
                branch = n.then if holds else n.else_
                return A.rewrite(branch, fold) if branch is not None else A.Empty()
            return None
        return A.rewrite(body, fold)

    edge, interior = planned(taken(True)), planned(taken(False))
    same = ("out", "lhs", "rhs", "rhs_filter_layout", "k_lo", "k_hi", "batched", "epilogue")
    if any(getattr(edge, f) != getattr(interior, f) for f in same) or edge.launch != interior.launch:
        raise PassRefused("the grid's last blocks and the others compute different products")
    inside: list[str] = []
    for extent, bound, other in ((edge.launch.rows, edge.rows, interior.rows),
                                 (edge.launch.cols, edge.cols, interior.cols)):
        named = [axis for axis in sorted(axes) if re.search(rf"\bxp_gd{axis}\b", extent)]
        if bound == other:
            continue  # both readings bound this output axis alike
        if bound is None or other is not None or len(named) != 1:
            # the other blocks compute this axis without the bound and no test keeps them inside it
            raise PassRefused("the grid's last blocks bound an output axis the other blocks are not kept inside")
        last = re.sub(rf"\bxp_gd{named[0]}\b", f"(xp_gd{named[0]} - 1)", extent)
        inside.append(f"{last} <= (long)({bound.c_text()})")
    pre = tuple(dict.fromkeys((*edge.preconditions, *interior.preconditions, *inside)))
    return dataclasses.replace(edge, preconditions=pre)


# the block widths a kernel that numbers its threads ``threadIdx.y * blockDim.x + threadIdx.x`` is tried at
FLAT_WIDTHS = (8, 16, 32, 64, 128, 256)


FastPath = tuple[list[str], list[str], MatmulShape]  # preconditions, lines, shape


def _other_block_readings(body: A.Stmt, planned: Callable[[A.Stmt], MatmulShape], mc: int, kc: int,
                          nc: int) -> list[FastPath]:
    """The product a 2-D block's threads compute when they number themselves flat (:func:`_flattened_block`) and
    when the block is one row (:func:`_single_row_block`): a fast path for each reading that is one (the launch
    decides which runs; code numbering its threads flat is launched either way)."""
    out: list[FastPath] = []
    flat = _flattened_block(body, planned)
    if flat is not None:
        shape, width = flat
        pre, lines = (_one_dimensional_names(part) for part in emit(shape, mc, kc, nc))
        out.append(([f"xp_bdx == {width}", *pre], lines, shape))
    row = _single_row_block(body, planned)
    if row is not None:
        pre, lines = emit(row, mc, kc, nc)
        out.append((["xp_bdy == 1", "xp_bdz == 1", *pre], lines, row))
    return out


def _with_fast_paths(fn: A.Function, i: int, paths: list[FastPath]) -> A.Function:
    for pre, lines, shape in reversed(paths):
        fn = _with_fast_path(fn, i, pre, lines, shape)
    return fn


def _single_row_block(body: A.Stmt, planned: Callable[[A.Stmt], MatmulShape]) -> MatmulShape | None:
    """A block launched one row deep whose threads still number themselves ``threadIdx.y * blockDim.x +
    threadIdx.x`` (a 1-D launch of code written for any block): read with ``threadIdx.y`` and ``threadIdx.z`` 0, so
    the number is ``threadIdx.x`` (the fast path checks ``blockDim.y == blockDim.z == 1``)."""
    mapping: dict[str, A.Expr] = {"xp_ty": A.lit(0), "xp_tz": A.lit(0), "xp_bdy": A.lit(1), "xp_bdz": A.lit(1)}
    read = {n.id for b in _thread_bodies(body) for s in stmts_of(b)
            if not (isinstance(s, A.DeclStmt) and [d.name for d in s.decls] == ["xp_t"])
            for n in A.walk(s) if isinstance(n, A.Name)}
    if not read & set(mapping):
        return None  # the threads read no row index: the plain reading already was this one
    try:
        return planned(_in_thread_bodies(body, mapping))
    except PassRefused:
        return None


def _thread_bodies(body: A.Stmt) -> list[A.Stmt]:
    """The statements of each recovered thread loop (``for (xp_tx ...)``) in ``body``."""
    return [n.body for n in A.walk(body) if isinstance(n, A.For) and (c := n.canonical()) is not None
            and c.var == "xp_tx"]


def _in_thread_bodies(body: A.Stmt, mapping: dict[str, A.Expr]) -> A.Stmt:
    """``body`` with ``mapping`` substituted in the statements of its thread loops (not in the loops)."""
    def substituted(n: A.Node) -> A.Node | None:
        if isinstance(n, A.For) and (c := n.canonical()) is not None and c.var == "xp_tx":
            return A.replace(n, body=A.substitute(n.body, mapping))
        return None
    return A.rewrite(body, substituted)


def _flattened_block(body: A.Stmt, planned: Callable[[A.Stmt], MatmulShape]) -> tuple[MatmulShape, int] | None:
    """A 2-D block whose threads number themselves ``tid = ty * blockDim.x + tx`` and split ``tid`` by
    constants (``tid >> 1``, ``tid & 31``: how register-blocked GEMMs share a tile load) while computing at
    ``tx`` and ``ty``: read as a 1-D block of ``T = ty * W + tx`` threads, ``tx = T % W``, ``ty = T / W``,
    at each width ``W`` until one is a matrix product (the fast path then checks ``blockDim.x == W``, and the
    evaluation's own checks cover the rest: a wrong ``W`` does not tile the output once)."""
    names = {n.id for b in _thread_bodies(body) for n in A.walk(b) if isinstance(n, A.Name)}
    if not {"xp_tx", "xp_ty", "xp_bdx"} <= names:
        return None
    for width in FLAT_WIDTHS:
        mapping: dict[str, A.Expr] = {"xp_tx": A.Binary("%", A.name("xp_tx"), A.lit(width)),
                                      "xp_ty": A.Binary("/", A.name("xp_tx"), A.lit(width)), "xp_bdx": A.lit(width)}
        try:
            return planned(_in_thread_bodies(body, mapping)), width
        except PassRefused:
            continue
    return None


def _one_dimensional_names(texts: list[str]) -> list[str]:
    """C text written for the 1-D block of :func:`_flattened_block` over the real one: its thread count is
    ``blockDim.x * blockDim.y``, its ``blockDim.y`` is 1."""
    width, height = re.compile(r"\bxp_bdx\b"), re.compile(r"\bxp_bdy\b")
    return [width.sub("(xp_bdx * xp_bdy)", height.sub("1", t)) for t in texts]


def _with_fast_path(fn: A.Function, i: int, pre: list[str], lines: list[str],
                    shape: MatmulShape | None = None) -> A.Function:
    if shape is not None and shape.batched and shape.out.batch_stride.terms == ():
        raise PassRefused("blocks along z write the same outputs")
    guard = guarded_fast_path(pre, lines, Dialect.C)
    stmts = [*fn.body.stmts[:i], guard, *fn.body.stmts[i:]]
    return A.replace(fn, body=A.replace(fn.body, stmts=tuple(stmts)))


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    mc = int_param(params, "mc", 96, 6, 4096)
    kc = int_param(params, "kc", 256, 8, 8192)
    nc = int_param(params, "nc", 2048, 16, 1 << 16)
    helpers = {f.name: f for f in module.functions() if not f.is_kernel and "_blocks" not in f.name}
    consts = module_int_constants(module, ctx.defines)
    kinds: dict[str, str] = {}
    macros = function_macros(module)
    result = rewrite_each(module, is_bound_kernel, lambda fn: tensorize(fn, helpers, consts, mc, kc, nc, kinds, macros),
                          nothing="no bound kernels", tolerate=(AssertionError, KeyError, ValueError, RecursionError))
    ctx.notes.extend(f"{name}: {kinds.get(name, 'matrix product')} on the packed micro-kernel "
                     f"(mc={mc}, kc={kc}, nc={nc})" for name in result.done)
    items = list(result.module.items)
    if not any(isinstance(it, A.Opaque) and it.text.startswith(GEMM_MARK) for it in items):
        helper = (f"#define XP_GEMM_PARALLEL_WORK {PARALLEL_WORK}\n#define XP_GEMM_PARALLEL_ELEMENTS {PARALLEL_ELEMENTS}\n"
                  "static inline long xp_gemm_min(long a, long b) { return a < b ? a : b; }\n"
                  "static inline long xp_gemm_max(long a, long b) { return a > b ? a : b; }\n"
                  "static inline long xp_gemm_floordiv(long a, long b) { return a / b - (a % b != 0 && a < 0); }\n")
        first_fn = next(k for k, it in enumerate(items) if isinstance(it, A.Function))
        items.insert(first_fn, A.Opaque(HELPER.replace(GEMM_MARK, GEMM_MARK + "\n" + helper, 1)))
    return leave(unit, A.replace(module, items=tuple(items)), ctx, Dialect.C)
