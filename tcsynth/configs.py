"""The dataset's configs, as data: name, description, splits, and the row schema of each.

This module is the schema only: which configs exist and what their rows look like.  How each config's
rows are made from the records is the build's business (:func:`tcsynth.build.config_rows`), and the
``datasets`` feature types are built on first use (:func:`features`), so naming or checking a config loads
neither the products nor ``datasets``.  README.md's ``configs:`` header lists the same files (a test holds
the two together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from . import records
from .errors import UserError

# What a config's rows are: task rows, one row per item of the world, or one conversation per task.
TASKS, RECIPES, SFT = "tasks", "recipes", "sft"
# One conversation per agent of a tree of agents that delegate (see tcsynth.sft_recursive).
SFT_RECURSIVE = "sft-recursive"

# The columns of an sft row (see tcsynth.sft): task columns, the conversation, then its sizes.
SFT_TASK_COLUMNS = ("name", "split", "difficulty", "max_depth", "num_craft_steps")
SFT_SIZE_COLUMNS = ("num_turns", "num_tool_calls", "num_characters")
SFT_COLUMNS = SFT_TASK_COLUMNS + ("messages", "tools") + SFT_SIZE_COLUMNS
# The columns of an sft-recursive row: the task, where the agent sits, its own goal, snapshot and budget.
SFT_RECURSIVE_COLUMNS = (
    "name", "split", "difficulty", "agent_path", "parent_path", "depth", "targets", "initial_inventory", "num_steps", "messages", "tools",
) + SFT_SIZE_COLUMNS


@dataclass(frozen=True)
class ConfigSpec:
    """One config of the dataset.

    Args:
        name (`str`): the config name users pass to ``load_dataset``.
        description (`str`): one sentence for the dataset card and the builder.
        splits (`tuple[str, ...]`): its split names, in order.
        kind (`str`): what its rows are: :data:`TASKS`, :data:`RECIPES`, :data:`SFT` or :data:`SFT_RECURSIVE`.
        difficulty (`str`, *optional*): keep only rows of this difficulty.
        parallel (`bool`, defaults to `True`): sft configs only: several tool calls per assistant turn
            (``False``: exactly one).
        optional (`bool`, defaults to `False`): a dataset may go without it (it costs most of a build):
            ``generate-world`` writes it on request, and ``build`` rebuilds it only where it already is.
    """

    name: str
    description: str
    splits: Tuple[str, ...]
    kind: str
    difficulty: Optional[str] = None
    parallel: bool = True
    optional: bool = False

    @property
    def features(self) -> Any:
        """Its ``datasets.Features`` (see :func:`features`)."""
        return features(self.kind)

    @property
    def arrow_schema(self) -> Any:
        """The Arrow schema of its Parquet files (see :func:`arrow_schema`)."""
        return arrow_schema(self.kind)

    def keeps(self, row: Any) -> bool:
        """Whether a row of its kind belongs to this config (its difficulty filter)."""
        return self.difficulty is None or row["difficulty"] == self.difficulty

    @property
    def holds_tasks(self) -> bool:
        """Whether its rows are task rows (with a gold trajectory)."""
        return self.kind == TASKS


def _all() -> Dict[str, ConfigSpec]:
    specs = [ConfigSpec(records.TASKS_CONFIG, "Every task of textcraft-synth@1, in source order.", records.SPLITS, TASKS)]
    for difficulty in records.DIFFICULTIES:
        low, high = records.DEPTH_RANGES[difficulty]
        specs.append(
            ConfigSpec(
                difficulty,
                "The %s tasks (crafting depth %d-%d), in source order." % (difficulty, low, high),
                records.SPLITS,
                TASKS,
                difficulty,
            )
        )
    specs.append(ConfigSpec("recipes", "The world: one row per item with its depth and recipe.", ("train",), RECIPES))
    specs.append(
        ConfigSpec(
            "sft",
            "Every task as a tool-calling conversation for supervised fine-tuning, replayed to reward 1.0.",
            records.SPLITS,
            SFT,
        )
    )
    specs.append(
        ConfigSpec(
            "sft-sequential",
            "Every task as a conversation with exactly one tool call per assistant turn, for chat templates "
            "that take one call at a time (Llama 3.x, gpt-oss, ...), replayed to reward 1.0.",
            records.SPLITS,
            SFT,
            parallel=False,
        )
    )
    specs.append(
        ConfigSpec(
            "sft-recursive",
            "Agents that delegate: one conversation per agent of each task's tree, sharing one inventory, "
            "with launch_subagent; replayed together so that every agent succeeds on its own targets.",
            records.SPLITS,
            SFT_RECURSIVE,
            optional=True,
        )
    )
    for difficulty in records.DIFFICULTIES:
        specs.append(
            ConfigSpec(
                "sft-" + difficulty,
                "The %s tasks as tool-calling conversations for supervised fine-tuning." % difficulty,
                records.SPLITS,
                SFT,
                difficulty,
            )
        )
    return {spec.name: spec for spec in specs}


CONFIGS: Dict[str, ConfigSpec] = _all()
DEFAULT_CONFIG = records.TASKS_CONFIG
TASK_CONFIGS = tuple(name for name, spec in CONFIGS.items() if spec.holds_tasks)


def whole_config(spec: ConfigSpec) -> Optional[str]:
    """The config that ``spec`` is one difficulty of (``sft`` for ``sft-easy``), or None."""
    if spec.difficulty is None:
        return None
    for other in CONFIGS.values():
        if other.kind == spec.kind and other.parallel == spec.parallel and other.difficulty is None and other.splits == spec.splits:
            return other.name
    return None


def task_config(name: str, split: str) -> ConfigSpec:
    """The task config ``name``, checked to have ``split``; :class:`UserError` naming the choices otherwise."""
    spec = CONFIGS.get(name)
    if spec is None or not spec.holds_tasks:
        raise UserError("unknown task config %r; choose from %s" % (name, ", ".join(TASK_CONFIGS)))
    if split not in spec.splits:
        raise UserError("config %s has no split %r; it has %s" % (name, split, ", ".join(spec.splits)))
    return spec


# The row schema of each config kind, written in the form ``datasets.Features.to_dict()`` gives (``Value``,
# ``List``, ``Json``; a plain dict is a struct).  Both the ``datasets`` features (:func:`features`) and the
# Arrow schema the Parquet files are written with (:func:`arrow_schema`) are read from it, so the build
# needs no ``datasets`` import; a test holds the two equal to what ``datasets`` itself derives.
def _value(dtype: str) -> Dict[str, Any]:
    return {"dtype": dtype, "_type": "Value"}


def _list(feature: Any) -> Dict[str, Any]:
    return {"feature": feature, "_type": "List"}


def _feature_dicts() -> Dict[str, Dict[str, Any]]:
    int64, string = _value("int64"), _value("string")
    counts = _list({"item": string, "count": int64})
    task = {
        "name": string,
        "split": string,
        "index": int64,
        "difficulty": string,
        "max_depth": int64,
        "num_craft_steps": int64,
        "max_steps": int64,
        "goal": string,
        "source_task_id": string,
        "env_task_id": string,
        "env_split_task_id": string,
        "target_items": counts,
        "initial_inventory": counts,
        "gold_trajectory": _list({"item": string, "crafts": int64, "count": int64, "ingredients": counts}),
    }
    assert tuple(task) == records.TASK_COLUMNS
    recipe = {"item": string, "depth": int64, "is_base": _value("bool"), "result_count": int64, "ingredients": counts}
    # Messages and tools are JSON values, not Arrow structs: structs would merge keys across messages
    # (adding nulls), and tool-call arguments must reach chat templates as dicts.
    json_value = {"_type": "Json"}
    sft = dict({column: task[column] for column in SFT_TASK_COLUMNS}, messages=_list(json_value), tools=json_value)
    sft.update((column, int64) for column in SFT_SIZE_COLUMNS)
    assert tuple(sft) == SFT_COLUMNS
    tree = dict(
        {column: task[column] for column in ("name", "split", "difficulty")},
        agent_path=string,
        parent_path=string,
        depth=int64,
        targets=counts,
        initial_inventory=counts,
        num_steps=int64,
        messages=_list(json_value),
        tools=json_value,
    )
    tree.update((column, int64) for column in SFT_SIZE_COLUMNS)
    assert tuple(tree) == SFT_RECURSIVE_COLUMNS
    return {TASKS: task, RECIPES: recipe, SFT: sft, SFT_RECURSIVE: tree}


FEATURE_DICTS: Dict[str, Dict[str, Any]] = _feature_dicts()
_FEATURES: Dict[str, Any] = {}
_SCHEMAS: Dict[str, Any] = {}


def features(kind: str) -> Any:
    """The ``datasets.Features`` of a config kind (``datasets`` is imported here, on first use)."""
    if kind not in _FEATURES:
        import datasets

        _FEATURES[kind] = datasets.Features.from_dict(FEATURE_DICTS[kind])
    return _FEATURES[kind]


def arrow_schema(kind: str) -> Any:
    """The Arrow schema of a config kind's Parquet files: what ``features(kind).arrow_schema`` is, made
    with ``pyarrow`` alone (the build does not import ``datasets``, ~1 s)."""
    schema = _SCHEMAS.get(kind)
    if schema is None:
        import json

        import pyarrow as pa

        metadata = {"huggingface": json.dumps({"info": {"features": FEATURE_DICTS[kind]}})}
        schema = _SCHEMAS[kind] = pa.schema([pa.field(name, _arrow_type(feature)) for name, feature in FEATURE_DICTS[kind].items()], metadata=metadata)
    return schema


def _arrow_type(feature: Mapping[str, Any]) -> Any:
    import pyarrow as pa

    kind = feature.get("_type")
    if kind is None:  # a struct
        return pa.struct([pa.field(name, _arrow_type(value)) for name, value in feature.items()])
    if kind == "List":
        return pa.list_(_arrow_type(feature["feature"]))
    if kind == "Json":
        return pa.json_()
    return {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_()}[feature["dtype"]]


def card_configs_yaml(names: Optional[Iterable[str]] = None) -> str:
    """The ``configs:`` block of a dataset card's YAML header: the configs ``names`` (default: all), their
    splits and Parquet files, in the order of :data:`CONFIGS`."""
    chosen = set(CONFIGS if names is None else names)
    lines = ["configs:"]
    for spec in (spec for spec in CONFIGS.values() if spec.name in chosen):
        lines.append("- config_name: %s" % spec.name)
        if spec.name == DEFAULT_CONFIG:
            lines.append("  default: true")
        lines.append("  data_files:")
        for split in spec.splits:
            lines += ["  - split: %s" % split, "    path: data/%s/%s.parquet" % (spec.name, split)]
    return "\n".join(lines) + "\n"
