"""SIMT-on-CPU runtime: headers that run CUDA/HIP on the CPU, the launch rewrite, builds and sandboxed calls.

Submodules: ``rewrite`` (source rewrite), ``build`` (cached g++/gcc builds), ``sandbox`` (child-process
calls with limits), ``worker`` (the child), ``entry`` (generated extern "C" wrappers for kernel entries).
"""
