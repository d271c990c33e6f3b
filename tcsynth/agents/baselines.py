"""The baseline agents: oracle, nop, random and planner (rules, no model)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

from .. import records
from .base import Agent, Message, Option, ToolCall, Turn, call, goal_targets, in_turns, positive_int, _check_calls_per_turn

# ----------------------------------------------------------------------------------------------- baselines


class ScriptedAgent(Agent):
    """Plays a list of turns computed at reset."""

    def __init__(self) -> None:
        self._turns: List[List[ToolCall]] = []

    def act(self, observations: Sequence[Message]) -> Turn:
        return Turn(self._turns.pop(0) if self._turns else [call("finish", message="Done.")])


CALLS_PER_TURN = Option(
    "calls_per_turn",
    "tool calls per turn (default: %(default)s)",
    positive_int,
    default=1,
    shorthand=("--batch", None),
)


class OracleAgent(ScriptedAgent):
    """The row's gold crafts (the craft tool takes the total made), then ``finish``."""

    name = "oracle"
    privileged = True
    OPTIONS = (CALLS_PER_TURN,)

    def __init__(self, calls_per_turn: Optional[int] = 1) -> None:
        super().__init__()
        self.calls_per_turn = _check_calls_per_turn(calls_per_turn)

    def reset(self, observation, info, *, rng, row=None) -> None:
        if row is None:
            raise ValueError("the oracle needs the task row")
        self._turns = in_turns(records.gold_tool_calls(row), self.calls_per_turn)


class NopAgent(ScriptedAgent):
    """Finishes at once, having crafted nothing."""

    name = "nop"

    def reset(self, observation, info, *, rng, row=None) -> None:
        self._turns = [[call("finish", message="I crafted nothing.")]]


class RandomAgent(Agent):
    """One well-formed call a turn with random content, from what it has seen so far.

    It looks up random known items, crafts a random described recipe at 1-3 times its result count (with
    the recipe's exact ingredients, so a craft succeeds whenever they are held), views the inventory, and
    finishes with probability ``finish_probability`` per turn.
    """

    name = "random"
    OPTIONS = (Option("finish_probability", "random: chance of finishing on each turn (default: %(default)s)", float, default=0.05),)

    def __init__(self, finish_probability: float = 0.05) -> None:
        if not 0.0 <= finish_probability <= 1.0:
            raise ValueError("finish_probability must be within [0, 1], got %r" % (finish_probability,))
        self.finish_probability = finish_probability

    def reset(self, observation, info, *, rng, row=None) -> None:
        self.rng = rng
        self.known = list(goal_targets(observation))
        self.recipes: Dict[str, Dict[str, Any]] = {}
        self._last: Optional[ToolCall] = None

    def act(self, observations: Sequence[Message]) -> Turn:
        if self._last is not None and self._last["name"] == "get_info" and observations:
            for entry in _json_or(observations[0].get("content"), []):
                self._learn(entry)
        rng = self.rng
        draw = rng.random()
        if draw < self.finish_probability:
            chosen = call("finish", message="Done.")
        elif draw < 0.15 or not self.recipes:
            chosen = call("get_info", items=[rng.choice(self.known)])
        elif draw < 0.25:
            chosen = call("view_inventory")
        else:
            item = rng.choice(sorted(self.recipes))
            recipe = self.recipes[item]
            crafts = rng.randint(1, 3)
            chosen = call(
                "craft",
                ingredients={name: count * crafts for name, count in recipe["ingredients"].items()},
                target=[item, recipe["result_count"] * crafts],
            )
        self._last = chosen
        return Turn([chosen])

    def _learn(self, entry: Any) -> None:
        if not isinstance(entry, dict) or not entry.get("recipes"):
            return
        recipe = entry["recipes"][0]
        self.recipes[entry["item"]] = recipe
        for name in recipe["ingredients"]:
            if name not in self.known:
                self.known.append(name)


