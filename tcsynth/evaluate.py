"""The evaluation runner: play an agent on a split's tasks, record every episode, summarize, score.

``python -m textcraft_synth eval --agent NAME --split val --out DIR`` plays the episodes here and writes them to
``DIR`` as they finish (``protocol.json``, ``episodes.jsonl``, ``summary.json``, ``summary.md``; the files,
their streaming and ``--resume`` are :mod:`tcsynth.eval_dir`'s).  Each episode is one object (see
:func:`run_episode`); the summary is :func:`summarize`'s.

Episodes run one at a time, in ``workers`` processes (for CPU-bound agents), or up to ``concurrency`` at once
in threads of one process (for agents that wait on a server); the two do not combine.

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
order whatever the worker count or concurrency, and numbers are rounded before they are written.

The turn budget ``max_steps`` has one scheme everywhere (:mod:`tcsynth.env`, :class:`Protocol`, the command
line, ``summary.json``): a positive int, ``0`` (:data:`tcsynth.env.NO_LIMIT`) for no budget, or ``None``
(``null``) for each row's own ``max_steps``.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import random
import threading
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import agents, configs, game, records, recursive_env, store
from .agents import make_agent
from .env import TextCraftEnv, validate_max_steps
from .episode import play
from .errors import UserError
# The summary lives in tcsynth.scoring; its names stay importable from here.
from .scoring import (  # noqa: F401
    DIGITS,
    MILESTONES,
    WILSON_Z,
    budget_label,
    crafter_score,
    group_stats,
    milestone_rates,
    summarize,
    summary_markdown,
    usage_totals,
    wilson_interval,
)

PROTOCOL_FORMAT = "textcraft-eval-run/1"


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

    def protocol_options(self) -> Dict[str, Any]:
        """The recorded options that can change an episode (not timeouts, retries or a rate cap)."""
        declared = {option.name: option for option in getattr(agents.AGENTS.get(self.name), "OPTIONS", ())}
        return {key: value for key, value in self.public_options().items() if key not in declared or declared[key].protocol}


@dataclass(frozen=True)
class Protocol:
    """How episodes are run: the turn budget, rollouts and base seed.

    ``max_steps``: a positive int, :data:`tcsynth.env.NO_LIMIT` (0) for none, or ``None`` for each row's own.
    """

    max_steps: Optional[int] = None
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


# The last world's recipe trees by item, built as episodes ask for them (one slot: a run plays one world).
_TREES: List[Any] = [None, {}]


def _item_tree(world: game.World, item: str) -> frozenset:
    """``recipe_tree(world, [item])``, each subtree computed once per world and shared."""
    if _TREES[0] is not world:
        _TREES[:] = [world, {}]
    trees = _TREES[1]
    tree = trees.get(item)
    if tree is None:
        below = [_item_tree(world, name) for _, parts in world.recipes.get(item, ()) for name, _ in parts]
        tree = trees[item] = frozenset([item]).union(*below)
    return tree


def depth_reached(world: game.World, row: Mapping[str, Any], crafted: Iterable[str]) -> int:
    """The depth of the deepest item of the target's recipe tree that the agent crafted (0: none)."""
    trees = [_item_tree(world, entry["item"]) for entry in row["target_items"]]
    return max((world.depth(item) for item in crafted if any(item in tree for tree in trees)), default=0)


