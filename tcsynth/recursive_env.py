"""``RecursiveTextCraftEnv``: :class:`tcsynth.env.TextCraftEnv` with ``launch_subagent``, and the runner that
plays every agent of a tree.

The rules (shared inventory, snapshots, paths, the depth cap, the lock) are :mod:`tcsynth.recursive`'s;
this module wires them to the chat environment and to the agents.

Environment
    Everything :class:`~tcsynth.env.TextCraftEnv` does, plus: the system prompt gains the delegation
    paragraph and the tools ``launch_subagent`` (both only while the agent is under the depth cap).  A
    launch call builds a child environment (:attr:`RecursiveTextCraftEnv.children`) on the shared
    inventory, with ``num_steps`` turns and its own verdict, and hands it to ``subagent(child_env)``, which
    must play it to its end; the call's answer is the child's finish message.  Without a ``subagent`` the
    child plays no turn and the answer says it did not finish.  The launching turn counts once.

Runner
    :class:`SubagentRunner` is a ``subagent`` callback that plays each child with a fresh copy of the
    parent's policy (``agent.spawn()``), seeded by the episode seed and the child's path, and keeps one
    record per child (:func:`child_record`).  :func:`tree_env` builds a root environment with it;
    :func:`delegation_fields` adds to an episode record ``subagents``, ``max_delegation_depth`` (the
    deepest launch), ``children``, ``tree_steps``/``tree_tool_calls``/``tree_crafts`` (every agent's; the
    record's own ``steps``, ``tool_calls`` and ``crafts`` stay the root's) and ``planner_steps`` (the root
    turns the plain planner takes on the same task, so the summary can show the turns saved at the root).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import game, recursive, records
from .agents import PlannerAgent
from .env import TextCraftEnv

ChildRecord = Dict[str, Any]


class RecursiveTextCraftEnv(TextCraftEnv):
    """One agent of a recursive tree as a chat environment.

    Args:
        row (`dict`): the task row (for a child: :func:`child_row`).
        world (`tcsynth.game.World`): the recipes.
        max_steps (`int` or `NO_LIMIT`, *optional*): this agent's turn budget (default: the row's).
        max_delegation_depth (`int`, defaults to 3): the depth at which launching stops (0: never).
        subagent (`Callable[[RecursiveTextCraftEnv], None]`, *optional*): plays a child environment to its end.
        node (`tcsynth.recursive.Agent`, *optional*): the tree agent a child environment plays (set by the
            parent; a root builds its own tree at ``reset``).
    """

    def __init__(
        self,
        row: Mapping[str, Any],
        world: game.World,
        max_steps: Optional[float] = None,
        *,
        max_delegation_depth: int = recursive.DEFAULT_MAX_DEPTH,
        subagent: Optional[Callable[["RecursiveTextCraftEnv"], None]] = None,
        node: Optional[recursive.Agent] = None,
    ):
        super().__init__(row, world, max_steps)
        if type(max_delegation_depth) is not int or max_delegation_depth < 0:
            raise ValueError("max_delegation_depth must be a non-negative integer, got %r" % (max_delegation_depth,))
        self.max_delegation_depth = max_delegation_depth
        self.subagent = subagent
        self._given_node = node
        self.node: Optional[recursive.Agent] = None
        self.children: List[RecursiveTextCraftEnv] = []

    @property
    def path(self) -> str:
        return self._given_node.path if self._given_node is not None else recursive.ROOT_PATH

    def reset(self, *, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None):
        if self._given_node is not None and self.node is not None:
            raise RuntimeError("a subagent's environment plays once; its inventory is its parent's")
        observation, _ = super().reset(seed=seed, options=options)
        if self._given_node is None:
            self.node = recursive.Tree(self.world, self.task, self.max_delegation_depth).root
        else:
            self.node = self._given_node
            observation["messages"][1]["content"] = recursive.child_prompt(self.node.targets, self.node.context)
        self._game = self.node.game
        self.children = []
        observation["messages"][0]["content"] = recursive.system_prompt(self.node.can_delegate)
        observation["tools"] = recursive.tool_schemas(self.node.can_delegate)
        return observation, self.info()

    @property
    def tree(self) -> recursive.Tree:
        return self.node.tree

    def info(self) -> Dict[str, Any]:
        info = super().info()
        info.update(path=self.path, depth=recursive.path_depth(self.path), subagents=len(self.children))
        return info

    def verdict(self) -> game.Verdict:
        with self.tree.lock:
            return super().verdict()

    def _run_call(self, call: Any) -> Dict[str, Any]:
        try:
            tool, arguments = game.parse_tool_call(call)
        except game.ToolCallError:
            tool = None
        if tool != recursive.LAUNCH_TOOL:
            with self.tree.lock:  # one call at a time on the shared inventory
                return super()._run_call(call)
        self.tool_calls += 1
        _, child, refused = self.node.launch(arguments)
        if child is None:
            text = refused
            if refused != game.EPISODE_OVER:
                self.problems.append("turn %d, call %d (%s): %s" % (self.steps, self.tool_calls, tool, refused[len("Error: "):]))
        else:
            child_env = RecursiveTextCraftEnv(
                child_row(self.name, child),
                self.world,
                child.num_steps,
                max_delegation_depth=self.max_delegation_depth,
                subagent=self.subagent,
                node=child,
            )
            self.children.append(child_env)
            if self.subagent is not None:
                self.subagent(child_env)
            text = child.answer(child_env.steps if child_env.node is not None else 0)
        self._observations.append(text)
        message = {"role": "tool", "name": tool, "content": text}
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            message["tool_call_id"] = call["id"]
        return message


def child_row(name: str, child: recursive.Agent) -> Dict[str, Any]:
    """The row a child environment is built from: its goal, targets, snapshot and budget."""
    return {
        "name": "%s@%s" % (name, child.path),
        "goal": records.goal_text(child.targets),
        "target_items": records.counts_to_list(child.targets),
        "initial_inventory": records.counts_to_list(child.snapshot),
        "max_steps": child.num_steps,
    }


# --------------------------------------------------------------------------------------------------- runner

from .episode import play  # noqa: E402  (the one loop that plays an agent on an environment)


def child_record(env: RecursiveTextCraftEnv, outcome: Mapping[str, Any]) -> ChildRecord:
    """What an episode record keeps of one child: where it sits, what it was asked, how it did."""
    verdict = env.verdict()
    return {
        "path": env.path,
        "depth": recursive.path_depth(env.path),
        "targets": records.counts_to_list(env.node.targets),
        "num_steps": env.node.num_steps,
        "reward": verdict.reward,
        "steps": env.steps,
        "tool_calls": env.tool_calls,
        "crafts": env.game.crafts,
        "subagents": len(env.children),
        "truncated": bool(outcome["truncated"]),
        "aborted": outcome["aborted"],
        "reason": verdict.reason,
    }


class SubagentRunner:
    """Plays each launched child with ``agent.spawn()`` and records it (``records``, in launch order)."""

    def __init__(self, agent, seed: int):
        self.agent = agent
        self.seed = seed
        self.records: List[ChildRecord] = []

    def __call__(self, env: RecursiveTextCraftEnv) -> None:
        rng = random.Random("%d:%s" % (self.seed, env.path))
        slot = len(self.records)
        self.records.append({})  # keeps launch order although grandchildren finish first
        outcome = play(env, self.agent.spawn(), rng)
        self.records[slot] = child_record(env, outcome)


def tree_env(row: Mapping[str, Any], world: game.World, agent, max_steps: Optional[float], seed: int) -> RecursiveTextCraftEnv:
    """A root environment whose children ``agent``'s policy plays, capped at ``agent.max_delegation_depth``."""
    return RecursiveTextCraftEnv(
        row, world, max_steps, max_delegation_depth=agent.max_delegation_depth, subagent=SubagentRunner(agent, seed)
    )


