"""Config ``sft-recursive``: conversations of agents that delegate, one row per agent per task.

Every task is played by a tree of careful agents on one shared inventory (:mod:`tcsynth.recursive`).  Each
agent's conversation is ``system`` (the rules plus the delegation paragraph, while it may still delegate),
``user`` (its goal; a child's carries its parent's context below), then::

    assistant  view_inventory()                          what do I hold?
    assistant  get_info([targets]), get_info([...])      recipes, level by level, down to what it will
                                                         delegate (ingredients at least 3 deep) or hold
    assistant  launch_subagent(...), ..., view_inventory()   deepest subtrees first, one subagent each;
                                                         each answer is that subagent's finish message
    assistant  craft(...), ...                           the top of its own tree, one turn per depth
    assistant  finish(message)

The k-th ``launch_subagent`` call of agent ``P`` is agent ``P.k``, rendered at the moment of the call on
the inventory as it is then, so every answer (inventories and ``in_inventory`` counts included) is what
the engine returned at that moment.  Agents at delegation depth 2 (the cap) are not offered the tool and
craft their whole subtree, like the ``sft`` conversations.

Row columns: ``name`` (the task), ``split``, ``difficulty``, ``agent_path`` (``"0"``, ``"0.1"``, ...),
``parent_path`` (null for the root), ``depth``, ``targets`` and ``initial_inventory`` (the agent's own
goal and its snapshot, as ``[{item, count}]``; the root's are the task's), ``num_steps`` (its turn budget),
``messages`` and ``tools`` (JSON, as in ``sft``), and the sizes ``num_turns``, ``num_tool_calls``,
``num_characters``.  Rows come task by task, each task's agents in launch order (root first, then depth
first).

After rendering, every task's agents are replayed together with :func:`tcsynth.recursive.replay_tree`:
each tool message must equal what the engine answers at that moment, every agent must succeed on its own
targets within its budget and the root on the task's; otherwise :class:`SftRecursiveError` names the task.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from tqdm.auto import tqdm

from . import background, game, prompts, records, recursive
from .errors import UserError
from .store import Records

Message = Dict[str, Any]
Row = Dict[str, Any]
# The rounds of launches an agent may make (a later round asks again for what a subagent used up).
MAX_ROUNDS = 3


class SftRecursiveError(UserError):
    """A task whose agents cannot be rendered, or do not replay to success; names the task and the agent."""


class _Conversation:
    """One agent's messages under construction; its calls are played on its tree node as they are written."""

    def __init__(self, task_name: str, node: recursive.Agent, render_child):
        self.task_name = task_name
        self.node = node
        self.render_child = render_child
        self.calls = 0
        self.turns: List[List[Dict[str, Any]]] = []
        self.messages: List[Message] = [
            {"role": "system", "content": recursive.system_prompt(node.can_delegate)},
            {"role": "user", "content": recursive.child_prompt(node.targets, node.context)},
        ]

    def turn(self, intent: str, calls: Sequence[Tuple[str, Dict[str, Any]]]) -> List[str]:
        tool_calls = []
        for tool, arguments in calls:
            self.calls += 1
            tool_calls.append({"id": "call_%d" % self.calls, "type": "function", "function": {"name": tool, "arguments": arguments}})
        self.messages.append({"role": "assistant", "content": intent, "tool_calls": tool_calls})
        self.turns.append(tool_calls)
        answers = []
        for call in tool_calls:
            tool, arguments = call["function"]["name"], call["function"]["arguments"]
            if tool == recursive.LAUNCH_TOOL:
                _, child, refused = self.node.launch(arguments)
                if child is None:
                    raise SftRecursiveError("%s: agent %s: the launch was refused: %s" % (self.task_name, self.node.path, refused))
                answer = child.answer(self.render_child(child))
            else:
                answer = self.node.call(tool, arguments)
            if answer.startswith("Error"):
                raise SftRecursiveError("%s: agent %s: %s %s was rejected: %s" % (self.task_name, self.node.path, call["id"], tool, answer))
            answers.append(answer)
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "name": tool, "content": answer})
        return answers


