"""Reward functions for TRL's ``GRPOTrainer``: replay a completion's tool calls in the engine.

A completion is scored against its own row's task: the tool calls it makes are read (an assistant message's
``tool_calls``, or the calls written in its text in any chat-template family's format, see
:mod:`tcsynth.toolcalls`) and replayed with :func:`tcsynth.game.replay` on a fresh episode of that task.
The reward is 1.0 only when the replay ends with ``finish`` and every target crafted; there is no partial
credit.  Given a tokenizer with a ``response_template`` (``get_textcraft_reward(tokenizer=...)``), text is
read with transformers' own ``tokenizer.parse_response``.

>>> from datasets import load_dataset
>>> from trl import GRPOConfig, GRPOTrainer
>>> from tcsynth.prompts import SYSTEM_PROMPT, user_prompt
>>> from tcsynth.rewards import textcraft_reward
>>> tasks = load_dataset("apurvaga/textcraft-synth", "easy", split="train")
>>> tasks = tasks.map(lambda row: {"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
...                                           {"role": "user", "content": user_prompt(row["goal"])}]})
>>> trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=textcraft_reward,
...                       args=GRPOConfig(output_dir="grpo-textcraft"), train_dataset=tasks)

``scripts/grpo_cpu_example.py`` runs the same pipeline on a CPU, offline, with a tiny model made on the spot.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import game, records, recursive, store
from .toolcalls import message_tool_calls, text_tool_calls

Counts = Union[Mapping[str, int], Sequence[Mapping[str, Any]]]


def completion_tool_calls(completion: Any, tokenizer: Any = None) -> List[Any]:
    """Every tool call of one completion, in order.

    A conversational completion is a list of messages: each assistant message contributes its
    ``tool_calls`` (or, lacking them, the calls written in its content); other roles (tool results the
    trainer may have interleaved) are ignored, since the replay recomputes them.  A plain-text completion
    contributes the calls written in it, in any family's format (:func:`tcsynth.toolcalls.text_tool_calls`,
    with ``tokenizer``'s response parsing when it has one).  Anything else has no calls.
    """

    def read(text: str) -> List[Any]:
        return text_tool_calls(text, tokenizer)

    if isinstance(completion, str):
        return read(completion)
    if isinstance(completion, Mapping):
        completion = [completion]
    calls: List[Any] = []
    if isinstance(completion, (list, tuple)):
        for message in completion:
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                calls.extend(message_tool_calls(message, read))
    return calls


def _counts(value: Counts) -> Dict[str, int]:
    """A task column as ``{item: count}``: the rows' ``[{"item", "count"}]`` lists, or a mapping already."""
    if isinstance(value, Mapping):
        return dict(value)
    return records.list_to_counts(value)


class _TextCraftReward:
    """The callable behind :func:`get_textcraft_reward`.

    A class with a fixed ``__name__`` so that the reward pickles (TRL may send it to worker processes) and
    logs under a stable key.  The world is read on first use, once per process.
    """

    __name__ = "textcraft_reward"

    def __init__(self, recipes_path: Optional[Path], tokenizer: Any = None) -> None:
        self.recipes_path = recipes_path
        self.tokenizer = tokenizer
        self._world: Optional[game.World] = None
        self._lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        return {"recipes_path": self.recipes_path, "tokenizer": self.tokenizer}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["recipes_path"], state.get("tokenizer"))

    @property
    def world(self) -> game.World:
        with self._lock:
            if self._world is None:
                self._world = game.World.from_file(self.recipes_path or store.PACKAGED_WORLD)
            return self._world

    def score(self, completion: Any, target_items: Any, initial_inventory: Any) -> Optional[float]:
        """One completion's reward; ``None`` when the row carries no task to check it against."""
        if target_items is None or initial_inventory is None:
            return None
        world = self.world  # outside the guard: a world that cannot be read is a setup error, not a bad completion
        try:
            task = {"target_items": _counts(target_items), "initial_inventory": _counts(initial_inventory)}
            return game.replay(world, task, completion_tool_calls(completion, self.tokenizer)).reward
        except Exception:  # noqa: BLE001 - a completion, however strange, scores 0.0 and never stops training
            return 0.0

    def __call__(
        self,
        completions: List[Any],
        target_items: Optional[List[Any]] = None,
        initial_inventory: Optional[List[Any]] = None,
        **kwargs: Any,
    ) -> List[Optional[float]]:
        # TRL passes every dataset column as a keyword argument (plus prompts, completion_ids, trainer_state);
        # only the two task columns are read, **kwargs takes the rest.
        count = len(completions)
        if target_items is None or initial_inventory is None:
            return [None] * count
        if len(target_items) != count or len(initial_inventory) != count:
            raise ValueError(
                "got %d completions but %d target_items and %d initial_inventory values"
                % (count, len(target_items), len(initial_inventory))
            )
        return [
            self.score(completion, targets, inventory)
            for completion, targets, inventory in zip(completions, target_items, initial_inventory, strict=True)
        ]


