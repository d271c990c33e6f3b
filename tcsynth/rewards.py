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

from . import game, records, store
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
    if recipes_path is not None:
        recipes_path = Path(recipes_path)
        if not recipes_path.is_file():
            raise ValueError("recipes_path %s is not a file" % recipes_path)
    if tokenizer is not None and not callable(getattr(tokenizer, "parse_response", None)):
        raise ValueError("tokenizer must be a transformers tokenizer (with parse_response), got %s" % type(tokenizer).__name__)
    return _TextCraftReward(recipes_path, tokenizer)


# The reward over the world shipped in data/: pass it to GRPOTrainer(reward_funcs=textcraft_reward).
textcraft_reward = get_textcraft_reward()
