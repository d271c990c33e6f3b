"""The files at the root of an export: ``registry.json``, ``task-index.json``, ``splits.json`` and the card.

Pure functions of the exported rows (and, for the index, each task's content hash): sorted or source
order, fixed indent, ASCII, so two exports give the same bytes.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import records
from .files import agent_timeout_sec
from .layout import REGISTRY_FILE, REGISTRY_VERSION, SPLITS_FILE, TASK_INDEX_FILE, TASKS_DIR, render

Tasks = Mapping[str, Sequence[Mapping[str, Any]]]


def _json_bytes(document: Any, sort_keys: bool = False) -> bytes:
    """``json.dumps(document, indent=1, sort_keys=sort_keys) + "\\n"`` as ASCII bytes (see :func:`_indented`)."""
    return (_indented(document, sort_keys, "\n") + "\n").encode("ascii")


_string = json.encoder.encode_basestring_ascii


def _indented(value: Any, sort_keys: bool, newline: str) -> str:
    """The text ``json.dumps(value, indent=1, sort_keys=sort_keys)`` gives, written directly.

    ``json.dumps`` with an indent runs the pure-Python encoder, which took most of the time spent on the
    index files; dicts, lists, strings and ints are written here, anything else by ``json.dumps`` itself.
    ``newline`` is a newline plus the current indent.
    """
    if type(value) is str:
        return _string(value)
    if type(value) is int:
        return int.__repr__(value)
    inner = newline + " "
    if type(value) is dict:
        if not value:
            return "{}"
        items = sorted(value.items()) if sort_keys else value.items()
        return "{" + inner + ("," + inner).join(_string(key) + ": " + _indented(item, sort_keys, inner) for key, item in items) + newline + "}"
    if type(value) is list:
        if not value:
            return "[]"
        return "[" + inner + ("," + inner).join(_indented(item, sort_keys, inner) for item in value) + newline + "]"
    return json.dumps(value)


def task_path(row: Mapping[str, Any]) -> str:
    return "%s/%s" % (TASKS_DIR, row["name"])


def registry_bytes(tasks: Tasks, world: str) -> bytes:
    """``registry.json``: one Harbor dataset per split, tasks in source order."""
    datasets = []
    for split, rows in tasks.items():
        datasets.append(
            {
                "name": "%s-%s" % (world, split),
                "version": REGISTRY_VERSION,
                "description": "TextCraft-Synth %s: %s tasks; %s" % (split, "{:,}".format(len(rows)), records.difficulty_counts_text(rows)),
                "tasks": [{"name": row["name"], "path": task_path(row)} for row in rows],
            }
        )
    return _json_bytes(datasets)


def splits_bytes(tasks: Tasks) -> bytes:
    """``splits.json``: each split and each split-difficulty to its task names, in source order."""
    splits: Dict[str, List[str]] = {}
    for split, rows in tasks.items():
        splits[split] = [row["name"] for row in rows]
        for difficulty in records.DIFFICULTIES:
            splits["%s-%s" % (split, difficulty)] = [row["name"] for row in rows if row["difficulty"] == difficulty]
    return _json_bytes(splits)


def index_entry(row: Mapping[str, Any], digest: str, crafts: Optional[int] = None) -> Dict[str, Any]:
    """One task's entry in ``task-index.json``."""
    return {
        "task_path": task_path(row),
        "split": row["split"],
        "difficulty": row["difficulty"],
        "max_depth": row["max_depth"],
        "num_craft_steps": row["num_craft_steps"],
        "agent_timeout_sec": agent_timeout_sec(row, crafts),
        "goal": row["goal"],
        "target_items": records.list_to_counts(row["target_items"]),
        "source_task_id": row["source_task_id"],
        "env_task_id": row["env_task_id"],
        "env_split_task_id": row["env_split_task_id"],
        "digest": digest,
    }


def task_index_bytes(tasks: Tasks, digests: Mapping[str, str], crafts: Optional[Mapping[str, int]] = None) -> bytes:
    """``task-index.json``: every task by name (sorted keys, ``indent=1``); ``crafts``: gold crafts by name,
    for rows read without their gold trajectories."""
    index = {
        row["name"]: index_entry(row, digests[row["name"]], crafts[row["name"]] if crafts is not None else None)
        for rows in tasks.values()
        for row in rows
    }
    return _json_bytes(index, sort_keys=True)


def index_files(tasks: Tasks, digests: Mapping[str, str], world: str, crafts: Optional[Mapping[str, int]] = None) -> Dict[str, bytes]:
    """The three index files of an export, by name."""
    return {
        REGISTRY_FILE: registry_bytes(tasks, world),
        TASK_INDEX_FILE: task_index_bytes(tasks, digests, crafts),
        SPLITS_FILE: splits_bytes(tasks),
    }


def card_bytes(tasks: Tasks, world: str, repo_id: str) -> bytes:
    """The export's dataset card (``templates/README.md``)."""
    table = "\n".join(
        "| %s | %s | %s |" % (split, "{:,}".format(len(rows)), records.difficulty_counts_text(rows)) for split, rows in tasks.items()
    )
    example = next((rows[0]["name"] for rows in reversed(list(tasks.values())) if rows), "")
    values = {
        "total": "{:,}".format(sum(len(rows) for rows in tasks.values())),
        "table": table,
        "repo_id": repo_id,
        "world": world,
        "version": REGISTRY_VERSION,
        "example_task": example,
        "max_depth": records.MAX_DEPTH,
        "depth_ranges": records.depth_ranges_text(),
    }
    return render("README.md", values).encode("utf-8")
