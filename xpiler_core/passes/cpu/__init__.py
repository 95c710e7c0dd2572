"""CPU speed passes: whole-grid and per-block folds, flat element-wise loops, host mirrors, reduction idioms, and the tuner-inserted structural passes."""
