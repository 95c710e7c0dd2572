import numpy as np

BLOCK = 128


def stream_compact(x, out, n):
    blocks = -(-n // BLOCK)
    result = out.copy()  # slots past each block's count keep their initial value
    counts = np.zeros(blocks, dtype=np.int32)
    for b in range(blocks):
        chunk = x[b * BLOCK : min(n, (b + 1) * BLOCK)]
        kept = chunk[chunk > 0]
        result[b * BLOCK : b * BLOCK + kept.size] = kept
        counts[b] = kept.size
    return {"out": result, "counts": counts}
