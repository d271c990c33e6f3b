"""The records: the task row schema, and the lossless conversion between rows and the source task lines.

Every product reads tasks through this module.  A *source line* is one line of
``textcraft_synth_{split}.jsonl`` as ``platoon-textcraft`` 0.3.0 ships it; a *row* is what the ``tasks``
config of the dataset holds.  :func:`row_from_source` and :func:`source_from_row` are inverses, and
:func:`source_line` serializes a source task exactly as the source files do, so the shipped Parquet files
reproduce the source byte for byte (pinned by :data:`SOURCE_SHA256`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from . import game
from .errors import UserError

SPLITS = ("train", "val")
DIFFICULTIES = ("easy", "medium", "hard", "extreme")
# Crafting depths of each difficulty, inclusive.
DEPTH_RANGES = {"easy": (2, 3), "medium": (4, 6), "hard": (7, 9), "extreme": (10, 12)}
MAX_DEPTH = max(high for _, high in DEPTH_RANGES.values())
SOURCE_FILES = {"train": "textcraft_synth_train.jsonl", "val": "textcraft_synth_val.jsonl"}
RECIPES_FILE = game.RECIPES_FILE
LICENSE_FILE = "LICENSE.platoon"
# The config whose Parquet files hold the task records (every other config is derived from them).
TASKS_CONFIG = "tasks"
SOURCE_SHA256 = {
    "textcraft_synth_train.jsonl": "685823fbca90aa89e061e61fef58d0122def4221eed14cf2c8c730341363a00f",
    "textcraft_synth_val.jsonl": "84a123ee46e29e65f4d7b95f4943aa56907fc3fd5992268faa749602579dfc0c",
    "recipes.json": "a020eec273337c66b35c0fc487664e35c44da65ad18e9afffe6a4c25af949f10",
}
TASK_COUNTS = {"train": 2522, "val": 632}
# The world's name: it prefixes every task name and names the environment (``textcraft-synth@1``).
TASK_NAME_PREFIX = "textcraft-synth"
GOAL_PREFIX = "Craft the following items: "

# The column order of a task row (a public contract: keep these names).
TASK_COLUMNS = (
    "name",
    "split",
    "index",
    "difficulty",
    "max_depth",
    "num_craft_steps",
    "max_steps",
    "goal",
    "source_task_id",
    "env_task_id",
    "env_split_task_id",
    "target_items",
    "initial_inventory",
    "gold_trajectory",
)

Row = Dict[str, Any]


class SourceError(UserError):
    """A source task line that does not have the ``textcraft-synth@1`` shape."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def task_suffix(split: str, difficulty: str, index: int) -> str:
    """A task's name after its world's prefix, e.g. ``train-medium-00000``."""
    return "%s-%s-%05d" % (split, difficulty, index)


def task_name(split: str, difficulty: str, index: int, world: str = TASK_NAME_PREFIX) -> str:
    """The task name, e.g. ``textcraft-synth-train-medium-00000`` (the Harbor task directory's name)."""
    return "%s-%s" % (world, task_suffix(split, difficulty, index))


def environment_id(world: str = TASK_NAME_PREFIX) -> str:
    """The environment a world's tasks belong to, e.g. ``textcraft-synth@1``."""
    return world + "@1"


# ------------------------------------------------------------------------------------- goals and finishing


def targets_text(targets: Mapping[str, int]) -> str:
    """``3x a1_i5, 2x b0_i3``: the targets in task order."""
    return ", ".join("%dx %s" % (count, item) for item, count in targets.items())


def goal_text(targets: Mapping[str, int]) -> str:
    """The goal of a task with these targets, as the records write it: ``Craft the following items: 3x a1_i5``."""
    return GOAL_PREFIX + targets_text(targets)


_GOAL_ENTRY = re.compile(r"([1-9][0-9]*)x (\S+)\Z")


def parse_goal(goal: str) -> Dict[str, int]:
    """The targets ``{item: count}`` a goal names; the inverse of :func:`goal_text`.

    Raises :class:`UserError` for text that is not a goal (agents read goals from prompts they are given).
    """
    if not goal.startswith(GOAL_PREFIX):
        raise UserError("not a goal (it should start with %r): %r" % (GOAL_PREFIX, goal[:80]))
    targets: Dict[str, int] = {}
    for part in goal[len(GOAL_PREFIX):].split(", "):
        match = _GOAL_ENTRY.match(part)
        if match is None or match.group(2) in targets:
            raise UserError("not a goal entry (COUNTx ITEM, each item once): %r" % part)
        targets[match.group(2)] = int(match.group(1))
    return targets


