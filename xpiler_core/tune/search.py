"""Intra-pass parameter search: the whole grid when it fits the quota, else a seeded evolutionary search.

``score(params)`` returns the measured reward (speedup; 0 for a failing candidate) or ``None`` for an
illegal point (the pass refused); ``spent()`` says how many real measurements have been made so far, so
points that hit a memo or a stored record do not use up the quota.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Space = dict[str, tuple[Any, ...]]
ScoreFn = Callable[[dict[str, Any]], float | None]


@dataclass
class SearchOutcome:
    best: dict[str, Any]
    score: float
    evaluated: int  # points scored (legal), memoized ones included


def grid(space: Space) -> list[dict[str, Any]]:
    keys = sorted(space)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(space[k] for k in keys))]


def space_size(space: Space) -> int:
    size = 1
    for choices in space.values():
        size *= max(1, len(choices))
    return size


def search_params(
    space: Space,
    defaults: dict[str, Any],
    score: ScoreFn,
    quota: int,
    rng: random.Random,
    spent: Callable[[], int],
    stop: Callable[[], bool] = lambda: False,
    max_points: int | None = None,
) -> SearchOutcome:
    """Best point of ``space`` found with at most ``quota`` new measurements (defaults scored first)."""
    start_spent = spent()
    seen: dict[tuple[tuple[str, Any], ...], float | None] = {}
    best: dict[str, Any] = {k: defaults.get(k, space[k][0]) for k in space}
    best_score = -1.0
    limit = max_points if max_points is not None else max(4 * quota, 8)

    def budget_left() -> bool:
        return spent() - start_spent < quota and not stop() and len(seen) < limit

    def try_point(point: dict[str, Any]) -> None:
        nonlocal best, best_score
        key = tuple(sorted(point.items()))
        if key in seen or not budget_left():
            return
        value = score(point)
        seen[key] = value
        if value is not None and value > best_score:
            best, best_score = dict(point), value

    try_point(dict(best))
    if not space:
        return SearchOutcome(best, max(best_score, 0.0), sum(v is not None for v in seen.values()))
    if space_size(space) <= quota + 1:
        points = grid(space)
        rng.shuffle(points)
        for point in points:
            try_point(point)
    else:
        _evolve(space, best, try_point, lambda: (best, best_score), rng, budget_left)
    return SearchOutcome(best, max(best_score, 0.0), sum(v is not None for v in seen.values()))


def _evolve(space: Space, start: dict[str, Any], try_point: Callable[[dict[str, Any]], None],
            current: Callable[[], tuple[dict[str, Any], float]], rng: random.Random,
            budget_left: Callable[[], bool]) -> None:
    """Coordinate moves first (every single-parameter change of the start point, in random order: cheap
    first-order information), then (1+1) evolution: mutate one or two parameters of the best point so far,
    with one point in four drawn uniformly so the search does not stay in one basin."""
    keys = sorted(space)
    moves = [{**start, key: choice} for key in keys for choice in space[key] if choice != start[key]]
    rng.shuffle(moves)
    for move in moves:
        if not budget_left():
            return
        try_point(move)
    stale = 0
    while budget_left() and stale < 200:
        best, before = current()
        if rng.random() < 0.25:
            point = {k: rng.choice(space[k]) for k in keys}
        else:
            point = dict(best)
            for key in rng.sample(keys, k=min(len(keys), rng.choice((1, 1, 2)))):
                others = [c for c in space[key] if c != point[key]]
                if others:
                    point[key] = rng.choice(others)
        try_point(point)
        stale = stale + 1 if current()[1] <= before else 0