def _items(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _render_agent(task_name: str, node: recursive.Agent, world: game.World, budget: int, delegate_depth: int, done: Dict[str, Any]) -> int:
    """Play and write one agent's conversation (its children's too, at their launch); returns its turns."""

    def render_child(child: recursive.Agent) -> int:
        return _render_agent(task_name, child, world, child.num_steps, delegate_depth, done)

    talk = _Conversation(task_name, node, render_child)
    threshold = delegate_depth if node.can_delegate else None
    targets = node.targets
    (inventory,) = talk.turn("First I'll check what I have in my inventory.", [("view_inventory", {})])
    held = json.loads(inventory)
    recipes: Dict[str, Optional[Dict[str, Any]]] = {}
    depths: Dict[str, int] = {}
    announced: set = set()
    level = list(targets)
    intent = "I'll look up the %s of %s." % ("recipe" if len(level) == 1 else "recipes", _items(level))
    while level:
        (answer,) = talk.turn(intent, [("get_info", {"items": level})])
        for entry in json.loads(answer):
            recipes[entry["item"]] = entry["recipes"][0] if entry["recipes"] else None
            depths[entry["item"]] = entry["crafting_depth"]
        # Next: the ingredients of what it will craft itself that are not base materials (those it holds).
        level = [item for item in recursive.frontier_items(list(targets), recipes, depths, threshold) if item not in recipes and not world.is_base(item)]
        delegated = [item for item in recipes if item not in targets and item not in announced and threshold is not None and depths[item] >= threshold]
        announced.update(delegated)
        if level:
            intent = "%s; I'll look up %s." % (
                "I'll leave %s to subagents, since %s deep" % (_items(delegated), "it is" if len(delegated) == 1 else "they are") if delegated else "I have to craft more ingredients",
                _items(level) if len(level) <= 3 else "the %d I will craft myself" % len(level),
            )
    rounds = 0
    while True:
        delegations, crafts = recursive.plan_part(targets, recipes, depths, held, threshold)
        if not delegations:
            break
        rounds += 1
        if rounds > MAX_ROUNDS:
            raise SftRecursiveError("%s: agent %s still needs %s after %d rounds of subagents" % (task_name, node.path, delegations, MAX_ROUNDS))
        users = {name: item for item, recipe in recipes.items() if recipe for name in recipe["ingredients"]}
        calls = [
            (recursive.LAUNCH_TOOL, {"targets": {item: count}, "num_steps": budget, "context": "I need it to craft %s." % users.get(item, item)})
            for item, count in delegations
        ]
        names = [item for item, _ in delegations]
        if rounds == 1 and len(names) == 1:
            intent = "%s is deep, so I'll hand it to a subagent, then see what it left." % names[0]
        elif rounds == 1:
            intent = "%s are deep, so I'll hand each to a subagent, deepest first, then see what they left." % _items(names)
        else:
            intent = "A subagent used some of what I had counted on; I'll ask for %s again." % _items(names)
        answers = talk.turn(intent, calls + [("view_inventory", {})])
        held = json.loads(answers[-1])
    groups: Dict[int, List[Tuple[str, int, Dict[str, int]]]] = {}
    for item, total, ingredients in crafts:
        groups.setdefault(depths[item], []).append((item, total, ingredients))
    for number, depth in enumerate(sorted(groups)):
        group = groups[depth]
        lead = "Now I have what I need, so I'll craft from the bottom up. " if number == 0 else ""
        what = "the %d items" % len(group) if len(group) > 1 else "the item"
        talk.turn("%sCrafting %s of depth %d." % (lead, what, depth), [("craft", {"ingredients": ing, "target": [item, total]}) for item, total, ing in group])
    talk.turn("Every target is in my inventory now, so I'm done.", [("finish", {"message": records.finish_message(targets)})])
    verdict = node.verdict()
    if not verdict.success:
        raise SftRecursiveError("%s: agent %s does not succeed: %s" % (task_name, node.path, verdict.reason))
    if len(talk.turns) > budget:
        raise SftRecursiveError("%s: agent %s takes %d turns, over its budget of %d" % (task_name, node.path, len(talk.turns), budget))
    done[node.path] = talk
    return len(talk.turns)


def task_conversations(row: Mapping[str, Any], world: game.World, delegate_depth: int = recursive.DEFAULT_DELEGATE_DEPTH,
                       max_depth: int = recursive.DEFAULT_MAX_DEPTH) -> List[Tuple[recursive.Agent, List[Message]]]:
    """Every agent of one task with its messages, in launch order, verified (see the module docstring)."""
    task = records.engine_task(row)
    tree = recursive.Tree(world, task, max_depth)
    done: Dict[str, _Conversation] = {}
    _render_agent(row["name"], tree.root, world, row["max_steps"], delegate_depth, done)
    verify(row, world, {path: talk.messages for path, talk in done.items()}, max_depth)
    return [(node, done[node.path].messages) for node in tree.agents]


def _turns(messages: Iterable[Mapping[str, Any]]) -> List[List[Dict[str, Any]]]:
    return [list(message.get("tool_calls", ())) for message in messages if message["role"] == "assistant"]


def verify(row: Mapping[str, Any], world: game.World, conversations: Mapping[str, Sequence[Mapping[str, Any]]], max_depth: int = recursive.DEFAULT_MAX_DEPTH) -> Dict[str, game.Verdict]:
    """Replay a task's agents together on one inventory; raise :class:`SftRecursiveError` unless every agent
    succeeds on its own targets (the root on the task's) and every tool message is the engine's answer."""
    name = row["name"]
    try:
        verdicts = recursive.replay_tree(world, records.engine_task(row), {path: _turns(messages) for path, messages in conversations.items()},
                                         max_depth, row["max_steps"])
    except ValueError as error:
        raise SftRecursiveError("%s: %s" % (name, error))
    if set(verdicts) != set(conversations):
        raise SftRecursiveError("%s: agents %s are launched but have no conversation" % (name, ", ".join(sorted(set(verdicts) - set(conversations)))))
    for path, verdict in verdicts.items():
        if not verdict.success:
            raise SftRecursiveError("%s: agent %s does not succeed on replay: %s" % (name, path, verdict.reason))
        answers = [message for message in conversations[path] if message["role"] == "tool"]
        calls = [call for turn in _turns(conversations[path]) for call in turn]
        if len(answers) != len(calls) or len(answers) != len(verdict.observations):
            raise SftRecursiveError("%s: agent %s: %d calls, %d tool messages" % (name, path, len(calls), len(answers)))
        for call, answer, printed in zip(calls, answers, verdict.observations):
            if answer["tool_call_id"] != call["id"] or answer["content"] != printed:
                raise SftRecursiveError("%s: agent %s: the answer to %s is not what the engine returns then" % (name, path, call["id"]))
    return verdicts


def task_rows(row: Mapping[str, Any], world: game.World, encoded: bool = False) -> List[Row]:
    """The rows of one task: messages and tools as Python objects, or with ``encoded`` as JSON text (how
    the ``datasets.Json`` columns store them)."""
    rows = []
    for node, messages in task_conversations(row, world):
        rows.append(
            {
                "name": row["name"],
                "split": row["split"],
                "difficulty": row["difficulty"],
                "agent_path": node.path,
                "parent_path": recursive.parent_path(node.path),
                "depth": node.depth,
                "targets": records.counts_to_list(node.targets),
                "initial_inventory": records.counts_to_list(node.snapshot),
                "num_steps": row["max_steps"] if node.num_steps is None else node.num_steps,
                "messages": [game.dumps(message) for message in messages] if encoded else messages,
                "tools": _tools_json(node.can_delegate) if encoded else recursive.tool_schemas(node.can_delegate),
                "num_turns": sum(message["role"] == "assistant" for message in messages),
                "num_tool_calls": sum(message["role"] == "tool" for message in messages),
                "num_characters": prompts.num_characters(messages),
            }
        )
    return rows


_TOOLS_JSON: Dict[bool, str] = {}


def _tools_json(can_delegate: bool) -> str:
    """``json.dumps`` of an agent's tools, made once per process for each of the two sets."""
    text = _TOOLS_JSON.get(can_delegate)
    if text is None:
        text = _TOOLS_JSON[can_delegate] = json.dumps(recursive.tool_schemas(can_delegate))
    return text


# Tasks per unit of work handed to a worker process (a few dozen units per split keep both cores busy).
CHUNK_TASKS = 64
_SHARED: Dict[str, Any] = {}  # the records, for the forked workers of sft_recursive_rows


def _chunk_rows(bounds: Tuple[str, int, int]) -> List[Row]:
    split, start, stop = bounds
    data = _SHARED["data"]
    return [out for row in data.tasks[split][start:stop] for out in task_rows(row, data.world, encoded=True)]


def sft_recursive_rows(data: Records, split: str, progress: bool = True, processes: int = 1) -> List[Row]:
    """The encoded rows (messages and tools as JSON text) of one split, rendered by up to ``processes``
    forked processes (:func:`tcsynth.background.imap`), in task order whatever their number."""
    tasks = data.tasks[split]
    chunks = [(split, start, min(start + CHUNK_TASKS, len(tasks))) for start in range(0, len(tasks), CHUNK_TASKS)]
    rows: List[Row] = []
    _SHARED["data"] = data
    try:
        with tqdm(total=len(tasks), desc="rendering recursive sft (%s)" % split, unit="task", disable=not progress or None) as bar:
            for (_, start, stop), chunk in zip(chunks, background.imap(_chunk_rows, chunks, processes)):
                rows.extend(chunk)
                bar.update(stop - start)
    finally:
        _SHARED.clear()
    return rows
