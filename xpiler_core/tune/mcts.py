"""Inter-pass Monte Carlo tree search over pass sequences.

A state is the sequence of structural steps applied so far; an action is a legal pass at one place; taking
it runs the intra-pass search for that pass's parameters there and keeps the best (so a child's step is
"the pass with its best parameters"). Selection by UCT, expansion of one untried action per iteration
(prioritized actions first), a random rollout of one more step with default parameters (among the
highest-priority legal actions), backpropagation of the best reward seen (speedup of the verified candidate
over the untuned one; 0 when it fails). All random choices come from one
seeded ``random.Random``: the same seed and the same rewards give the same search.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

S = TypeVar("S", bound=Hashable)  # a step (pass with parameters)
A = TypeVar("A", bound=Hashable)  # an action (pass at a place)


class Problem(Protocol[S, A]):
    def actions(self, steps: tuple[S, ...]) -> Sequence[A]: ...
    def expand(self, steps: tuple[S, ...], action: A) -> tuple[S, float] | None:
        """The action with its best parameters and the reward of that sequence; None if nothing legal."""
    def rollout_step(self, steps: tuple[S, ...], action: A) -> S:
        """The action with default parameters (for rollouts)."""
    def reward(self, steps: tuple[S, ...]) -> float: ...


@dataclass
class Node(Generic[S, A]):
    steps: tuple[S, ...]
    parent: Node[S, A] | None = None
    untried: list[A] | None = None
    children: list[Node[S, A]] = field(default_factory=list)
    visits: int = 0
    total: float = 0.0
    reward: float = 0.0  # this node's own measured reward

    def uct(self, exploration: float) -> float:
        assert self.parent is not None
        if self.visits == 0:
            return math.inf
        return self.total / self.visits + exploration * math.sqrt(math.log(max(1, self.parent.visits)) / self.visits)


@dataclass
class MctsResult(Generic[S]):
    best_steps: tuple[S, ...]
    best_reward: float
    iterations: int
    nodes: int


def mcts(
    problem: Problem[S, A],
    root_reward: float,
    rng: random.Random,
    exhausted: Callable[[], bool],
    *,
    max_depth: int = 3,
    exploration: float = 0.5,
    max_iterations: int = 10_000,
    on_iteration: Callable[[int, tuple[S, ...], float], None] | None = None,
    priority: Callable[[A], int] | None = None,
) -> MctsResult[S]:
    root: Node[S, A] = Node(())
    root.reward = root_reward
    best_steps: tuple[S, ...] = ()
    best_reward = root_reward
    nodes = 1
    iteration = 0
    while iteration < max_iterations and not exhausted():
        iteration += 1
        node = root
        # selection: descend through fully expanded nodes
        while True:
            if node.untried is None:
                actions = list(problem.actions(node.steps)) if len(node.steps) < max_depth else []
                rng.shuffle(actions)
                if priority is not None:
                    actions.sort(key=priority)  # stable: random order within a priority; the highest pops first
                node.untried = actions
            if node.untried or not node.children:
                break
            node = max(node.children, key=lambda c: c.uct(exploration))
        if not node.untried and not node.children:
            if node is root:
                break  # nothing to explore at all
            _backpropagate(node, node.reward)
            _mark_exhausted(node)
            if _tree_exhausted(root):
                break
            continue
        # expansion
        action = node.untried.pop()
        expanded = problem.expand(node.steps, action)
        if expanded is None:
            continue
        step, reward = expanded
        child: Node[S, A] = Node((*node.steps, step), parent=node)
        child.reward = reward
        node.children.append(child)
        nodes += 1
        value = reward
        if reward > best_reward:
            best_steps, best_reward = child.steps, reward
        # rollout: one random further step with default parameters
        if len(child.steps) < max_depth and not exhausted():
            following = list(problem.actions(child.steps))
            if following and priority is not None:
                top = max(priority(a) for a in following)  # the rollout policy: the most promising passes first
                following = [a for a in following if priority(a) == top]
            if following:
                rolled = (*child.steps, problem.rollout_step(child.steps, rng.choice(following)))
                rolled_reward = problem.reward(rolled)
                value = max(value, rolled_reward)
                if rolled_reward > best_reward:
                    best_steps, best_reward = rolled, rolled_reward
        _backpropagate(child, value)
        if on_iteration is not None:
            on_iteration(iteration, best_steps, best_reward)
    return MctsResult(best_steps, best_reward, iteration, nodes)


def _backpropagate(node: Node[S, A] | None, value: float) -> None:
    while node is not None:
        node.visits += 1
        node.total += value
        node = node.parent


def _mark_exhausted(node: Node[S, A]) -> None:
    """A leaf with nothing left to try is removed from its parent's children so selection skips it."""
    parent = node.parent
    while parent is not None and not node.untried and not node.children:
        parent.children.remove(node)
        node, parent = parent, parent.parent


def _tree_exhausted(root: Node[S, A]) -> bool:
    return not root.untried and not root.children
