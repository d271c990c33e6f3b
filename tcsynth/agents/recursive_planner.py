"""``recursive-planner``: the planner that hands deep subtrees to subagents (see :mod:`tcsynth.recursive`)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from .. import recursive, records
from .base import Message, Option, ToolCall, Turn, call, in_turns, positive_int
from .baselines import CALLS_PER_TURN, PlannerAgent, _json_or

DEFAULT_DELEGATE_DEPTH = recursive.DEFAULT_DELEGATE_DEPTH
# A child's turn budget when the parent's own is unlimited (it must be a whole number in the call).
DEFAULT_CHILD_STEPS = 75
MAX_DELEGATION_ROUNDS = 3
DEFAULT_MAX_DELEGATION_DEPTH = recursive.DEFAULT_MAX_DEPTH


class RecursivePlannerAgent(PlannerAgent):
    """The planner that hands deep subtrees to subagents (:mod:`tcsynth.recursive`), recursively.

    It looks recipes up like ``planner`` but stops at every ingredient at least ``delegate_depth`` deep:
    those it launches a subagent for (targets: what its own crafts need beyond what it holds; budget: its
    own turn budget), deepest first, all in one turn when batching, with ``view_inventory`` last, so that it
    plans its own crafts (the top of its tree) from what the subagents left.  When a subagent used up
    something it had counted on, it launches again for what is still short (at most
    ``MAX_DELEGATION_ROUNDS`` rounds).  Then it crafts and finishes.  Each subagent
    is the same policy; at the depth cap, where ``launch_subagent`` is not offered, it plays as ``planner``.
    The runner reads ``recursive``, ``max_delegation_depth``, :meth:`spawn` (a child's policy) and
    :meth:`baseline` (the agent its root turns are compared with).
    """

    name = "recursive-planner"
    recursive = True
    OPTIONS = (
        CALLS_PER_TURN,
        Option("delegate_depth", "recursive-planner: delegate ingredients at least this deep (default: %(default)s)", positive_int, default=DEFAULT_DELEGATE_DEPTH),
        Option("max_delegation_depth", "recursive agents: how deep subagents may nest; 0 for none (default: %(default)s)", int, default=DEFAULT_MAX_DELEGATION_DEPTH),
    )

    def __init__(self, calls_per_turn: Optional[int] = 1, delegate_depth: int = DEFAULT_DELEGATE_DEPTH, max_delegation_depth: int = DEFAULT_MAX_DELEGATION_DEPTH) -> None:
        super().__init__(calls_per_turn)
        if type(delegate_depth) is not int or delegate_depth < 1:
            raise ValueError("delegate_depth must be a positive integer, got %r" % (delegate_depth,))
        if type(max_delegation_depth) is not int or max_delegation_depth < 0:
            raise ValueError("max_delegation_depth must be a non-negative integer, got %r" % (max_delegation_depth,))
        self.delegate_depth = delegate_depth
        self.max_delegation_depth = max_delegation_depth

    def spawn(self) -> "RecursivePlannerAgent":
        return RecursivePlannerAgent(self.calls_per_turn, self.delegate_depth, self.max_delegation_depth)

    def baseline(self) -> PlannerAgent:
        return PlannerAgent(self.calls_per_turn)

    def reset(self, observation, info, *, rng, row=None) -> None:
        goal = next(m["content"] for m in observation["messages"] if m.get("role") == "user")
        self.targets = records.parse_goal(recursive.prompt_goal(goal))
        self.held = {}
        self.recipes = {}
        self.depths: Dict[str, int] = {}
        self._pending = []
        self._queue: List[List[ToolCall]] = []
        self._planned = None
        self._started = False
        self._delegated = 0  # rounds of launches so far
        tools = {tool.get("function", {}).get("name") for tool in observation.get("tools", ())}
        self.can_delegate = recursive.LAUNCH_TOOL in tools
        budget = info.get("max_steps")
        self.child_steps = budget if type(budget) is int else DEFAULT_CHILD_STEPS

    def _threshold(self) -> Optional[int]:
        return self.delegate_depth if self.can_delegate else None

    def _tree_items(self) -> List[str]:
        return recursive.frontier_items(list(self.targets), self.recipes, self.depths, self._threshold())

    def _read(self, sent: ToolCall, text: str) -> None:
        super()._read(sent, text)
        if sent["name"] == "get_info":
            for entry in _json_or(text, []):
                if isinstance(entry, dict) and isinstance(entry.get("item"), str) and isinstance(entry.get("crafting_depth"), int):
                    self.depths[entry["item"]] = entry["crafting_depth"]

    def act(self, observations: Sequence[Message]) -> Turn:
        for sent, message in zip(self._pending, observations):
            self._read(sent, message.get("content", ""))
        self._pending = []
        if self._planned is None and not self._queue:
            look = [] if self._delegated else self._next_lookups()
            if look:
                self._pending = look
                return Turn(look)
            delegations, crafts = recursive.plan_part(self.targets, self.recipes, self.depths, self.held, self._threshold())
            # Another round when a subagent used up what this agent had counted on (then it asks again).
            if delegations and self._delegated < MAX_DELEGATION_ROUNDS:
                self._delegated += 1
                launches = [call(recursive.LAUNCH_TOOL, targets={item: count}, num_steps=self.child_steps) for item, count in delegations]
                self._queue = in_turns(launches + [call("view_inventory")], self.calls_per_turn)
            else:
                finish = call("finish", message=records.finish_message(self.targets))
                self._planned = in_turns([call("craft", ingredients=ingredients, target=[item, total]) for item, total, ingredients in crafts] + [finish], self.calls_per_turn)
        if self._queue:
            self._pending = self._queue.pop(0)
            return Turn(self._pending)
        return Turn(self._planned.pop(0) if self._planned else [call("finish", message=records.finish_message(self.targets))])