def finish_message(targets: Mapping[str, int]) -> str:
    """What an expert says to ``finish`` (the gold solutions, SFT, the oracle): ``Crafted 3x a1_i5.``"""
    return "Crafted %s." % targets_text(targets)


def counts_to_list(counts: Mapping[str, int]) -> List[Dict[str, Any]]:
    """``{item: count}`` as ``[{"item", "count"}]``, keeping the order (it is the inventory's order)."""
    return [{"item": item, "count": count} for item, count in counts.items()]


def list_to_counts(entries: Iterable[Mapping[str, Any]]) -> Dict[str, int]:
    return {entry["item"]: entry["count"] for entry in entries}


def _expect(condition: bool, where: str, what: str) -> None:
    if not condition:
        raise SourceError("%s: %s" % (where, what))


def check_source_task(task: Any, where: str) -> None:
    """Raise :class:`SourceError` unless ``task`` has exactly the source line's keys, in order, and types."""
    _expect(isinstance(task, dict), where, "a task line must be a JSON object")
    _expect(list(task) == ["goal", "id", "max_steps", "misc"], where, "keys must be goal, id, max_steps, misc")
    misc = task["misc"]
    _expect(isinstance(misc, dict), where, "misc must be an object")
    expected = ["target_items", "initial_inventory", "gold_trajectory", "difficulty", "max_depth", "num_craft_steps"]
    _expect(list(misc) == expected, where, "misc keys must be " + ", ".join(expected))
    _expect(isinstance(task["goal"], str) and isinstance(task["id"], str), where, "goal and id must be strings")
    _expect(misc["difficulty"] in DIFFICULTIES, where, "unknown difficulty %r" % (misc["difficulty"],))
    for key in ("max_steps",):
        _expect(type(task[key]) is int, where, "%s must be an integer" % key)
    for key in ("max_depth", "num_craft_steps"):
        _expect(type(misc[key]) is int, where, "%s must be an integer" % key)
    for key in ("target_items", "initial_inventory"):
        _expect(_is_counts(misc[key]), where, "%s must map item names to integers" % key)
    _expect(isinstance(misc["gold_trajectory"], list), where, "gold_trajectory must be a list")
    _expect(misc["num_craft_steps"] == len(misc["gold_trajectory"]), where, "num_craft_steps must be the number of gold steps")
    for number, step in enumerate(misc["gold_trajectory"]):
        here = "%s: gold step %d" % (where, number)
        _expect(isinstance(step, dict), here, "must be an object")
        _expect(list(step) == ["action", "target", "ingredients", "result_count"], here, "unexpected keys")
        _expect(step["action"] == "craft", here, "action must be craft")
        target = step["target"]
        _expect(
            isinstance(target, list) and len(target) == 2 and isinstance(target[0], str) and type(target[1]) is int,
            here,
            "target must be [item, crafts]",
        )
        _expect(_is_counts(step["ingredients"]), here, "ingredients must map item names to integers")
        _expect(type(step["result_count"]) is int, here, "result_count must be an integer")


def _is_counts(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and type(v) is int for k, v in value.items())


def difficulty_counts(rows: Iterable[Mapping[str, Any]]) -> Dict[str, int]:
    """How many rows of each difficulty, in difficulty order (zeros included)."""
    counts = {name: 0 for name in DIFFICULTIES}
    for row in rows:
        counts[row["difficulty"]] += 1
    return counts


def difficulty_counts_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """``588 easy, 852 medium, 544 hard, 538 extreme``."""
    return ", ".join("{:,} {}".format(count, name) for name, count in difficulty_counts(rows).items())


def depth_ranges_text() -> str:
    """``easy 2-3, medium 4-6, hard 7-9, extreme 10-12``."""
    return ", ".join("%s %d-%d" % (name, *DEPTH_RANGES[name]) for name in DIFFICULTIES)


def split_positions(tasks: Iterable[Mapping[str, Any]]) -> List[int]:
    """For each task of a split, its index among that split's tasks of the same difficulty."""
    seen: Dict[str, int] = {}
    positions = []
    for task in tasks:
        difficulty = task["misc"]["difficulty"]
        positions.append(seen.get(difficulty, 0))
        seen[difficulty] = positions[-1] + 1
    return positions


