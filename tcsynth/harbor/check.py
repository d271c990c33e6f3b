"""``verify-export``: does a Harbor tree on disk still match its own index?

Recomputes every task's content hash and compares it with ``task-index.json``, and checks that
``registry.json``, the index and the ``tasks/`` directories name the same tasks.  One flipped byte, a
missing or extra task, or a stale index shows up as a line of the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Tuple

from .digest import directory_digest
from .layout import REGISTRY_FILE, TASK_INDEX_FILE, TASKS_DIR, ExportError


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ExportError("cannot read %s: %s" % (path, error.strerror or error))
    except ValueError as error:
        raise ExportError("%s is not JSON: %s" % (path, error))


def verify_export(out: Path) -> Tuple[int, List[str]]:
    """``(tasks checked, problems)`` for the export at ``out``; no problems means every digest matches."""
    out = Path(out)
    index = _read_json(out / TASK_INDEX_FILE)
    registry = _read_json(out / REGISTRY_FILE)
    if not isinstance(index, dict) or not isinstance(registry, list):
        raise ExportError("%s must be an object and %s a list" % (TASK_INDEX_FILE, REGISTRY_FILE))
    problems = []
    for name in sorted(index):
        entry = index[name]
        task_dir = out / entry.get("task_path", "")
        if not task_dir.is_dir():
            problems.append("%s: %s is missing" % (name, entry.get("task_path")))
            continue
        try:
            digest, _ = directory_digest(task_dir)
        except (OSError, ValueError) as error:
            problems.append("%s: cannot hash: %s" % (name, error))
            continue
        if digest != entry.get("digest"):
            problems.append("%s: content hash %s, task-index.json says %s" % (name, digest, entry.get("digest")))
    listed = set()
    for dataset in registry:
        for task in dataset.get("tasks", []) if isinstance(dataset, dict) else []:
            listed.add(task.get("name"))
            if task.get("name") not in index:
                problems.append("%s: in %s but not in %s" % (task.get("name"), REGISTRY_FILE, TASK_INDEX_FILE))
            elif task.get("path") != index[task["name"]].get("task_path"):
                problems.append("%s: %s says %s, %s says %s" % (task["name"], REGISTRY_FILE, task.get("path"), TASK_INDEX_FILE, index[task["name"]].get("task_path")))
    problems.extend("%s: in %s but in no dataset of %s" % (name, TASK_INDEX_FILE, REGISTRY_FILE) for name in sorted(set(index) - listed))
    on_disk = {path.name for path in (out / TASKS_DIR).iterdir() if path.is_dir()} if (out / TASKS_DIR).is_dir() else set()
    problems.extend("%s/%s: a task directory %s does not list" % (TASKS_DIR, name, TASK_INDEX_FILE) for name in sorted(on_disk - set(index)))
    return len(index), problems
