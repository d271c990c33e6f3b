"""The recursive game: agents that hand subgoals to subagents working on the *same* inventory.

This is platoon-textcraft's recursive variant stated as rules over :class:`tcsynth.game.Game`, which is
not changed: the engine already judges an episode against its own ``initial_inventory``, so a child is a
``Game`` built with a snapshot as its starting inventory whose ``inventory`` attribute is then pointed at
the parent's dict.

The fifth tool
    ``launch_subagent(targets: {item: count}, num_steps: int, context: str = "")`` starts a child agent whose
    goal is :func:`tcsynth.records.goal_text` of ``targets`` (``Craft the following items: 2x stick``), with
    ``context`` (when given) as a second paragraph of its first user message.  The call costs the parent one
    turn, however long the child plays; its answer is the child's ``finish`` message, or an ``Error:`` line
    when the child stopped without one (:func:`unfinished_answer`).

The shared inventory
    Every agent of a tree reads and changes one dict.  A child's starting inventory is a snapshot taken at
    its launch; it succeeds when it calls ``finish`` with a message and each of its targets has been gained
    on top of that snapshot (the engine's rule, applied to the snapshot).  Its verdict is fixed when it
    ends; what the parent does afterwards with the items does not change it.

Budgets and depth
    A child has ``num_steps`` turns of its own.  The root has depth 0, its children 1, and so on; an agent at
    ``max_depth`` (the delegation cap) is not offered ``launch_subagent``, and a call to it is refused.

Paths
    The root is agent ``"0"``; the k-th ``launch_subagent`` call of agent ``P`` (counting from 1, in call
    order, refused launches included) is agent ``"P.k"``.

Concurrency
    Each tool call on the shared inventory runs under the tree's one lock (:attr:`Tree.lock`), and so does
    taking a child's snapshot, so crafts stay atomic when siblings play in threads: no ingredient can be
    spent twice, and no craft sees a half-applied one.  The lock is never held while a child plays.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import game, prompts, records

LAUNCH_TOOL = "launch_subagent"
# How deep delegation may go when nobody says: the root and its children may launch, grandchildren may not.
DEFAULT_MAX_DEPTH = 2
# The baselines' and the SFT data's choice: an ingredient at least this deep is a subagent's job.
DEFAULT_DELEGATE_DEPTH = 3
ROOT_PATH = "0"

LAUNCH_SCHEMA: Dict[str, Any] = {
    "type": "function",
    "function": {
        "name": LAUNCH_TOOL,
        "description": (
            "Hand a subgoal to a subagent that crafts from your inventory (the same one, shared) and gets "
            "num_steps turns of its own; it costs you one turn and returns the subagent's finish message."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "targets": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 1},
                    "description": "Items the subagent must add to the inventory, mapped to how many.",
                },
                "num_steps": {"type": "integer", "minimum": 1, "description": "The subagent's turn budget."},
                "context": {"type": "string", "description": "Anything the subagent should know (optional)."},
            },
            "required": ["targets", "num_steps"],
        },
    },
}

DELEGATION_PROMPT = """\
You may also hand part of the work to a subagent with launch_subagent(targets, num_steps, context). A \
subagent plays the same game on your inventory (not a copy): what it crafts is yours, and the materials it \
uses are gone from your inventory too. Give it exactly the items you need it to add, and a turn budget. It \
succeeds when it has added its targets and finished; its finish message is the tool's answer, and the call \
costs you one turn however long it plays. After subagents have run, view_inventory shows what they left."""


def system_prompt(can_delegate: bool) -> str:
    """The system prompt of an agent that may (or, at the depth cap, may not) launch subagents."""
    return prompts.SYSTEM_PROMPT + "\n\n" + DELEGATION_PROMPT if can_delegate else prompts.SYSTEM_PROMPT


def tool_schemas(can_delegate: bool) -> List[Dict[str, Any]]:
    """The four tools, plus ``launch_subagent`` when the agent may delegate (a fresh copy)."""
    tools = prompts.tool_schemas()
    return tools + [copy.deepcopy(LAUNCH_SCHEMA)] if can_delegate else tools


def child_prompt(targets: Mapping[str, int], context: str = "") -> str:
    """A child's first user message: its goal, then the parent's ``context`` as a second paragraph."""
    goal = records.goal_text(targets)
    return goal + "\n\n" + context if context else goal


def prompt_goal(text: str) -> str:
    """The goal line of a first user message (a child's may carry context below it)."""
    return text.split("\n", 1)[0]


