"""The evaluation runner: play an agent on a split's tasks, record every episode, summarize, score.

``python -m textcraft_synth eval --agent NAME --split val --out DIR`` writes three files to ``DIR``:

* ``episodes.jsonl``: one object per episode, in task order then rollout order (see :func:`run_episode`);
* ``summary.json``: success rates per difficulty with 95% Wilson intervals, mean turns and tool calls,
  crafts relative to gold, the depth milestones and the score (see :func:`summarize`);
* ``summary.md``: the same as a table.

The score (Crafter-style, log-weighted over depth milestones)
------------------------------------------------------------
Milestone ``d`` (``d = 1 .. 12``, the world's crafting depths) is reached in an episode when the agent
crafted an item of depth at least ``d`` that belongs to the target's recipe tree (the target and everything
below it).  Its rate ``p_d`` is taken over the episodes whose target is at least ``d`` deep (so every milestone
can be reached), and milestones no episode could reach are left out.  With ``p_d`` in percent,

    score = exp( mean_d ln(1 + p_d) ) - 1            (0 to 100)

which is Crafter's score (Hafner, 2021, arXiv:2109.06780) with depth milestones as achievements.  The
logarithm rewards progress on rarely reached milestones more than on common ones, so getting deep into
extreme tasks counts even when they are not finished: two agents that both fail them are told apart.

Same inputs, same bytes: episodes are seeded by (seed, task name, rollout), results are gathered in task
order whatever the worker count, and numbers are rounded before they are written.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import configs, game, records, recursive_env, store
from .agents import AgentError, make_agent
from .env import NO_LIMIT, TextCraftEnv
from .errors import UserError

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
SUMMARY_MD_FILE = "summary.md"
OUTPUT_FILES = (EPISODES_FILE, SUMMARY_FILE, SUMMARY_MD_FILE)
MILESTONES = tuple(range(1, records.MAX_DEPTH + 1))
WILSON_Z = 1.959963984540054  # the 97.5% quantile of the standard normal: a two-sided 95% interval
DIGITS = 4


@dataclass(frozen=True)
class AgentSpec:
    """An agent by name and options: what a worker process needs to build its own copy."""

    name: str
    options: Tuple[Tuple[str, Any], ...] = ()

    def build(self):
        return make_agent(self.name, **dict(self.options))

    def public_options(self) -> Dict[str, Any]:
        """The options worth recording (functions such as ``sleep`` are left out)."""
        return {key: value for key, value in self.options if isinstance(value, (str, int, float, bool, type(None)))}


@dataclass(frozen=True)
class Protocol:
    """How episodes are run: the turn budget (``None``: each row's ``max_steps``), rollouts and base seed."""

    max_steps: Optional[float] = None
    rollouts: int = 1
    seed: int = 0


# ------------------------------------------------------------------------------------------------ episodes


def episode_seed(seed: int, name: str, rollout: int) -> int:
    """The seed of one episode: the same for the same (seed, task, rollout), in any process."""
    return random.Random("%d:%s:%d" % (seed, name, rollout)).randrange(2**63)


def recipe_tree(world: game.World, targets: Iterable[str]) -> set:
    """The targets and every item below them through any of their recipes."""
    tree, stack = set(), list(targets)
    while stack:
        item = stack.pop()
        if item in tree:
            continue
        tree.add(item)
        for _, parts in world.recipes.get(item, ()):
            stack.extend(name for name, _ in parts)
    return tree


def depth_reached(world: game.World, row: Mapping[str, Any], crafted: Iterable[str]) -> int:
    """The depth of the deepest item of the target's recipe tree that the agent crafted (0: none)."""
    tree = recipe_tree(world, (entry["item"] for entry in row["target_items"]))
    return max((world.depth(item) for item in crafted if item in tree), default=0)


def run_episode(
    row: Mapping[str, Any], world: game.World, agent, protocol: Protocol, rollout: int = 0, record_turns: bool = True
) -> Dict[str, Any]:
    """Play one episode and return its record.

    The record: ``name``, ``difficulty``, ``rollout``, ``reward``, ``terminated``, ``truncated``, ``steps``
    (turns), ``tool_calls``, ``crafts`` (accepted), ``gold_crafts``, ``depth_reached``, ``target_depth``,
    ``problems`` (bad actions and agent notes), ``aborted`` (why the agent stopped, or null), ``verdict``
    (the engine's) and ``turns`` (each turn's ``action``, the ``observations`` it got, and ``notes``; left out
    when ``record_turns`` is false).
    """
    seed = episode_seed(protocol.seed, row["name"], rollout)
    recursive = getattr(agent, "recursive", False)  # an agent that launches subagents (tcsynth.recursive_env)
    if recursive:
        env = recursive_env.tree_env(row, world, agent, protocol.max_steps, seed)
    else:
        env = TextCraftEnv(row, world, max_steps=protocol.max_steps)
    observation, info = env.reset()
    agent.reset(observation, info, rng=random.Random(seed), row=row if agent.privileged else None)
    turns: List[Dict[str, Any]] = []
    notes_all: List[str] = []
    observations: List[Dict[str, Any]] = []
    reward, terminated, truncated, aborted = 0.0, False, False, None
    while not (terminated or truncated):
        try:
            turn = agent.act(observations)
        except AgentError as error:
            aborted = str(error)
            break
        observations, reward, terminated, truncated, info = env.step(turn.action)
        turns.append({"action": _recordable(turn.action), "observations": [m["content"] for m in observations], "notes": list(turn.notes)})
        notes_all.extend("turn %d: %s" % (len(turns), note) for note in turn.notes)
    info = env.info()
    record = {
        "name": row["name"],
        "difficulty": row["difficulty"],
        "rollout": rollout,
        "reward": reward,
        "terminated": terminated,
        "truncated": truncated,
        "steps": info["steps"],
        "tool_calls": info["tool_calls"],
        "crafts": info["crafts"],
        "gold_crafts": len(row["gold_trajectory"]),
        "depth_reached": depth_reached(world, row, info["crafted"]),
        "target_depth": row["max_depth"],
        "problems": info["problems"] + notes_all,
        "aborted": aborted,
        "verdict": info["verdict"],
        **({"turns": turns} if record_turns else {}),
    }
    if recursive:
        record.update(recursive_env.delegation_fields(env, row, world, agent, protocol.max_steps, seed))
    return record


def _recordable(action: Any) -> Any:
    """The action as plain JSON for the record; its ``repr`` when it is not (NaN, objects from a custom agent)."""
    try:
        json.dumps(action, allow_nan=False)
    except (TypeError, ValueError):
        return repr(action)
    return action


@dataclass(frozen=True)
class EpisodeRun:
    """One episode as the runner keeps it: the outcome the summary reads, and the whole record as JSON.

    Workers serialize the record themselves: a string crosses the process boundary far faster than the
    nested turns would, and the JSON work is spread over the workers.
    """

    outcome: Dict[str, Any]  # the record without its turns
    line: str  # the whole record, one JSON line (no newline)


def episode_line(record: Mapping[str, Any]) -> str:
    """An episode record as its line of ``episodes.jsonl``: sorted keys, ASCII, no NaN."""
    return json.dumps(record, ensure_ascii=True, sort_keys=True, allow_nan=False)


# One worker's state, set once per process by _init_worker.
_WORKER: Dict[str, Any] = {}


def _init_worker(rows: Sequence[Mapping[str, Any]], world_document: Mapping[str, Any], spec: AgentSpec, protocol: Protocol, record_turns: bool) -> None:
    _WORKER.update(rows=rows, world=game.World(world_document), spec=spec, protocol=protocol, record_turns=record_turns)


def _run_job(job: Tuple[int, int]) -> EpisodeRun:
    position, rollout = job
    worker = _WORKER
    record = run_episode(worker["rows"][position], worker["world"], worker["spec"].build(), worker["protocol"], rollout, worker["record_turns"])
    line = episode_line(record)
    record.pop("turns", None)
    return EpisodeRun(record, line)


def run_episodes(
    rows: Sequence[Mapping[str, Any]],
    world_document: Mapping[str, Any],
    spec: AgentSpec,
    protocol: Protocol,
    workers: int = 1,
    progress: bool = True,
    record_turns: bool = True,
) -> List[EpisodeRun]:
    """Every (task, rollout) episode, in task order then rollout order, whatever ``workers`` is."""
    from tqdm import tqdm

    spec.build()  # fail on bad options here, not in a worker
    jobs = [(position, rollout) for position in range(len(rows)) for rollout in range(protocol.rollouts)]
    bar = dict(total=len(jobs), desc="eval %s" % spec.name, unit="episode", disable=not progress, dynamic_ncols=True)
    if workers <= 1 or len(jobs) <= 1:
        _init_worker(rows, world_document, spec, protocol, record_turns)
        try:
            return [_run_job(job) for job in tqdm(jobs, **bar)]
        finally:
            _WORKER.clear()
    chunk = max(1, min(16, len(jobs) // (workers * 8)))
    # fork shares the rows and the world with the workers for free; spawn where fork does not exist.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(workers, _init_worker, (rows, world_document, spec, protocol, record_turns)) as pool:
        return list(tqdm(pool.imap(_run_job, jobs, chunksize=chunk), **bar))


# ------------------------------------------------------------------------------------------------- summary


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z) -> Tuple[float, float]:
    """The Wilson score interval of a binomial rate (Wilson, 1927); (0, 1) when there are no trials."""
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def crafter_score(rates: Iterable[float]) -> float:
    """Crafter's score of achievement rates in [0, 1]: exp(mean ln(1 + 100 p)) - 1, from 0 to 100."""
    rates = list(rates)
    if not rates:
        return 0.0
    return math.exp(sum(math.log1p(100.0 * rate) for rate in rates) / len(rates)) - 1.0


def _round(value: float) -> float:
    return round(value, DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0


def group_stats(episodes: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Success rate with its interval, means of turns and tool calls, crafts relative to gold."""
    n = len(episodes)
    wins = sum(1 for e in episodes if e["reward"] == 1.0)
    low, high = wilson_interval(wins, n)
    solved = [e for e in episodes if e["reward"] == 1.0]
    gold = sum(e["gold_crafts"] for e in episodes)
    return {
        "episodes": n,
        "successes": wins,
        "success_rate": _round(wins / n) if n else 0.0,
        "ci95": [_round(low), _round(high)],
        "truncated": sum(1 for e in episodes if e["truncated"]),
        "mean_steps": _round(sum(e["steps"] for e in episodes) / n) if n else 0.0,
        "mean_tool_calls": _round(sum(e["tool_calls"] for e in episodes) / n) if n else 0.0,
        # Accepted crafts over the gold trajectory's crafts: all episodes pooled, and the mean on solved ones.
        "crafts_over_gold": _round(sum(e["crafts"] for e in episodes) / gold) if gold else 0.0,
        "crafts_over_gold_solved": _round(sum(e["crafts"] / e["gold_crafts"] for e in solved) / len(solved)) if solved else None,
    }


def milestone_rates(episodes: Sequence[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """For each depth milestone some episode could reach: eligible episodes, how many reached it, the rate."""
    table = {}
    for depth in MILESTONES:
        eligible = [e for e in episodes if e["target_depth"] >= depth]
        if eligible:
            reached = sum(1 for e in eligible if e["depth_reached"] >= depth)
            table[str(depth)] = {"eligible": len(eligible), "reached": reached, "rate": _round(reached / len(eligible))}
    return table


def summarize(episodes: Sequence[Mapping[str, Any]], header: Mapping[str, Any]) -> Dict[str, Any]:
    """The summary of a run: ``header`` (agent, options, split, protocol) plus the statistics."""
    by_difficulty = {
        difficulty: group_stats([e for e in episodes if e["difficulty"] == difficulty])
        for difficulty in records.DIFFICULTIES
        if any(e["difficulty"] == difficulty for e in episodes)
    }
    milestones = milestone_rates(episodes)
    summary = dict(header)
    summary.update(
        tasks=len({e["name"] for e in episodes}),
        overall=group_stats(episodes),
        by_difficulty=by_difficulty,
        milestones=milestones,
        # The rates are rounded first, so the score follows from the file's own numbers.
        score=_round(crafter_score(m["rate"] for m in milestones.values())),
        aborted=sum(1 for e in episodes if e["aborted"]),
        # Why episodes stopped early, most common first (an unreachable server shows here, not as failures).
        abort_reasons=[[reason, count] for reason, count in _counted(e["aborted"] for e in episodes if e["aborted"])],
    )
    if any("subagents" in e for e in episodes):  # recursive agents: see tcsynth.recursive_env
        summary["delegation"] = recursive_env.delegation_summary(episodes)
    return summary


def _counted(values: Iterable[str]) -> List[Tuple[str, int]]:
    counts: Dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _percent(rate: Optional[float]) -> str:
    return "n/a" if rate is None else "%.1f" % (100 * rate)


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """The summary as Markdown: one row per difficulty and one for all."""
    lines = [
        "# eval: %s on %s/%s" % (summary["agent"], summary["config"], summary["split"]),
        "",
        "%d tasks x %d rollouts, turn budget %s, seed %d; score %.1f (depth milestones, Crafter-style)."
        % (summary["tasks"], summary["rollouts"], budget_label(summary["max_steps"]), summary["seed"], summary["score"]),
        "",
        "| difficulty | episodes | success % | 95% CI | truncated | mean turns | mean tool calls | crafts / gold |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups = list(summary["by_difficulty"].items()) + [("all", summary["overall"])]
    for label, stats in groups:
        low, high = stats["ci95"]
        lines.append(
            "| %s | %d | %s | %s-%s | %d | %.1f | %.1f | %.2f |"
            % (label, stats["episodes"], _percent(stats["success_rate"]), _percent(low), _percent(high), stats["truncated"],
               stats["mean_steps"], stats["mean_tool_calls"], stats["crafts_over_gold"])
        )
    lines += ["", "| depth milestone | " + " | ".join(summary["milestones"]) + " |", "|---|" + "---:|" * len(summary["milestones"])]
    lines.append("| reached % | " + " | ".join(_percent(m["rate"]) for m in summary["milestones"].values()) + " |")
    if summary.get("aborted"):
        lines += ["", "**%d of %d episodes aborted** (the agent could not go on; they count as failures):" % (summary["aborted"], summary["overall"]["episodes"]), ""]
        lines += ["- %d x %s" % (count, reason) for reason, count in summary.get("abort_reasons", [])]
    text = "\n".join(lines) + "\n"
    if summary.get("delegation"):
        text += recursive_env.delegation_markdown(summary["delegation"])
    return text


def budget_label(max_steps: Any) -> str:
    return {None: "row max_steps", "none": "none"}.get(max_steps, str(max_steps))


# -------------------------------------------------------------------------------------------------- running


@dataclass
class EvalRequest:
    """Everything one ``eval`` run needs."""

    spec: AgentSpec
    split: str = "val"
    config: str = configs.DEFAULT_CONFIG
    protocol: Protocol = field(default_factory=Protocol)
    limit: Optional[int] = None
    workers: int = 1
    data_dir: Optional[Path] = None  # None: the checkout's data/, else the Hub dataset's
    record_turns: bool = True


class EvalError(UserError):
    """A request the runner cannot serve (unknown config or split, bad numbers)."""


def select_rows(data: store.Records, config: str, split: str, limit: Optional[int]) -> List[Dict[str, Any]]:
    """The task rows of a config's split, in order, the first ``limit`` of them."""
    spec = configs.task_config(config, split)
    rows = [row for row in data.tasks[split] if spec.keeps(row)]
    return rows[:limit] if limit is not None else rows


def evaluate(request: EvalRequest, progress: bool = True) -> Tuple[List[EpisodeRun], Dict[str, Any]]:
    """Run the request; returns the episodes and the summary."""
    if request.protocol.rollouts < 1 or request.workers < 1 or (request.limit is not None and request.limit < 1):
        raise EvalError("rollouts, workers and limit must be positive")
    configs.task_config(request.config, request.split)
    data = store.load_records(store.resolve_data_dir(request.data_dir), splits=(request.split,))
    rows = select_rows(data, request.config, request.split, request.limit)
    data.world  # a recipes.json that is not a world stops here, before any episode
    runs = run_episodes(rows, data.world_document, request.spec, request.protocol, request.workers, progress, request.record_turns)
    max_steps = request.protocol.max_steps
    header = {
        "agent": request.spec.name,
        "options": request.spec.public_options(),
        "config": request.config,
        "split": request.split,
        "limit": request.limit,
        "max_steps": "none" if max_steps == NO_LIMIT else max_steps,
        "rollouts": request.protocol.rollouts,
        "seed": request.protocol.seed,
    }
    return runs, summarize([run.outcome for run in runs], header)


def result_files(runs: Sequence[EpisodeRun], summary: Mapping[str, Any]) -> Dict[str, bytes]:
    """The bytes of the three output files."""
    return {
        EPISODES_FILE: "".join(run.line + "\n" for run in runs).encode("ascii"),
        SUMMARY_FILE: (json.dumps(summary, ensure_ascii=True, sort_keys=True, indent=1, allow_nan=False) + "\n").encode("ascii"),
        SUMMARY_MD_FILE: summary_markdown(summary).encode("utf-8"),
    }


def check_output_dir(out: Path, force: bool = False) -> None:
    """Refuse an output path that is a file, holds anything but eval output, or holds a run (unless ``force``)."""
    out = Path(out)
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise EvalError("%s exists and is not a directory" % out)
        present = sorted(p.name for p in out.iterdir())
        foreign = [name for name in present if name not in OUTPUT_FILES]
        if foreign:
            raise EvalError("%s holds files that are not eval output (%s); choose another --out" % (out, ", ".join(foreign[:3])))
        if present and not force:
            raise EvalError("%s already holds an eval run; choose another --out, or pass --force to replace it" % out)
    elif out.parent.exists() and not out.parent.is_dir():
        raise EvalError("%s cannot be made: %s is not a directory" % (out, out.parent))


def write_results(out: Path, files: Mapping[str, bytes], force: bool = False) -> None:
    """Write the output directory whole, or not at all (see :func:`check_output_dir`)."""
    check_output_dir(out, force)
    store.replace_directory(Path(out), files)
