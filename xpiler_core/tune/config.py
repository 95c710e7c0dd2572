"""What a tuning candidate is: a sequence of pass steps (name + parameters) and the loop-binding parameters.

Configurations are plain, hashable data so they can be stored in records and replayed exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Params = tuple[tuple[str, Any], ...]


def freeze(params: dict[str, Any]) -> Params:
    return tuple(sorted(params.items()))


@dataclass(frozen=True)
class Step:
    """One structural pass applied with these parameters."""

    name: str
    params: Params = ()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params)}

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params if v not in ("", None))
        return f"{self.name}({shown})" if shown else self.name

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Step:
        return Step(str(data["name"]), freeze(dict(data.get("params") or {})))


@dataclass(frozen=True)
class Config:
    """A full candidate: structural steps after loop recovery, then loop binding with ``binding``."""

    steps: tuple[Step, ...] = ()
    binding: Params = ()

    def as_dict(self) -> dict[str, Any]:
        return {"steps": [s.as_dict() for s in self.steps], "binding": dict(self.binding)}

    def describe(self) -> str:
        seq = " → ".join(s.describe() for s in self.steps) or "(no structural passes)"
        bind = ", ".join(f"{k}={v}" for k, v in self.binding if v not in ("", None))
        return f"{seq}; loop_binding({bind})"

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Config:
        return Config(tuple(Step.from_dict(s) for s in data.get("steps") or []),
                      freeze(dict(data.get("binding") or {})))