def launch_problem(arguments: Any) -> Optional[str]:
    """What is wrong with a ``launch_subagent`` argument dict (a sentence), or ``None`` when it is well formed."""
    if not isinstance(arguments, dict):
        return "the arguments of %s must be a JSON object" % LAUNCH_TOOL
    unknown = sorted(set(map(str, arguments)) - {"targets", "num_steps", "context"})
    if unknown or "targets" not in arguments or "num_steps" not in arguments:
        return "%s takes targets, num_steps and optionally context; got %s" % (LAUNCH_TOOL, ", ".join(sorted(map(str, arguments))) or "none")
    targets = arguments["targets"]
    if not isinstance(targets, dict) or not targets:
        return "targets must be a non-empty object of item name to count"
    for item, count in targets.items():
        if not item or type(count) is not int or count < 1:
            return "targets must map item names to positive integers; got %s: %r" % (item, count)
    if type(arguments["num_steps"]) is not int or arguments["num_steps"] < 1:
        return "num_steps must be a positive integer, got %r" % (arguments["num_steps"],)
    if not isinstance(arguments.get("context", ""), str):
        return "context must be a string"
    return None


def unfinished_answer(steps: int) -> str:
    """The launch answer when the child ended without a finish message (budget spent, or it stopped)."""
    return "Error: the subagent ended without finishing (%d turns used); check view_inventory for what it made" % steps


def depth_cap_answer(max_depth: int) -> str:
    return "Error: %s is not available at delegation depth %d (the cap)" % (LAUNCH_TOOL, max_depth)


# ----------------------------------------------------------------------------------------------- the tree


class Tree:
    """The agents of one task and the inventory they share.

    Args:
        world (`tcsynth.game.World`): the recipes.
        task (`dict`): the root's task (``target_items``/``initial_inventory`` as ``{item: count}``).
        max_depth (`int`, defaults to :data:`DEFAULT_MAX_DEPTH`): the delegation cap; 0 means no launches.
    """

    def __init__(self, world: game.World, task: Mapping[str, Any], max_depth: int = DEFAULT_MAX_DEPTH):
        if type(max_depth) is not int or max_depth < 0:
            raise ValueError("max_depth must be a non-negative integer, got %r" % (max_depth,))
        self.world = world
        self.max_depth = max_depth
        self.lock = threading.Lock()
        self.root = Agent(self, None, ROOT_PATH, game.Game.for_task(world, task))
        self.inventory = self.root.game.inventory
        self.agents: List[Agent] = [self.root]  # in launch order

    def agent(self, path: str) -> "Agent":
        for node in self.agents:
            if node.path == path:
                return node
        raise KeyError(path)


class Agent:
    """One agent of a :class:`Tree`: its path, depth, targets, snapshot and its own ``Game`` on the shared dict."""

    def __init__(self, tree: Tree, parent: Optional["Agent"], path: str, game_: game.Game, num_steps: Optional[int] = None, context: str = ""):
        self.tree = tree
        self.parent = parent
        self.path = path
        self.depth = 0 if parent is None else parent.depth + 1
        self.game = game_
        self.num_steps = num_steps
        self.context = context
        self.launches = 0  # launch_subagent calls made so far (each numbers a path)
        self.children: List[Agent] = []

    @property
    def targets(self) -> Dict[str, int]:
        return dict(self.game.target_items)

    @property
    def snapshot(self) -> Dict[str, int]:
        """The inventory when this agent started (for the root: the task's)."""
        return dict(self.game.initial_inventory)

    @property
    def can_delegate(self) -> bool:
        return self.depth < self.tree.max_depth

    def call(self, tool: str, arguments: Any) -> str:
        """One of the four tools on the shared inventory, atomically."""
        with self.tree.lock:
            return self.game.call(tool, arguments)

    def next_path(self) -> str:
        """The path the next launch gets; counts the launch."""
        self.launches += 1
        return "%s.%d" % (self.path, self.launches)

    def launch(self, arguments: Any) -> Tuple[str, Optional["Agent"], Optional[str]]:
        """Start a child: ``(path, child, None)``, or ``(path, None, error answer)`` when refused.

        A refused launch still takes its path number, so paths follow the calls the conversation shows.
        """
        path = self.next_path()
        if not self.can_delegate:
            return path, None, depth_cap_answer(self.tree.max_depth)
        if self.game.finished:
            return path, None, game.EPISODE_OVER
        problem = launch_problem(arguments)
        if problem is not None:
            return path, None, "Error: " + problem
        with self.tree.lock:
            snapshot = dict(self.tree.inventory)
            child_game = game.Game(self.tree.world, arguments["targets"], snapshot)
            child_game.inventory = self.tree.inventory  # shared, not copied
        child = Agent(self.tree, self, path, child_game, arguments["num_steps"], arguments.get("context", ""))
        self.children.append(child)
        self.tree.agents.append(child)
        return path, child, None

    def verdict(self, calls: int = 0) -> game.Verdict:
        """The engine's verdict on this agent against its own targets and snapshot, as things stand."""
        with self.tree.lock:
            return game.judge(self.game, calls, [])

    def answer(self, steps: int) -> str:
        """What the parent's launch call returns: the finish message, or :func:`unfinished_answer`."""
        return self.game.message if self.game.finished and self.game.message else unfinished_answer(steps)


