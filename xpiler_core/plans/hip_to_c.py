"""HIP → C (the CPU target's dialect name): the plan lives in :mod:`xpiler_core.plans.hip_to_cpu`."""

from xpiler_core.plans.hip_to_cpu import plan

__all__ = ["plan"]