def run_episode(
    row: Mapping[str, Any], world: game.World, agent, protocol: Protocol, rollout: int = 0, record_turns: bool = True
) -> Dict[str, Any]:
    """Play one episode and return its record.

    The record: ``name``, ``difficulty``, ``rollout``, ``reward``, ``terminated``, ``truncated``, ``steps``
    (turns), ``tool_calls``, ``crafts`` (accepted), ``gold_crafts``, ``depth_reached``, ``target_depth``,
    ``problems`` (bad actions and agent notes), ``aborted`` (why the agent stopped, or null), ``verdict``
    (the engine's), ``usage`` (only for agents whose :meth:`~tcsynth.agents.Agent.usage` reports one:
    ``requests``, ``prompt_tokens``, ``completion_tokens``) and ``turns`` (each turn's ``action``, the
    ``observations`` it got, and ``notes``; left out when ``record_turns`` is false).  An action that is not
    plain JSON (NaN, an object from a custom agent) is kept as it is here; :func:`episode_line` writes its
    ``repr``.
    """
    seed = episode_seed(protocol.seed, row["name"], rollout)
    recursive = getattr(agent, "recursive", False)  # an agent that launches subagents (tcsynth.recursive_env)
    if recursive:
        env = recursive_env.tree_env(row, world, agent, protocol.max_steps, seed)
    else:
        env = TextCraftEnv(row, world, max_steps=protocol.max_steps)
    outcome = play(env, agent, random.Random(seed), row=row if agent.privileged else None, record_turns=record_turns)
    reward, terminated, truncated, aborted = outcome["reward"], outcome["terminated"], outcome["truncated"], outcome["aborted"]
    turns, notes_all = outcome["turns"], outcome["notes"]
    info = env.info()
    usage = agent.usage() if hasattr(agent, "usage") else None
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
        "gold_crafts": row["num_craft_steps"],  # the gold trajectory's length (checked when data/ is built)
        "depth_reached": depth_reached(world, row, info["crafted"]),
        "target_depth": row["max_depth"],
        "problems": info["problems"] + notes_all,
        "aborted": aborted,
        "verdict": info["verdict"],
        **({"usage": usage} if usage is not None else {}),
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
    """An episode record as its line of ``episodes.jsonl``: sorted keys, ASCII, no NaN.

    A turn's action that is not plain JSON is written as its ``repr`` (checked only when the whole record
    fails to serialize: the common case costs one ``json.dumps``).
    """
    try:
        return json.dumps(record, ensure_ascii=True, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        if "turns" not in record:
            raise
        turns = [dict(turn, action=_recordable(turn["action"])) for turn in record["turns"]]
        return json.dumps(dict(record, turns=turns), ensure_ascii=True, sort_keys=True, allow_nan=False)


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


Job = Tuple[int, int]  # (position of the row, rollout)


def run_episodes(
    rows: Sequence[Mapping[str, Any]],
    world_document: Mapping[str, Any],
    spec: AgentSpec,
    protocol: Protocol,
    workers: int = 1,
    progress: bool = True,
    record_turns: bool = True,
    *,
    concurrency: int = 1,
    finished: Optional[Mapping[Job, EpisodeRun]] = None,
    on_finish: Optional[Callable[[Job, EpisodeRun], EpisodeRun]] = None,
) -> List[EpisodeRun]:
    """Every (task, rollout) episode, in task order then rollout order, whatever ``workers`` or ``concurrency``.

    Args:
        workers (`int`): processes playing episodes (CPU-bound agents).
        concurrency (`int`): episodes in flight at once in threads of this process (agents that wait on a
            server); only with ``workers == 1``.
        finished (`dict`, *optional*): ``{(position, rollout): EpisodeRun}`` already played (a resumed run).
        on_finish (`callable`, *optional*): called in this thread with each episode as it finishes, in
            completion order; what it returns is kept in place of the run (e.g. the run without its line,
            once the line is on disk).
    """
    from tqdm import tqdm

    if workers > 1 and concurrency > 1:
        raise EvalError("--workers and --concurrency do not combine: --concurrency for agents that wait on a server, --workers for CPU-bound ones")
    spec.build()  # fail on bad options here, not in a worker
    jobs = [(position, rollout) for position in range(len(rows)) for rollout in range(protocol.rollouts)]
    results: Dict[Job, EpisodeRun] = dict(finished or {})
    todo = [job for job in jobs if job not in results]
    solved = sum(1 for run in results.values() if run.outcome["reward"] == 1.0)
    bar = tqdm(total=len(jobs), initial=len(results), desc="eval %s" % spec.name, unit="episode", disable=not progress, dynamic_ncols=True)

    def describe(finishing: int = 0) -> None:
        bar.set_postfix_str("solved %d/%d, requests in flight %d" % (solved, bar.n + finishing, agents.requests_in_flight()), refresh=False)

    def show() -> None:  # while waiting: the requests in flight change without an episode finishing
        describe()
        bar.refresh()

    def done(job: Job, run: EpisodeRun) -> None:
        nonlocal solved
        solved += run.outcome["reward"] == 1.0
        results[job] = on_finish(job, run) if on_finish is not None else run
        describe(1)
        bar.update(1)  # tqdm redraws at most every 0.1 s

    try:
        if workers > 1 and len(todo) > 1:
            chunk = max(1, min(16, len(todo) // (workers * 8)))
            # fork shares the rows and the world with the workers for free; spawn where fork does not exist.
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            with multiprocessing.get_context(method).Pool(workers, _init_worker, (rows, world_document, spec, protocol, record_turns)) as pool:
                for job, run in pool.imap_unordered(_run_tagged_job, todo, chunksize=chunk):
                    done(job, run)
        else:
            _init_worker(rows, world_document, spec, protocol, record_turns)
            try:
                if concurrency > 1 and len(todo) > 1:
                    _run_in_threads(todo, min(concurrency, len(todo)), done, show)
                else:
                    for job in todo:
                        done(job, _run_job(job))
            finally:
                _WORKER.clear()
    finally:
        bar.close()
    return [results[job] for job in jobs]


def _run_tagged_job(job: Job) -> Tuple[Job, EpisodeRun]:
    return job, _run_job(job)


def _run_in_threads(todo: Sequence[Job], threads: int, done: Callable[[Job, EpisodeRun], None], tick: Callable[[], None]) -> None:
    """Play ``todo`` in ``threads`` threads; ``done`` is called here, in the calling thread, as each finishes.

    The threads are daemons and stop taking jobs once one fails, so an error or Ctrl-C ends the run without
    waiting for every episode in flight.
    """
    waiting: "queue.SimpleQueue[Job]" = queue.SimpleQueue()
    for job in todo:
        waiting.put(job)
    finished: "queue.SimpleQueue[Tuple[Job, Optional[EpisodeRun], Optional[BaseException]]]" = queue.SimpleQueue()
    stop = threading.Event()

    def play() -> None:
        while not stop.is_set():
            try:
                job = waiting.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((job, _run_job(job), None))
            except BaseException as error:  # handed to the calling thread, which raises it
                finished.put((job, None, error))
                return

    for _ in range(threads):
        threading.Thread(target=play, name="eval-episode", daemon=True).start()
    try:
        for _ in range(len(todo)):
            while True:
                try:
                    job, run, error = finished.get(timeout=0.5)
                    break
                except queue.Empty:
                    tick()  # keep the requests-in-flight figure current
            if error is not None:
                raise error
            done(job, run)
    finally:
        stop.set()


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
    concurrency: int = 1  # episodes in flight at once, in threads (not with workers > 1)
    data_dir: Optional[Path] = None  # None: the checkout's data/, else the Hub dataset's
    record_turns: bool = True


class EvalError(UserError):
    """A request the runner cannot serve (unknown config or split, bad numbers)."""


def select_rows(data: store.Records, config: str, split: str, limit: Optional[int]) -> List[Dict[str, Any]]:
    """The task rows of a config's split, in order, the first ``limit`` of them."""
    spec = configs.task_config(config, split)
    rows = [row for row in data.tasks[split] if spec.keeps(row)]
    return rows[:limit] if limit is not None else rows


def check_request(request: EvalRequest) -> None:
    """Refuse bad numbers and an unknown config or split before anything runs."""
    if request.protocol.rollouts < 1 or request.workers < 1 or request.concurrency < 1 or (request.limit is not None and request.limit < 1):
        raise EvalError("rollouts, workers, concurrency and limit must be positive")
    if request.workers > 1 and request.concurrency > 1:
        raise EvalError("--workers and --concurrency do not combine: --concurrency for agents that wait on a server, --workers for CPU-bound ones")
    if request.protocol.max_steps is not None:
        try:
            validate_max_steps(request.protocol.max_steps)
        except ValueError as error:
            raise EvalError(str(error))
    configs.task_config(request.config, request.split)


def run_header(request: EvalRequest) -> Dict[str, Any]:
    """What the summary says about the run: agent, options, config, split, limit and the protocol."""
    return {
        "agent": request.spec.name,
        "options": request.spec.public_options(),
        "config": request.config,
        "split": request.split,
        "limit": request.limit,
        "max_steps": request.protocol.max_steps,
        "rollouts": request.protocol.rollouts,
        "seed": request.protocol.seed,
    }


def protocol_document(request: EvalRequest) -> Dict[str, Any]:
    """``protocol.json``: everything that decides what the run's episodes hold (a resume must match it)."""
    document = dict(run_header(request), format=PROTOCOL_FORMAT, options=request.spec.protocol_options())
    document["record_turns"] = request.record_turns
    return document


# What an episode reads of a task row for an agent that is not given the row: all but the gold trajectory,
# whose conversion to Python is most of the cost of reading a split (its length is ``num_craft_steps``).
EPISODE_COLUMNS = tuple(column for column in records.TASK_COLUMNS if column != "gold_trajectory")


def load_rows(request: EvalRequest) -> Tuple[List[Dict[str, Any]], Mapping[str, Any]]:
    """The request's task rows (only the columns an episode reads, unless the agent is given the row) and world."""
    data = store.load_records(store.resolve_data_dir(request.data_dir), splits=(request.split,))
    if not getattr(agents.AGENTS.get(request.spec.name), "privileged", True):
        data = dataclasses.replace(data, tasks={request.split: data.column_rows(request.split, EPISODE_COLUMNS)})
    rows = select_rows(data, request.config, request.split, request.limit)
    data.world  # a recipes.json that is not a world stops here, before any episode
    return rows, data.world_document


def evaluate(request: EvalRequest, progress: bool = True) -> Tuple[List[EpisodeRun], Dict[str, Any]]:
    """Run the request in memory; returns the episodes and the summary (see :func:`tcsynth.eval_dir.run_into` for files)."""
    check_request(request)
    rows, world_document = load_rows(request)
    runs = run_episodes(rows, world_document, request.spec, request.protocol, request.workers, progress, request.record_turns, concurrency=request.concurrency)
    return runs, summarize([run.outcome for run in runs], run_header(request))