def child_task(targets: Mapping[str, int], snapshot: Mapping[str, int]) -> Dict[str, Any]:
    """A child's task as the engine and the rows take it."""
    return {"goal": records.goal_text(targets), "target_items": dict(targets), "initial_inventory": dict(snapshot)}


def child_paths(path: str, launches: int) -> List[str]:
    return ["%s.%d" % (path, k) for k in range(1, launches + 1)]


def parent_path(path: str) -> Optional[str]:
    """``"0.1"`` for ``"0.1.2"``; ``None`` for the root."""
    return path.rsplit(".", 1)[0] if "." in path else None


def path_depth(path: str) -> int:
    return path.count(".")


# ------------------------------------------------------------------------------------------------ planning


def plan_part(
    targets: Mapping[str, int],
    recipes: Mapping[str, Optional[Mapping[str, Any]]],
    depths: Mapping[str, int],
    held: Mapping[str, int],
    delegate_depth: Optional[int],
) -> Tuple[List[Tuple[str, int]], List[Tuple[str, int, Dict[str, int]]]]:
    """One agent's share of the work: what to delegate and what to craft itself.

    ``recipes`` maps each described item to its first recipe (``{"ingredients", "result_count"}``) or
    ``None``; ``depths`` their crafting depths.  Going from the targets down (users before ingredients),
    an item that is not one of the agent's own targets, is at least ``delegate_depth`` deep and still falls
    short of what the crafts above need becomes a delegation ``(item, shortfall)`` and is not expanded;
    every other item with a shortfall is crafted once, rounded up to its result count.  ``delegate_depth``
    ``None`` delegates nothing (the planner's plan).  Returns ``(delegations, crafts)``, crafts ingredients
    first as ``(item, total, ingredients)``.
    """
    def delegated(item: str) -> bool:
        return delegate_depth is not None and item not in targets and depths.get(item, 0) >= delegate_depth

    order: List[str] = []
    state: Dict[str, int] = {}

    def visit(item: str) -> None:  # depth-first post-order: ingredients before what they make
        if item in state:
            return
        state[item] = 1
        recipe = recipes.get(item)
        if recipe is not None and not delegated(item):
            for name in recipe["ingredients"]:
                visit(name)
        order.append(item)

    for target in targets:
        visit(target)
    demand = {item: held.get(item, 0) + count for item, count in targets.items()}
    delegations: List[Tuple[str, int]] = []
    crafts: List[Tuple[str, int, Dict[str, int]]] = []
    for item in reversed(order):
        shortfall = demand.get(item, 0) - held.get(item, 0)
        recipe = recipes.get(item)
        if shortfall <= 0 or recipe is None:
            continue
        if delegated(item):
            delegations.append((item, shortfall))
            continue
        runs = -(-shortfall // recipe["result_count"])
        ingredients = {name: count * runs for name, count in recipe["ingredients"].items()}
        for name, amount in ingredients.items():
            demand[name] = demand.get(name, 0) + amount
        crafts.append((item, recipe["result_count"] * runs, ingredients))
    crafts.reverse()
    # Deepest first: a later child's target is no deeper, so nothing below it is an earlier child's target,
    # and what it finds in the shared inventory and uses is only what earlier agents had left over.
    delegations.sort(key=lambda delegation: -depths.get(delegation[0], 0))
    return delegations, crafts


def frontier_items(
    targets: Sequence[str], recipes: Mapping[str, Optional[Mapping[str, Any]]], depths: Mapping[str, int], delegate_depth: Optional[int]
) -> List[str]:
    """The items an agent must describe: the targets and, breadth first, the ingredients of every described
    item it will craft itself (delegated items are described but not expanded)."""
    order = list(targets)
    seen = set(order)
    for item in order:
        if item not in recipes:
            continue
        recipe = recipes[item]
        if recipe is None or (delegate_depth is not None and item not in targets and depths.get(item, 0) >= delegate_depth):
            continue
        for name in recipe["ingredients"]:
            if name not in seen:
                seen.add(name)
                order.append(name)
    return order


# -------------------------------------------------------------------------------------------------- replay


def replay_agent(node: Agent, turns: Sequence[Sequence[Any]], subagent, max_turns: Optional[int] = None) -> game.Verdict:
    """Play one agent's turns (each a list of tool calls, in any form the engine reads) on the shared inventory.

    A ``launch_subagent`` call starts the child (:meth:`Agent.launch`) and hands it to ``subagent(child)``,
    which plays it to its end and returns the turns it used; the call's answer is then
    :meth:`Agent.answer`.  As in :func:`tcsynth.game.replay`, a call that cannot be read, names an unknown
    tool or comes after ``finish`` ends the replay with reward 0; so does using more than ``max_turns``
    turns.  Returns the agent's verdict, taken when it ends (the observations are each call's answer).
    """
    observations: List[str] = []
    problem = None
    if max_turns is not None and len(turns) > max_turns:
        problem = "%d turns, over the budget of %d" % (len(turns), max_turns)
        turns = turns[:max_turns]
    number = 0
    for turn in turns:
        for call in turn:
            number += 1
            if node.game.finished:
                problem = "call %d comes after finish" % number
                break
            try:
                tool, arguments = game.parse_tool_call(call)
            except game.ToolCallError as error:
                problem = "call %d: %s" % (number, error)
                break
            if tool == LAUNCH_TOOL:
                _, child, refused = node.launch(arguments)
                observations.append(refused if child is None else child.answer(subagent(child)))
                continue
            wrong = game.argument_problem(tool, arguments)
            if wrong is not None:
                problem = "call %d: %s" % (number, wrong)
                break
            observations.append(node.call(tool, arguments))
        else:
            continue
        break
    with node.tree.lock:
        return game.judge(node.game, len(observations), observations, problem)


def replay_tree(
    world: game.World,
    task: Mapping[str, Any],
    conversations: Mapping[str, Sequence[Sequence[Any]]],
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_turns: Optional[int] = None,
) -> Dict[str, game.Verdict]:
    """Replay every agent of a task together on one inventory; ``{path: verdict}`` in launch order.

    ``conversations`` maps each agent's path to its turns; the root's turns are played first and each
    child's exactly when its parent's call launches it.  A launched path missing from ``conversations``
    plays no turn (it does not finish).  A path in ``conversations`` that is never launched raises
    ``ValueError``: the rows and the tree disagree.
    """
    tree = Tree(world, task, max_depth)
    verdicts: Dict[str, game.Verdict] = {}

    def subagent(child: Agent) -> int:
        turns = conversations.get(child.path, [])
        verdicts[child.path] = replay_agent(child, turns, subagent, child.num_steps)
        return min(len(turns), child.num_steps or len(turns))

    verdicts[ROOT_PATH] = replay_agent(tree.root, conversations.get(ROOT_PATH, []), subagent, max_turns)
    stray = sorted(set(conversations) - set(verdicts))
    if stray:
        raise ValueError("agents %s are never launched" % ", ".join(stray))
    return {node.path: verdicts[node.path] for node in tree.agents if node.path in verdicts}


class IdealSubagent:
    """A ``subagent`` callback for :func:`replay_agent` that knows the world: each child crafts exactly its
    targets from the shared inventory (the planner's crafts, nothing delegated) and finishes.

    For grading one agent's completion alone (:func:`tcsynth.rewards.get_textcraft_recursive_reward`):
    the children it launches are assumed competent, so the agent is judged on its own decomposition and
    crafts.  A child whose targets cannot be made from what the inventory holds fails like a real one.
    """

    def __init__(self, world: game.World):
        self.world = world
        self.recipes = {item: {"ingredients": dict(options[0][1]), "result_count": options[0][0]} for item, options in world.recipes.items() if options}
        self.depths = {item: world.depth(item) for item in self.recipes}

    def __call__(self, child: Agent) -> int:
        with child.tree.lock:
            held = dict(child.tree.inventory)
        _, crafts = plan_part(child.targets, self.recipes, self.depths, held, None)
        for item, total, ingredients in crafts:
            if child.call("craft", {"ingredients": ingredients, "target": [item, total]}).startswith("Error"):
                return 1  # gives up: the parent gets the "did not finish" answer
        child.call("finish", {"message": records.finish_message(child.targets)})
        return 1 + len(crafts)