def _checked_recipes_path(recipes_path: Optional[Union[str, Path]]) -> Optional[Path]:
    """``recipes_path`` as a Path (None: the packaged world); ``ValueError`` when it names no file."""
    if recipes_path is None:
        return None
    recipes_path = Path(recipes_path)
    if not recipes_path.is_file():
        raise ValueError("recipes_path %s is not a file" % recipes_path)
    return recipes_path


def get_textcraft_reward(recipes_path: Optional[Union[str, Path]] = None, tokenizer: Any = None) -> Callable[..., List[Optional[float]]]:
    """A TextCraft reward function over the world in ``recipes_path``.

    Args:
        recipes_path (`str` or `Path`, *optional*): the world's ``recipes.json``; defaults to the world the
            package carries (textcraft-synth@1, the same bytes as ``data/recipes.json``).
        tokenizer (`PreTrainedTokenizerBase`, *optional*): the policy's tokenizer.  When it carries a
            ``response_template`` (TRL's ``add_response_schema`` sets one for known templates), completion
            text is read with its ``parse_response``; otherwise with :func:`tcsynth.toolcalls.builtin_tool_calls`,
            which reads every family's format.

    Returns:
        `Callable[..., list[float | None]]`: a reward with TRL's signature, ``(completions, target_items,
        initial_inventory, **kwargs)``.  Each completion gets 1.0 when its tool calls, replayed on its own
        row's task, end with ``finish`` and every target crafted, 0.0 otherwise (no calls, calls that do not
        parse, unknown tools, calls after ``finish``, a target short).  ``None`` marks a row with no task
        (``target_items`` or ``initial_inventory`` missing or null): TRL then leaves the reward out, as it
        does for other rewards that do not apply.

    Example:

    >>> reward = get_textcraft_reward()
    >>> reward(
    ...     ['<tool_call>{"name": "finish", "arguments": {"message": "done"}}</tool_call>'],
    ...     target_items=[[{"item": "t7_i3", "count": 3}]],
    ...     initial_inventory=[[{"item": "raw_t1", "count": 14}]],
    ... )
    [0.0]
    """
    recipes_path = _checked_recipes_path(recipes_path)
    if tokenizer is not None and not callable(getattr(tokenizer, "parse_response", None)):
        raise ValueError("tokenizer must be a transformers tokenizer (with parse_response), got %s" % type(tokenizer).__name__)
    return _TextCraftReward(recipes_path, tokenizer)


# The reward over the world shipped in data/: pass it to GRPOTrainer(reward_funcs=textcraft_reward).
textcraft_reward = get_textcraft_reward()


# ------------------------------------------------------------------------------------- recursive agents