def delegation_fields(env: RecursiveTextCraftEnv, row: Mapping[str, Any], world: game.World, agent, max_steps: Optional[float], seed: int) -> Dict[str, Any]:
    """The episode record's delegation fields (see the module docstring)."""
    children = list(env.subagent.records) if isinstance(env.subagent, SubagentRunner) else []
    baseline = agent.baseline() if hasattr(agent, "baseline") else PlannerAgent(getattr(agent, "calls_per_turn", 1))
    plain = TextCraftEnv(row, world, max_steps=max_steps)
    outcome = play(plain, baseline, random.Random(seed))
    return {
        "subagents": len(children),
        "max_delegation_depth": max((child["depth"] for child in children), default=0),
        "children": children,
        # The record's steps, tool_calls and crafts are the root's; these count every agent of the tree.
        "tree_steps": env.steps + sum(child["steps"] for child in children),
        "tree_tool_calls": env.tool_calls + sum(child["tool_calls"] for child in children),
        "tree_crafts": env.game.crafts + sum(child["crafts"] for child in children),
        "planner_steps": plain.steps,
        "planner_reward": outcome["reward"],
    }


# -------------------------------------------------------------------------------------------------- summary


def _rate(wins: int, total: int) -> float:
    return round(wins / total, 4) if total else 0.0


