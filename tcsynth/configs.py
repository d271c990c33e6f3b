"""The dataset's configs, as data: name, description, splits, features, and how rows come from the records.

The build writes one Parquet file per config and split from these; the ``datasets`` builder in
``textcraft_synth.py`` generates the same rows from the same functions; README.md's ``configs:`` header
lists the same files (a test holds the three together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import datasets

from . import records, sft
from .store import Records

COUNTS = datasets.List({"item": datasets.Value("string"), "count": datasets.Value("int64")})

TASK_FEATURES = datasets.Features(
    {
        "name": datasets.Value("string"),
        "split": datasets.Value("string"),
        "index": datasets.Value("int64"),
        "difficulty": datasets.Value("string"),
        "max_depth": datasets.Value("int64"),
        "num_craft_steps": datasets.Value("int64"),
        "max_steps": datasets.Value("int64"),
        "goal": datasets.Value("string"),
        "source_task_id": datasets.Value("string"),
        "env_task_id": datasets.Value("string"),
        "env_split_task_id": datasets.Value("string"),
        "target_items": COUNTS,
        "initial_inventory": COUNTS,
        "gold_trajectory": datasets.List(
            {
                "item": datasets.Value("string"),
                "crafts": datasets.Value("int64"),
                "count": datasets.Value("int64"),
                "ingredients": COUNTS,
            }
        ),
    }
)
assert tuple(TASK_FEATURES) == records.TASK_COLUMNS

RECIPE_FEATURES = datasets.Features(
    {
        "item": datasets.Value("string"),
        "depth": datasets.Value("int64"),
        "is_base": datasets.Value("bool"),
        "result_count": datasets.Value("int64"),
        "ingredients": COUNTS,
    }
)

# A conversation per task (see tcsynth.sft).  Messages and tools are JSON values, not Arrow structs: structs
# would merge keys across messages (adding nulls), and tool-call arguments must reach chat templates as dicts.
SFT_FEATURES = datasets.Features(
    {
        "name": datasets.Value("string"),
        "split": datasets.Value("string"),
        "difficulty": datasets.Value("string"),
        "max_depth": datasets.Value("int64"),
        "num_craft_steps": datasets.Value("int64"),
        "messages": datasets.List(datasets.Json()),
        "tools": datasets.Json(),
        "num_turns": datasets.Value("int64"),
        "num_tool_calls": datasets.Value("int64"),
        "num_characters": datasets.Value("int64"),
    }
)
assert tuple(SFT_FEATURES) == sft.SFT_COLUMNS

RowsFn = Callable[[Records, str], List[Dict[str, Any]]]


@dataclass(frozen=True)
class ConfigSpec:
    """One config of the dataset.

    Args:
        name (`str`): the config name users pass to ``load_dataset``.
        description (`str`): one sentence for the dataset card and the builder.
        splits (`tuple[str, ...]`): its split names, in order.
        features (`datasets.Features`): the row schema.
        rows (`Callable[[Records, str], list[dict]]`): the rows of one split, from the records.
        holds_tasks (`bool`, defaults to `True`): whether its rows are task rows (with a gold trajectory).
    """

    name: str
    description: str
    splits: Tuple[str, ...]
    features: datasets.Features
    rows: RowsFn
    holds_tasks: bool = True


def task_rows(store: Records, split: str) -> List[Dict[str, Any]]:
    return store.tasks[split]


def difficulty_rows(difficulty: str) -> RowsFn:
    def rows(store: Records, split: str) -> List[Dict[str, Any]]:
        return [row for row in store.tasks[split] if row["difficulty"] == difficulty]

    return rows


def recipe_rows(store: Records, split: str = "train") -> List[Dict[str, Any]]:
    """One row per item of the world, shallow items first (then by name); base items have no recipe."""
    world = store.world_document
    base = set(world["base_items"])
    depths = world["depths"]
    items = set(base) | set(world["recipes"])
    rows = []
    for item in sorted(items, key=lambda name: (depths.get(name, 0), name)):
        recipes = world["recipes"].get(item, [])
        if len(recipes) > 1:
            raise ValueError("%s has %d recipes; the recipes config holds one per item" % (item, len(recipes)))
        recipe = recipes[0] if recipes else None
        rows.append(
            {
                "item": item,
                "depth": depths.get(item, 0),
                "is_base": item in base,
                "result_count": recipe["result_count"] if recipe else None,
                "ingredients": [{"item": name, "count": count} for name, count in recipe["ingredients"]] if recipe else [],
            }
        )
    return rows


def sft_rows(difficulty: Optional[str] = None) -> RowsFn:
    def rows(store: Records, split: str) -> List[Dict[str, Any]]:
        return sft.sft_rows(store, split, difficulty)

    return rows


def _all() -> Dict[str, ConfigSpec]:
    specs = [
        ConfigSpec("tasks", "Every task of textcraft-synth@1, in source order.", records.SPLITS, TASK_FEATURES, task_rows)
    ]
    for difficulty in records.DIFFICULTIES:
        low, high = records.DEPTH_RANGES[difficulty]
        specs.append(
            ConfigSpec(
                difficulty,
                "The %s tasks (crafting depth %d-%d), in source order." % (difficulty, low, high),
                records.SPLITS,
                TASK_FEATURES,
                difficulty_rows(difficulty),
            )
        )
    specs.append(
        ConfigSpec("recipes", "The world: one row per item with its depth and recipe.", ("train",), RECIPE_FEATURES, recipe_rows, holds_tasks=False)
    )
    specs.append(
        ConfigSpec(
            "sft",
            "Every task as a tool-calling conversation for supervised fine-tuning, replayed to reward 1.0.",
            records.SPLITS,
            SFT_FEATURES,
            sft_rows(),
            holds_tasks=False,
        )
    )
    for difficulty in records.DIFFICULTIES:
        specs.append(
            ConfigSpec(
                "sft-" + difficulty,
                "The %s tasks as tool-calling conversations for supervised fine-tuning." % difficulty,
                records.SPLITS,
                SFT_FEATURES,
                sft_rows(difficulty),
                holds_tasks=False,
            )
        )
    return {spec.name: spec for spec in specs}


CONFIGS: Dict[str, ConfigSpec] = _all()
DEFAULT_CONFIG = "tasks"
