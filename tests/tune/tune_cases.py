"""The kernel the tuning tests tune (a module with its own name: ``conftest`` is ambiguous across rooms)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELU_SPEC = ROOT / "benchmarks" / "suite" / "activation" / "relu" / "spec.toml"
RELU_SOURCE = RELU_SPEC.parent / "relu.cu"