def completion_turns(completion: Any) -> List[List[Any]]:
    """A completion's tool calls grouped by turn: one turn per assistant message (plain text: one turn)."""
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, (list, tuple)):
        return [completion_tool_calls(message) for message in completion
                if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant"]
    calls = completion_tool_calls(completion)
    return [calls] if calls else []


class _TextCraftRecursiveReward(_TextCraftReward):
    """The callable behind :func:`get_textcraft_recursive_reward` (a fixed ``__name__``, as its parent)."""

    __name__ = "textcraft_recursive_reward"

    def __init__(self, recipes_path: Optional[Path], max_delegation_depth: int = recursive.DEFAULT_MAX_DEPTH) -> None:
        super().__init__(recipes_path)
        self.max_delegation_depth = max_delegation_depth
        self._subagent: Optional[recursive.IdealSubagent] = None

    def __getstate__(self) -> Dict[str, Any]:
        return {"recipes_path": self.recipes_path, "max_delegation_depth": self.max_delegation_depth}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["recipes_path"], state["max_delegation_depth"])

    def score_agent(self, completion: Any, targets: Any, initial_inventory: Any, depth: Any = 0, num_steps: Any = None) -> Optional[float]:
        """One agent's reward against its own targets and starting inventory (its snapshot)."""
        if targets is None or initial_inventory is None:
            return None
        world = self.world
        with self._lock:
            if self._subagent is None:
                self._subagent = recursive.IdealSubagent(world)
        try:
            task = {"target_items": _counts(targets), "initial_inventory": _counts(initial_inventory)}
            # An agent at depth d may nest max_delegation_depth - d further levels.
            tree = recursive.Tree(world, task, max(0, self.max_delegation_depth - (depth or 0)))
            max_turns = num_steps if type(num_steps) is int and num_steps > 0 else None
            return recursive.replay_agent(tree.root, completion_turns(completion), self._subagent, max_turns).reward
        except Exception:  # noqa: BLE001 - as textcraft_reward: a strange completion scores 0.0
            return 0.0

    def __call__(
        self,
        completions: List[Any],
        targets: Optional[List[Any]] = None,
        initial_inventory: Optional[List[Any]] = None,
        target_items: Optional[List[Any]] = None,
        depth: Optional[List[Any]] = None,
        num_steps: Optional[List[Any]] = None,
        **kwargs: Any,
    ) -> List[Optional[float]]:
        # sft-recursive rows carry `targets` (the agent's own); task rows carry `target_items`.
        targets = targets if targets is not None else target_items
        count = len(completions)
        if targets is None or initial_inventory is None:
            return [None] * count
        depth = depth if depth is not None else [0] * count
        num_steps = num_steps if num_steps is not None else [None] * count
        for name, column in (("targets", targets), ("initial_inventory", initial_inventory), ("depth", depth), ("num_steps", num_steps)):
            if len(column) != count:
                raise ValueError("got %d completions but %d %s values" % (count, len(column), name))
        return [
            self.score_agent(completion, own, snapshot, level, budget)
            for completion, own, snapshot, level, budget in zip(completions, targets, initial_inventory, depth, num_steps, strict=True)
        ]


def get_textcraft_recursive_reward(
    recipes_path: Optional[Union[str, Path]] = None, max_delegation_depth: int = recursive.DEFAULT_MAX_DEPTH
) -> Callable[..., List[Optional[float]]]:
    """A reward for agents that delegate (config ``sft-recursive``, :mod:`tcsynth.recursive`).

    Each completion is one agent's: it is replayed on a fresh game whose starting inventory is the row's
    ``initial_inventory`` (for a subagent, the snapshot taken at its launch) and graded on the row's own
    ``targets`` (or ``target_items`` for task rows): 1.0 when it finishes with a message having gained every
    target on top of that snapshot, else 0.0.  Its ``launch_subagent`` calls are played by
    :class:`tcsynth.recursive.IdealSubagent` (children that craft exactly what they are asked), so every
    agent of a tree is graded on its own part; a launch past the delegation cap (``max_delegation_depth``
    minus the row's ``depth``) is refused as in the environment.  With a ``num_steps`` column, more
    assistant turns than that scores 0.0.

    Args:
        recipes_path (`str` or `Path`, *optional*): the world's ``recipes.json`` (default: the packaged one).
        max_delegation_depth (`int`, defaults to 2): the cap the rows were made with.

    Returns:
        `Callable[..., list[float | None]]`: ``(completions, targets, initial_inventory, depth, num_steps,
        **kwargs)``; ``None`` for a row with no targets or inventory.

    Example:

    >>> reward = get_textcraft_recursive_reward()
    >>> reward(
    ...     ['<tool_call>{"name": "finish", "arguments": {"message": "done"}}</tool_call>'],
    ...     targets=[[{"item": "t7_i3", "count": 3}]],
    ...     initial_inventory=[[{"item": "raw_t1", "count": 14}]],
    ... )
    [0.0]
    """
    if type(max_delegation_depth) is not int or max_delegation_depth < 0:
        raise ValueError("max_delegation_depth must be a non-negative integer, got %r" % (max_delegation_depth,))
    recipes_path = _checked_recipes_path(recipes_path)
    return _TextCraftRecursiveReward(recipes_path, max_delegation_depth)


# Grades one agent of a tree on its own targets and snapshot: GRPOTrainer(reward_funcs=textcraft_recursive_reward).
textcraft_recursive_reward = get_textcraft_recursive_reward()