def row_from_source(task: Mapping[str, Any], split: str, index: int, split_position: int, world: str = TASK_NAME_PREFIX) -> Row:
    """The row of source task ``index`` of ``split``; ``split_position`` is its index within its difficulty."""
    misc = task["misc"]
    difficulty = misc["difficulty"]
    return {
        "name": task_name(split, difficulty, index, world),
        "split": split,
        "index": index,
        "difficulty": difficulty,
        "max_depth": misc["max_depth"],
        "num_craft_steps": misc["num_craft_steps"],
        "max_steps": task["max_steps"],
        "goal": task["goal"],
        "source_task_id": task["id"],
        "env_task_id": "%s:%d" % (split, index),
        "env_split_task_id": "%s-%s:%d" % (split, difficulty, split_position),
        "target_items": counts_to_list(misc["target_items"]),
        "initial_inventory": counts_to_list(misc["initial_inventory"]),
        "gold_trajectory": [
            {
                "item": step["target"][0],
                "crafts": step["target"][1],
                "count": step["result_count"],
                "ingredients": counts_to_list(step["ingredients"]),
            }
            for step in misc["gold_trajectory"]
        ],
    }


def rows_from_source_lines(split: str, tasks: List[Mapping[str, Any]], world: str = TASK_NAME_PREFIX) -> List[Row]:
    """Every row of a split, in source order; ``world`` (the world's name) prefixes the task names."""
    positions = split_positions(tasks)
    return [row_from_source(task, split, index, positions[index], world) for index, task in enumerate(tasks)]


def source_from_row(row: Mapping[str, Any]) -> Dict[str, Any]:
    """The source task dict a row came from (keys in source order), the inverse of :func:`row_from_source`."""
    return {
        "goal": row["goal"],
        "id": row["source_task_id"],
        "max_steps": row["max_steps"],
        "misc": {
            "target_items": list_to_counts(row["target_items"]),
            "initial_inventory": list_to_counts(row["initial_inventory"]),
            "gold_trajectory": [
                {
                    "action": "craft",
                    "target": [step["item"], step["crafts"]],
                    "ingredients": list_to_counts(step["ingredients"]),
                    "result_count": step["count"],
                }
                for step in row["gold_trajectory"]
            ],
            "difficulty": row["difficulty"],
            "max_depth": row["max_depth"],
            "num_craft_steps": row["num_craft_steps"],
        },
    }


def source_line(task: Mapping[str, Any]) -> bytes:
    """One line of a source file: Python's default ``json.dumps`` plus a newline."""
    return (json.dumps(task) + "\n").encode("utf-8")


def source_file_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """A whole source file rebuilt from a split's rows, in their order."""
    return b"".join(source_line(source_from_row(row)) for row in rows)


def parse_source_file(data: bytes, filename: str) -> List[Dict[str, Any]]:
    """The tasks of a source file, each checked; errors name the file and line (1-based)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SourceError("%s: not UTF-8 (%s)" % (filename, error))
    _expect(text.endswith("\n"), filename, "the last line does not end with a newline (truncated?)")
    tasks = []
    for number, line in enumerate(text.split("\n")[:-1], 1):
        where = "%s line %d" % (filename, number)
        try:
            task = json.loads(line)
        except ValueError as error:
            raise SourceError("%s: not valid JSON (%s)" % (where, error))
        check_source_task(task, where)
        tasks.append(task)
    return tasks


def engine_task(row: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``target_items``/``initial_inventory`` mapping the engine's :class:`Game` is built from."""
    return {
        "goal": row["goal"],
        "target_items": list_to_counts(row["target_items"]),
        "initial_inventory": list_to_counts(row["initial_inventory"]),
    }


def gold_steps(row: Mapping[str, Any]) -> Iterator[Tuple[str, int, Dict[str, int]]]:
    """``(item, total, ingredients)`` per gold craft: the craft tool takes the total made, not the crafts."""
    for step in row["gold_trajectory"]:
        yield step["item"], step["count"], list_to_counts(step["ingredients"])


def gold_tool_calls(row: Mapping[str, Any], message: Optional[str] = None) -> List[Dict[str, Any]]:
    """The gold trajectory as engine tool calls, then ``finish`` (by default with :func:`finish_message`)."""
    calls: List[Dict[str, Any]] = [
        {"name": "craft", "arguments": {"ingredients": ingredients, "target": [item, total]}}
        for item, total, ingredients in gold_steps(row)
    ]
    calls.append({"name": "finish", "arguments": {"message": finish_message(list_to_counts(row["target_items"])) if message is None else message}})
    return calls
