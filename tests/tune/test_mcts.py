"""MCTS over pass sequences on a synthetic problem whose optimum is found by enumerating every sequence."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from xpiler_core.tune.mcts import mcts

ACTIONS = ("split", "reorder", "fuse", "pipeline", "cache")


class Synthetic:
    """Reward of a sequence: a fixed table; a step is the action with its best parameter (here: 'p1')."""

    def __init__(self, rewards: dict[tuple[str, ...], float], budget: int) -> None:
        self.rewards = rewards
        self.budget = budget
        self.evaluated: list[tuple[str, ...]] = []

    def _names(self, steps: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
        return tuple(name for name, _ in steps)

    def actions(self, steps: tuple[tuple[str, str], ...]) -> list[str]:
        used = set(self._names(steps))
        return [a for a in ACTIONS if a not in used]  # each pass at most once

    def _score(self, names: tuple[str, ...]) -> float:
        self.evaluated.append(names)
        return self.rewards.get(names, 0.0)

    def expand(self, steps, action):
        names = (*self._names(steps), action)
        return (action, "p1"), self._score(names)

    def rollout_step(self, steps, action):
        return (action, "default")

    def reward(self, steps) -> float:
        return self._score(self._names(steps))

    def exhausted(self) -> bool:
        return len(self.evaluated) >= self.budget


def all_sequences(max_depth: int) -> list[tuple[str, ...]]:
    out = []
    for depth in range(1, max_depth + 1):
        out += list(itertools.permutations(ACTIONS, depth))
    return out


def table(seed: int) -> dict[tuple[str, ...], float]:
    rng = random.Random(seed)
    rewards = {seq: rng.uniform(0.0, 0.5) for seq in all_sequences(3)}
    # a good first step leads to the best sequence, as in real pass pipelines
    best = tuple(rng.sample(ACTIONS, 3))
    rewards[best[:1]] = 0.6
    rewards[best[:2]] = 0.7
    rewards[best] = 1.0
    return rewards


@given(st.integers(0, 7))
@settings(max_examples=8, deadline=None)
def test_mcts_finds_the_best_sequence_found_by_enumeration(seed: int) -> None:
    rewards = table(seed)
    reference = max(all_sequences(3), key=lambda s: rewards.get(s, 0.0))
    problem = Synthetic(rewards, budget=80)  # fewer evaluations than there are sequences (85)
    result = mcts(problem, 0.0, random.Random(0), problem.exhausted, max_depth=3)
    names = tuple(name for name, _ in result.best_steps)
    assert names == reference and result.best_reward == 1.0
    assert len(problem.evaluated) <= 81


@given(st.integers(0, 1000), st.integers(5, 60))
@settings(max_examples=25, deadline=None)
def test_mcts_is_deterministic_with_a_seed_and_stops_at_the_budget(seed: int, budget: int) -> None:
    traces = []
    for _ in range(2):
        problem = Synthetic(table(seed), budget=budget)
        mcts(problem, 0.0, random.Random(seed), problem.exhausted, max_depth=3)
        assert len(problem.evaluated) <= budget + 1  # the rollout after the last expansion may finish
        traces.append(problem.evaluated)
    assert traces[0] == traces[1]


def test_mcts_stops_when_the_tree_is_exhausted() -> None:
    problem = Synthetic({("split",): 0.3}, budget=10_000)
    result = mcts(problem, 0.0, random.Random(1), problem.exhausted, max_depth=1)
    assert {s for s in problem.evaluated if len(s) == 1} == {(a,) for a in ACTIONS}
    assert result.best_steps == (("split", "p1"),)


@given(seed=st.integers(0, 50))
@settings(max_examples=10, deadline=None)
def test_priority_actions_are_expanded_first_whatever_the_seed(seed: int) -> None:
    """With a budget of two expansions, the two prioritized passes are the ones the search measures."""
    rewards = {(a,): 1.0 for a in ACTIONS}
    problem = Synthetic(rewards, budget=2)
    mcts(problem, 0.0, random.Random(seed), problem.exhausted, max_depth=1,
         priority=lambda action: 1 if action in ("fuse", "cache") else 0)
    assert sorted(problem.evaluated[:2]) == [("cache",), ("fuse",)]


@given(seed=st.integers(0, 50))
@settings(max_examples=10, deadline=None)
def test_rollouts_follow_the_priority_passes(seed: int) -> None:
    """The first rollout after expanding a prioritized pass measures it followed by the other prioritized one."""
    problem = Synthetic({}, budget=2)
    mcts(problem, 0.0, random.Random(seed), problem.exhausted, max_depth=2,
         priority=lambda action: 1 if action in ("fuse", "cache") else 0)
    first, rolled = problem.evaluated[:2]
    assert len(first) == 1 and first[0] in ("fuse", "cache")
    assert rolled == (first[0], "cache" if first[0] == "fuse" else "fuse")