class PlannerAgent(Agent):
    """A rule-based agent that knows only what the tools print.

    Turn by turn: ``view_inventory`` (with ``get_info`` of the targets in the same turn when batching), then
    ``get_info`` of every ingredient not yet described, one level of the recipe tree per turn, until every
    item is either described or held.  Then it plans: going from the targets down (each item after every item
    that uses it), the shortfall of an item is what the targets and the crafts above need beyond what is held,
    rounded up to the recipe's result count; each item with a shortfall is crafted once with that total,
    ingredients first.  Finally ``finish``.  It never sees the task row.
    """

    name = "planner"
    OPTIONS = (CALLS_PER_TURN,)

    def __init__(self, calls_per_turn: Optional[int] = 1) -> None:
        self.calls_per_turn = _check_calls_per_turn(calls_per_turn)

    def reset(self, observation, info, *, rng, row=None) -> None:
        self.targets = goal_targets(observation)
        self.held: Dict[str, int] = {}
        self.recipes: Dict[str, Optional[Dict[str, Any]]] = {}  # item -> first recipe, or None (base / none)
        self._pending: List[ToolCall] = []
        self._planned: Optional[List[List[ToolCall]]] = None
        self._started = False

    def act(self, observations: Sequence[Message]) -> Turn:
        for sent, message in zip(self._pending, observations):
            self._read(sent, message.get("content", ""))
        if self._planned is None:
            look = self._next_lookups()
            if look:
                self._pending = look
                return Turn(look)
            finish = call("finish", message=records.finish_message(self.targets))
            self._planned = in_turns(self.plan() + [finish], self.calls_per_turn)
        self._pending = []
        return Turn(self._planned.pop(0) if self._planned else [call("finish", message=records.finish_message(self.targets))])

    def _next_lookups(self) -> List[ToolCall]:
        if not self._started:
            self._started = True
            first = [call("view_inventory")]
            if self.calls_per_turn != 1:
                first.append(call("get_info", items=list(self.targets)))
            return first
        unknown = [item for item in self._tree_items() if item not in self.recipes]
        return [call("get_info", items=unknown)] if unknown else []

    def _tree_items(self) -> List[str]:
        """The targets and every ingredient below them in the recipes described so far, in discovery order."""
        order = list(self.targets)
        seen = set(order)
        for item in order:  # grows while it is walked: a breadth-first walk
            recipe = self.recipes.get(item)
            for name in recipe["ingredients"] if recipe else ():
                if name not in seen:
                    seen.add(name)
                    order.append(name)
        return order

    def _read(self, sent: ToolCall, text: str) -> None:
        if sent["name"] == "view_inventory":
            inventory = _json_or(text, {})
            if isinstance(inventory, dict):
                self.held = {k: v for k, v in inventory.items() if isinstance(v, int)}
        elif sent["name"] == "get_info":
            for entry in _json_or(text, []):
                if isinstance(entry, dict) and isinstance(entry.get("item"), str):
                    recipes = entry.get("recipes") or []
                    self.recipes[entry["item"]] = recipes[0] if recipes else None

    def plan(self) -> List[ToolCall]:
        """The crafts, ingredients first, that bring every target to its count from what is held."""
        order = self._topological_order()  # every item after every item it is made from
        demand = {item: self.held.get(item, 0) + count for item, count in self.targets.items()}
        crafts: List[ToolCall] = []
        for item in reversed(order):  # users before ingredients: an item's demand is complete when reached
            shortfall = demand.get(item, 0) - self.held.get(item, 0)
            recipe = self.recipes.get(item)
            if shortfall <= 0 or recipe is None:
                continue
            result_count = recipe["result_count"]
            runs = -(-shortfall // result_count)
            ingredients = {name: count * runs for name, count in recipe["ingredients"].items()}
            for name, amount in ingredients.items():
                demand[name] = demand.get(name, 0) + amount
            crafts.append(call("craft", ingredients=ingredients, target=[item, result_count * runs]))
        crafts.reverse()
        return crafts

    def _topological_order(self) -> List[str]:
        """Depth-first post-order from the targets: ingredients come before what they make."""
        order: List[str] = []
        state: Dict[str, int] = {}  # 1 on the path, 2 done

        def visit(item: str) -> None:
            if state.get(item) is not None:
                return  # done, or a cycle (not in this world): leave it
            state[item] = 1
            recipe = self.recipes.get(item)
            for name in recipe["ingredients"] if recipe else ():
                visit(name)
            state[item] = 2
            order.append(item)

        for target in self.targets:
            visit(target)
        return order


def _json_or(text: Any, default: Any) -> Any:
    if not isinstance(text, str):
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
