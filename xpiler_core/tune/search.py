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
    first: tuple[str, ...] = (),
) -> SearchOutcome:
    """Best point of ``space`` found with at most ``quota`` new measurements (defaults scored first).

    ``first``: key fragments; single-parameter moves of keys containing one are tried before the others (in
    that order), for a budget that may not reach every move."""
    start_spent = spent()
    seen: dict[tuple[tuple[str, Any], ...], float | None] = {}
    best: dict[str, Any] = {k: defaults.get(k, space[k][0]) for k in space}
    best_score = -1.0
    limit = max_points if max_points is not None else max(4 * quota, 8)

    def budget_left() -> bool:
        return spent() - start_spent < quota and not stop() and len(seen) < limit

    def try_point(point: dict[str, Any]) -> float | None:
        nonlocal best, best_score
        key = tuple(sorted(point.items()))
        if key in seen:
            return seen[key]
        if not budget_left():
            return None
        value = score(point)
        seen[key] = value
        if value is not None and value > best_score:
            best, best_score = dict(point), value
        return value

    try_point(dict(best))
    if not space:
        return SearchOutcome(best, max(best_score, 0.0), sum(v is not None for v in seen.values()))
    if space_size(space) <= quota + 1:
        points = grid(space)
        rng.shuffle(points)
        for point in points:
            try_point(point)
    else:
        _evolve(space, best, try_point, lambda: (best, best_score), rng, budget_left, first)
    return SearchOutcome(best, max(best_score, 0.0), sum(v is not None for v in seen.values()))


def _evolve(space: Space, start: dict[str, Any], try_point: Callable[[dict[str, Any]], float | None],
            current: Callable[[], tuple[dict[str, Any], float]], rng: random.Random,
            budget_left: Callable[[], bool], first: tuple[str, ...] = ()) -> None:
    """Coordinate moves first (every single-parameter change of the start point, in random order: cheap
    first-order information; ``first`` orders them), then the combination of every move that beat the start point (parameters that
    help separately often help together), then (1+1) evolution: mutate one or two parameters of the best
    point so far, with one point in four drawn uniformly so the search does not stay in one basin."""
    keys = sorted(space)
    start_score = try_point(start)
    moves = [{**start, key: choice} for key in keys for choice in space[key] if choice != start[key]]
    rng.shuffle(moves)

    def tier(move: dict[str, Any]) -> tuple[int, int]:
        """Listed keys first; within a tier, a key's extreme choices before its middle ones (for ordered
        choices such as thresholds, the extremes show the direction soonest)."""
        key = next(k for k in keys if move[k] != start[k])
        extreme = move[key] in (space[key][0], space[key][-1])
        return next((i for i, fragment in enumerate(first) if fragment in key), len(first)), 0 if extreme else 1

    moves.sort(key=tier)  # stable: random order within a tier
    gains: dict[str, tuple[float, Any]] = {}
    for move in moves:
        if not budget_left():
            return
        value = try_point(move)
        key = next(k for k in keys if move[k] != start[k])
        if value is not None and value > (start_score or 0.0) and value > gains.get(key, (0.0, None))[0]:
            gains[key] = (value, move[key])
    if len(gains) >= 2 and budget_left():
        try_point({**start, **{k: choice for k, (_, choice) in gains.items()}})
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
