"""The agent signature every agent follows, and the small pieces agents share (options, turns, calls)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import records

Message = Dict[str, Any]
ToolCall = Dict[str, Any]


@dataclass(frozen=True)
class Option:
    """One setting of an agent, as its constructor takes it and the command line offers it.

    Args:
        name (`str`): the constructor's keyword argument; the flag is ``--`` plus it with dashes.
        help (`str`): one line for ``--help``.
        type (`Callable[[str], Any]`): turns the command-line text into the value (raises ``ValueError``).
        default (`Any`, *optional*): shown in ``--help``; the constructor's own default applies when unset.
        shorthand (`tuple[str, Any]`, *optional*): another flag that sets this option to a fixed value,
            e.g. ``("--batch", None)``.
        required (`bool`, defaults to `False`): the agent cannot run without it.
        protocol (`bool`, defaults to `True`): whether the option can change what an episode holds.  Options
            that only shape how requests are sent (timeouts, retries, a rate cap) say `False`, so that a run
            may be resumed with other values of them.
    """

    name: str
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    shorthand: Optional[Any] = None
    required: bool = False
    protocol: bool = True

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def positive_number(text: str) -> float:
    """A number above 0 (``ValueError`` otherwise)."""
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a positive number, got %s" % text)
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1 (``ValueError`` otherwise)."""
    value = int(text)
    if value < 1:
        raise ValueError("must be a positive integer, got %d" % value)
    return value


@dataclass
class Turn:
    """One assistant turn: the ``action`` for ``env.step`` and notes on what went wrong producing it."""

    action: Any
    notes: List[str] = field(default_factory=list)


class AgentError(RuntimeError):
    """The agent cannot go on (an endpoint that keeps failing); the runner ends the episode and records why."""


class Agent:
    """The agent signature.

    Attributes:
        name (`str`): the name :func:`make_agent` knows it by.
        privileged (`bool`): whether ``reset`` receives the task row (only the oracle reads it).
    """

    name = "agent"
    privileged = False
    OPTIONS: Tuple[Option, ...] = ()

    def reset(self, observation: Mapping[str, Any], info: Mapping[str, Any], *, rng: random.Random, row: Optional[Mapping[str, Any]] = None) -> None:
        """Start an episode: ``observation`` is ``env.reset()``'s; ``rng`` is the episode's only randomness."""
        raise NotImplementedError

    def act(self, observations: Sequence[Message]) -> Turn:
        """The next turn, given the observation messages of the previous one (empty at the first turn)."""
        raise NotImplementedError

    def usage(self) -> Optional[Dict[str, Any]]:
        """What the episode cost so far (requests, tokens), for agents that call a service; ``None`` otherwise.

        Agents are built once per episode and may run in several threads at once (``eval --concurrency``):
        each instance serves one episode, in one thread, so instance state needs no lock.
        """
        return None


def goal_targets(observation: Mapping[str, Any]) -> Dict[str, int]:
    """``{item: count}`` read from the goal in the first user message (``Craft the following items: 3x a``)."""
    goal = next(m["content"] for m in observation["messages"] if m.get("role") == "user")
    return records.parse_goal(goal)


def call(tool: str, **arguments: Any) -> ToolCall:
    """A tool call in the engine's plain form."""
    return {"name": tool, "arguments": arguments}


def in_turns(calls: List[ToolCall], calls_per_turn: Optional[int]) -> List[List[ToolCall]]:
    """``calls`` cut into turns of at most ``calls_per_turn`` (all in one turn when ``None``)."""
    size = calls_per_turn or max(len(calls), 1)
    return [calls[start : start + size] for start in range(0, len(calls), size)]


def _check_calls_per_turn(calls_per_turn: Optional[int]) -> Optional[int]:
    if calls_per_turn is not None and (type(calls_per_turn) is not int or calls_per_turn < 1):
        raise ValueError("calls_per_turn must be a positive integer or None (no limit), got %r" % (calls_per_turn,))
    return calls_per_turn