def delegation_summary(episodes: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Root success, child success per depth, agents per task, and root turns against the planner's."""
    roots = [e for e in episodes if "subagents" in e]
    children = [child for e in roots for child in e["children"]]
    by_depth: Dict[str, Dict[str, Any]] = {}
    for depth in sorted({child["depth"] for child in children}):
        at = [child for child in children if child["depth"] == depth]
        wins = sum(1 for child in at if child["reward"] == 1.0)
        by_depth[str(depth)] = {"agents": len(at), "successes": wins, "success_rate": _rate(wins, len(at))}
    agents_per_task: Dict[str, int] = {}
    for e in roots:
        key = str(1 + e["subagents"])
        agents_per_task[key] = agents_per_task.get(key, 0) + 1
    depths: Dict[str, int] = {}
    for e in roots:
        key = str(e["max_delegation_depth"])
        depths[key] = depths.get(key, 0) + 1
    both = [e for e in roots if e["reward"] == 1.0 and e["planner_reward"] == 1.0]
    n = len(roots)
    root_wins = sum(1 for e in roots if e["reward"] == 1.0)
    by_difficulty = {}
    for difficulty in records.DIFFICULTIES:
        group = [e for e in roots if e["difficulty"] == difficulty]
        if group:
            by_difficulty[difficulty] = {
                "episodes": len(group),
                "delegating": sum(1 for e in group if e["subagents"]),
                "mean_agents": round(sum(1 + e["subagents"] for e in group) / len(group), 4),
                "mean_root_steps": round(sum(e["steps"] for e in group) / len(group), 4),
                "mean_planner_steps": round(sum(e["planner_steps"] for e in group) / len(group), 4),
            }
    return {
        "root_success_rate": _rate(root_wins, n),
        "delegating_episodes": sum(1 for e in roots if e["subagents"]),
        "mean_agents_per_task": round(sum(1 + e["subagents"] for e in roots) / n, 4) if n else 0.0,
        "agents_per_task": dict(sorted(agents_per_task.items(), key=lambda kv: int(kv[0]))),
        "max_delegation_depth": dict(sorted(depths.items(), key=lambda kv: int(kv[0]))),
        "child_success_by_depth": by_depth,
        "mean_root_steps": round(sum(e["steps"] for e in roots) / n, 4) if n else 0.0,
        "mean_tree_steps": round(sum(e["tree_steps"] for e in roots) / n, 4) if n else 0.0,
        # Crafts of the whole tree over the gold trajectory's (the overall crafts_over_gold is the root's).
        "tree_crafts_over_gold": round(sum(e["tree_crafts"] for e in roots) / max(1, sum(e["gold_crafts"] for e in roots)), 4),
        "mean_planner_steps": round(sum(e["planner_steps"] for e in roots) / n, 4) if n else 0.0,
        # Over the episodes both solved: how many fewer turns the root took than the planner.
        "mean_root_steps_saved": round(sum(e["planner_steps"] - e["steps"] for e in both) / len(both), 4) if both else None,
        "by_difficulty": by_difficulty,
    }


def delegation_markdown(delegation: Mapping[str, Any]) -> str:
    """The delegation block of ``summary.md``."""
    lines = [
        "",
        "Delegation: %d of %d episodes launched subagents; %.2f agents per task; root %.1f turns vs planner %.1f (saved %s)."
        % (delegation["delegating_episodes"], sum(delegation["max_delegation_depth"].values()), delegation["mean_agents_per_task"],
           delegation["mean_root_steps"], delegation["mean_planner_steps"],
           "n/a" if delegation["mean_root_steps_saved"] is None else "%.1f" % delegation["mean_root_steps_saved"]),
        "",
        "| child depth | agents | success % |",
        "|---:|---:|---:|",
    ]
    for depth, stats in delegation["child_success_by_depth"].items():
        lines.append("| %s | %d | %.1f |" % (depth, stats["agents"], 100 * stats["success_rate"]))
    return "\n".join(lines) + "\n"
