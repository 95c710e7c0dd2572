"""The eleven passes of the method on the kernel AST: loop recovery, binding, split, fuse, reorder, expansion, contraction, cache, pipeline, tensorization, detensorization."""
