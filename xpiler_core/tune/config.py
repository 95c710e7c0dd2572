"""What a tuning candidate is: parameter overrides of the plan's own passes, a sequence of inserted pass steps
(name + parameters), the loop-binding parameters and the compile flags it is built with.

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
    """A full candidate: the plan's passes up to loop binding (``plan`` overrides some of their parameters),
    the inserted structural ``steps``, loop binding with ``binding``, built with the extra compile ``flags``."""

    steps: tuple[Step, ...] = ()
    binding: Params = ()
    plan: tuple[Step, ...] = ()  # parameter overrides of the plan's own passes, by pass name
    flags: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"steps": [s.as_dict() for s in self.steps], "binding": dict(self.binding),
                "plan": [s.as_dict() for s in self.plan], "flags": list(self.flags)}

    def describe(self) -> str:
        seq = " → ".join(s.describe() for s in self.steps) or "(no structural passes)"
        bind = ", ".join(f"{k}={v}" for k, v in self.binding if v not in ("", None))
        parts = [s.describe() for s in self.plan if s.params]
        head = f"plan {', '.join(parts)}; " if parts else ""
        tail = f"; flags {' '.join(self.flags)}" if self.flags else ""
        return f"{head}{seq}; loop_binding({bind}){tail}"

    def describe_changes(self, base: Config) -> str:
        """What this candidate changes relative to ``base`` (the untuned configuration), briefly."""
        before = dict(base.binding)
        bind = ", ".join(f"{k}={v}" for k, v in self.binding if before.get(k) != v)
        parts = [s.describe() for s in self.plan if s.params]
        parts += [" → ".join(s.describe() for s in self.steps)] if self.steps else []
        parts += [f"loop_binding({bind})"] if bind else []
        parts += [f"flags {' '.join(self.flags)}"] if self.flags else []
        return "; ".join(parts) or "(untuned)"

    def plan_params(self, name: str) -> dict[str, Any]:
        """This candidate's overrides of the plan pass ``name``."""
        return next((dict(s.params) for s in self.plan if s.name == name), {})

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Config:
        return Config(tuple(Step.from_dict(s) for s in data.get("steps") or []),
                      freeze(dict(data.get("binding") or {})),
                      tuple(Step.from_dict(s) for s in data.get("plan") or []),
                      tuple(str(f) for f in data.get("flags") or []))
