"""CUDA → C (the CPU target's dialect name): the plan lives in :mod:`xpiler_core.plans.cuda_to_cpu`."""

from xpiler_core.plans.cuda_to_cpu import plan

__all__ = ["plan"]
