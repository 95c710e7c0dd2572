"""CUDA ⇄ HIP passes: format-preserving edits of the CST (API mapping, warp semantics, tensor cores, inline PTX, cooperative groups, launch bounds, intrinsics)."""
