"""The Harbor export: every task as a Harbor task directory, plus the dataset's index files and card.

Layout written by :func:`export_harbor` (SPEC §3)::

    OUT/registry.json  task-index.json  splits.json  LICENSE  README.md
    OUT/tasks/<name>/instruction.md              the game, the goal and the textcraft commands
    OUT/tasks/<name>/task.toml                   Harbor's task config
    OUT/tasks/<name>/environment/Dockerfile      the agent's image: Python, tmux, the textcraft command
    OUT/tasks/<name>/environment/{textcraft_game.py, recipes.json, task.json}
    OUT/tasks/<name>/tests/{test.sh, Dockerfile, textcraft_game.py, recipes.json, task.json}
    OUT/tasks/<name>/solution/solve.sh           the gold crafts as textcraft commands, then finish

``textcraft_game.py`` is the bytes of :mod:`tcsynth.game` itself: the same file is the in-container command
and the verifier.  Every file's bytes come from a pure function of the task row, so two exports are
identical; the files every task shares (the game, ``recipes.json``, ``test.sh``) are hard links to one
copy, and ``tests/task.json`` is a hard link to ``environment/task.json``.  The writer stages the
whole tree next to OUT and renames it into place, so OUT is never left half written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from . import game, records, store

GAME_SOURCE = Path(game.__file__)
GAME_FILE = "textcraft_game.py"
TASK_FILE = game.TASK_FILE
RECIPES_FILE = game.RECIPES_FILE
GAME_DIR = "/app/textcraft"
LOG_PATH = GAME_DIR + "/" + game.LOG_NAME
# python:3.12-slim as the published tasks pin it: every task and verifier image starts from these bytes.
BASE_IMAGE = (
    "docker.io/library/python:3.12-slim@sha256:a6e34c598f2467ed0e9a8d349809fcd8b5c603269512df273a0bb1784edc11b1"
)
WORLD_NAME = "textcraft-synth"
REGISTRY_VERSION = "1.0"
KEYWORDS = ("textcraft", "textcraft-synth", "crafting", "planning")
VERIFIER_TIMEOUT_SEC = 180.0
BUILD_TIMEOUT_SEC = 900.0
# The agent's time: a base plus a little per gold craft, in whole minutes.
AGENT_BASE_SEC = 600
AGENT_SEC_PER_CRAFT = 10
ROOT_INDEX_FILES = ("registry.json", "task-index.json", "splits.json")
REPO_ID = "apurvaga/textcraft-synth"
FILE_MODE = 0o644
SCRIPT_MODE = 0o755
# The task's root files and directories Harbor's content hash covers.
HASHED_ROOT_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
HASHED_DIRECTORIES = ("environment/", "tests/", "solution/", "steps/")


class ExportError(ValueError):
    """The export cannot be written: a bad option, an existing OUT, or a gold solution that fails."""


@dataclass(frozen=True)
class TaskFile:
    """One file of a task: its path inside the task directory, bytes and mode.

    ``shared`` files have the same bytes in every task; ``same_as`` names an earlier file of the same task
    with the same bytes.  The writer makes both hard links.
    """

    path: str
    data: bytes
    mode: int = FILE_MODE
    shared: bool = False
    same_as: str = ""


# --------------------------------------------------------------------------------------------- small facts


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def agent_timeout_sec(row: Mapping[str, Any]) -> int:
    """600 s plus 10 s per gold craft, rounded up to a whole minute."""
    seconds = AGENT_BASE_SEC + AGENT_SEC_PER_CRAFT * len(row["gold_trajectory"])
    return int(math.ceil(seconds / 60.0)) * 60


def short_name(row: Mapping[str, Any]) -> str:
    """The name after the ``textcraft-synth`` prefix, e.g. ``train-medium-00000``."""
    return "%s-%s-%05d" % (row["split"], row["difficulty"], row["index"])


def targets_text(row: Mapping[str, Any]) -> str:
    """``3x a1_i5, 2x b0_i3``: the targets in task order."""
    return ", ".join("%dx %s" % (entry["count"], entry["item"]) for entry in row["target_items"])


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML, ``ensure_ascii`` keeps it 7-bit)."""
    return json.dumps(text)


_QUOTED: Dict[str, str] = {}  # item name -> the name quoted for the shell (names repeat across tasks)


def shell_word(word: str) -> str:
    """``word`` quoted for the shell when it needs it (``shlex.quote``, cached)."""
    quoted = _QUOTED.get(word)
    if quoted is None:
        quoted = _QUOTED[word] = shlex.quote(word)
    return quoted


def gold_commands(row: Mapping[str, Any]) -> List[str]:
    """The gold trajectory as ``textcraft`` command lines: totals, not crafts; then ``finish``."""
    quoted = _QUOTED.get
    lines = []
    for step in row["gold_trajectory"]:
        words = ["textcraft craft", quoted(step["item"]) or shell_word(step["item"]), str(step["count"])]
        for part in step["ingredients"]:
            words.append("%s=%d" % (quoted(part["item"]) or shell_word(part["item"]), part["count"]))
        lines.append(" ".join(words))
    lines.append("textcraft finish " + shlex.quote(finish_message(row)))
    return lines


def finish_message(row: Mapping[str, Any]) -> str:
    return "Crafted " + targets_text(row)


# ------------------------------------------------------------------------------------------ the task's files


def task_json_bytes(row: Mapping[str, Any], recipes_sha256: str) -> bytes:
    """``task.json`` exactly as SPEC §3 gives it (``indent=1``, ASCII, a final newline)."""
    document = {
        "format": game.TASK_FORMAT,
        "name": row["name"],
        "world": WORLD_NAME,
        "goal": row["goal"],
        "target_items": records.list_to_counts(row["target_items"]),
        "initial_inventory": records.list_to_counts(row["initial_inventory"]),
        "recipes_sha256": recipes_sha256,
    }
    return (json.dumps(document, indent=1, ensure_ascii=True) + "\n").encode("ascii")


def task_toml_bytes(row: Mapping[str, Any]) -> bytes:
    """``task.toml``: Harbor schema 1.4, the episode log as an artifact, the metadata and the limits."""
    metadata = [
        ("environment", toml_string(game.ENVIRONMENT)),
        ("split", toml_string(row["split"])),
        ("difficulty", toml_string(row["difficulty"])),
        ("max_depth", str(row["max_depth"])),
        ("num_craft_steps", str(row["num_craft_steps"])),
        ("goal", toml_string(row["goal"])),
        ("source_task_id", toml_string(row["source_task_id"])),
        ("env_task_id", toml_string(row["env_task_id"])),
        ("env_split_task_id", toml_string(row["env_split_task_id"])),
    ]
    description = "Craft %s in TextCraft-Synth (%s, crafting depth %d)" % (
        targets_text(row),
        row["difficulty"],
        row["max_depth"],
    )
    lines = [
        'schema_version = "1.4"',
        "# The verifier replays this log; with a separate verifier Harbor hands it over as an artifact.",
        "artifacts = [%s]" % toml_string(LOG_PATH),
        "",
        "[task]",
        "name = %s" % toml_string("%s/%s" % (records.TASK_NAME_PREFIX, short_name(row))),
        "description = %s" % toml_string(description),
        "keywords = [%s]" % ", ".join(toml_string(word) for word in KEYWORDS),
        "",
        "[metadata]",
        *("%s = %s" % pair for pair in metadata),
        "",
        "[verifier]",
        'environment_mode = "separate"',
        "timeout_sec = %.1f" % VERIFIER_TIMEOUT_SEC,
        "",
        "[agent]",
        "timeout_sec = %.1f" % agent_timeout_sec(row),
        "",
        "[environment]",
        'network_mode = "no-network"',
        "cpus = 1",
        "memory_mb = 2048",
        "gpus = 0",
        "build_timeout_sec = %.1f" % BUILD_TIMEOUT_SEC,
    ]
    return ("\n".join(lines) + "\n").encode("ascii")


INSTRUCTION = """\
# TextCraft-Synth

This is a crafting game played in the shell.  You hold an inventory of items; recipes turn some items into
others.  Your inventory already holds enough raw material for the goal, but you will usually have to
craft intermediate items first.

## Goal

{goal}

Only what you craft counts: if you already hold some of a target item, craft the full amount on top of
it.  (Holding 2 of an item whose goal is 3 means ending with 5.)

## The `textcraft` command

- `textcraft info ITEM [ITEM ...]` prints a JSON list with one entry per item: `can_craft`, `is_base`,
  `in_inventory` (how many you hold), `crafting_depth` (0 for raw items, 1 when a recipe uses only raw
  items, more when intermediate items are needed) and `recipes`, each recipe given as
  `{{"ingredients": {{NAME: N, ...}}, "result_count": N}}`.
- `textcraft inventory` prints what you hold, as JSON `{{ITEM: COUNT, ...}}`.
- `textcraft craft ITEM COUNT NAME=N [NAME=N ...]` makes COUNT of ITEM, the total you gain.  COUNT must
  be a multiple of the recipe's `result_count`; name exactly the recipe's ingredients, each with its
  recipe amount times COUNT / `result_count`.  If `b3_i2` has the recipe
  `{{"ingredients": {{"b1_i1": 2, "raw_b2": 1}}, "result_count": 3}}`, then
  `textcraft craft b3_i2 6 b1_i1=4 raw_b2=2` runs it twice and makes 6.
- `textcraft finish MESSAGE` ends the episode with a short note on what you did.  It is graded on what
  your inventory gained; after it no command runs.  An episode that never calls it fails.

`textcraft --help` repeats this.  The game keeps its state in `{game_dir}` (an action log of your
commands); only the `textcraft` command may change it.
"""


def instruction_bytes(row: Mapping[str, Any]) -> bytes:
    return INSTRUCTION.format(goal=row["goal"], game_dir=GAME_DIR).encode("utf-8")


# The same image serves the agent and the verifier: the base image, tmux (terminal agents drive the
# container through it) and a two-line `textcraft` wrapper.  apt runs its downloads as root, since rootless
# image builders have no _apt user to hand them to.
_IMAGE_SETUP = """\
RUN echo 'APT::Sandbox::User "root";' > /etc/apt/apt.conf.d/10textcraft-root \\
 && apt-get update \\
 && apt-get install --yes --no-install-recommends tmux \\
 && rm -rf /var/lib/apt/lists/* \\
 && echo '#!/bin/sh' > /usr/local/bin/textcraft \\
 && echo 'exec python3 -I {game_dir}/{game_file} "$@"' >> /usr/local/bin/textcraft \\
 && chmod 755 /usr/local/bin/textcraft
""".format(game_dir=GAME_DIR, game_file=GAME_FILE)


def _dockerfile_head(row: Mapping[str, Any], task_json_sha256: str) -> str:
    # The first line names the task: image caches key on the Dockerfile's text.
    return "# %s (task.json sha256:%s)\nFROM %s\n%s" % (row["name"], task_json_sha256, BASE_IMAGE, _IMAGE_SETUP)


def environment_dockerfile_bytes(row: Mapping[str, Any], task_json_sha256: str) -> bytes:
    text = _dockerfile_head(row, task_json_sha256) + (
        "WORKDIR /app\n"
        "ENV TEXTCRAFT_DIR={game_dir}\n"
        "# The shared files first (one layer for every task), then this task's goal and inventory.\n"
        "COPY {game_file} {recipes} {game_dir}/\n"
        "COPY {task} {game_dir}/\n"
    ).format(game_dir=GAME_DIR, game_file=GAME_FILE, recipes=RECIPES_FILE, task=TASK_FILE)
    return text.encode("ascii")


def tests_dockerfile_bytes(row: Mapping[str, Any], task_json_sha256: str) -> bytes:
    text = _dockerfile_head(row, task_json_sha256) + (
        "WORKDIR /app\n"
        "# The grader's own copies: only the action log comes from the agent.\n"
        "COPY test.sh {game_file} {recipes} {task} /tests/\n"
    ).format(game_file=GAME_FILE, recipes=RECIPES_FILE, task=TASK_FILE)
    return text.encode("ascii")


TEST_SH = """\
#!/bin/bash
# Grades the episode: the trusted game in this directory replays the agent's action log
# ({log_path}) from the task's starting inventory and writes reward.json plus
# {verdict} (with the reason) to the verifier's log directory.
# PLATOON_SANDBOX_ROOT is set when platoon's process provider runs this on the host with the sandbox's
# files below it; in a container it is unset and the paths are the container's own.
set -u
root="${{PLATOON_SANDBOX_ROOT:-}}"
tests="$root/tests"
out="$root/logs/verifier"
mkdir -p "$out"
exec python3 -I "$tests/{game_file}" verify --task "$tests/{task}" --recipes "$tests/{recipes}" \\
  --root "$root/" --log {log_relpath} --out "$out"
"""


def test_sh_bytes() -> bytes:
    text = TEST_SH.format(
        log_path=LOG_PATH,
        verdict=game.VERDICT_FILE,
        game_file=GAME_FILE,
        task=TASK_FILE,
        recipes=RECIPES_FILE,
        log_relpath=LOG_PATH.lstrip("/"),
    )
    return text.encode("ascii")


SOLVE_SH = """\
#!/bin/bash
# {name}: replays its {crafts} gold crafts, each with the total the command takes, and finishes.
set -eu -o pipefail
# Outside a container (platoon's process provider) there is no wrapper on PATH; the sandbox's files
# sit below PLATOON_SANDBOX_ROOT, so call the game file there.
type textcraft >/dev/null 2>&1 || textcraft() {{
  python3 -I "${{PLATOON_SANDBOX_ROOT:-}}{game_dir}/{game_file}" "$@"
}}
{commands}
"""


def solve_sh_bytes(row: Mapping[str, Any]) -> bytes:
    text = SOLVE_SH.format(
        name=row["name"],
        crafts=len(row["gold_trajectory"]),
        game_dir=GAME_DIR,
        game_file=GAME_FILE,
        commands="\n".join(gold_commands(row)),
    )
    return text.encode("utf-8")


def task_files(
    row: Mapping[str, Any],
    recipes_bytes: bytes,
    game_bytes: bytes,
    recipes_sha256: Optional[str] = None,
    test_sh: Optional[bytes] = None,
) -> List[TaskFile]:
    """Every file of one task directory, sorted by path (``environment/task.json`` before its link)."""
    recipes_sha256 = recipes_sha256 or sha256_hex(recipes_bytes)
    task_json = task_json_bytes(row, recipes_sha256)
    task_json_sha = sha256_hex(task_json)
    files = [
        TaskFile("instruction.md", instruction_bytes(row)),
        TaskFile("task.toml", task_toml_bytes(row)),
        TaskFile("environment/Dockerfile", environment_dockerfile_bytes(row, task_json_sha)),
        TaskFile("environment/" + GAME_FILE, game_bytes, shared=True),
        TaskFile("environment/" + RECIPES_FILE, recipes_bytes, shared=True),
        TaskFile("environment/" + TASK_FILE, task_json),
        TaskFile("tests/test.sh", test_sh or test_sh_bytes(), SCRIPT_MODE, shared=True),
        TaskFile("tests/Dockerfile", tests_dockerfile_bytes(row, task_json_sha)),
        TaskFile("tests/" + GAME_FILE, game_bytes, shared=True),
        TaskFile("tests/" + RECIPES_FILE, recipes_bytes, shared=True),
        TaskFile("tests/" + TASK_FILE, task_json, same_as="environment/" + TASK_FILE),
        TaskFile("solution/solve.sh", solve_sh_bytes(row), SCRIPT_MODE),
    ]
    return sorted(files, key=lambda item: item.path)


def is_hashed(path: str) -> bool:
    """Whether Harbor's content hash covers a task file (by its path in the task directory)."""
    return path in HASHED_ROOT_FILES or path.startswith(HASHED_DIRECTORIES)


def content_digest(files: Iterable[TaskFile], shared_digests: Optional[Mapping[str, str]] = None) -> str:
    """Harbor's content hash of a task: sha256 over ``f"{path}\\0{sha256(file)}\\n"`` in path order.

    ``shared_digests`` maps the paths of ``shared`` files to their hex digest, so they are hashed once.
    """
    known = shared_digests or {}
    outer = hashlib.sha256()
    for item in sorted(files, key=lambda entry: entry.path):
        if not is_hashed(item.path):
            continue
        hexdigest = (item.shared and known.get(item.path)) or sha256_hex(item.data)
        outer.update(("%s\0%s\n" % (item.path, hexdigest)).encode("utf-8"))
    return "sha256:" + outer.hexdigest()


# --------------------------------------------------------------------------------------------- gold check


def check_gold(world: game.World, row: Mapping[str, Any]) -> None:
    """Play the task's gold solution (what ``solve.sh`` runs) with the engine; raise :class:`ExportError`
    unless every craft is accepted and ``finish`` succeeds."""
    episode = game.Game.for_task(world, records.engine_task(row))
    for number, (item, total, ingredients) in enumerate(records.gold_steps(row), 1):
        answer = episode.craft(ingredients, [item, total])
        if not game.craft_succeeded(answer):
            raise ExportError("the gold solution of %s fails at craft %d: %s" % (row["name"], number, answer))
    episode.finish(finish_message(row))
    if not episode.succeeded():
        raise ExportError("the gold solution of %s does not reach the goal: %s" % (row["name"], episode.missing_items()))


def check_all_gold(world: game.World, rows: Iterable[Mapping[str, Any]]) -> Optional[str]:
    """The first gold solution that fails, as an error message, or None when all reach their goal."""
    try:
        for row in rows:
            check_gold(world, row)
    except ExportError as error:
        return str(error)
    return None


def _gold_worker(world: game.World, rows: Sequence[Mapping[str, Any]], connection: Any) -> None:
    connection.send(check_all_gold(world, rows))
    connection.close()


def check_gold_in_background(world: game.World, rows: Sequence[Mapping[str, Any]]) -> Callable[[], None]:
    """Start playing every gold solution; return a function that waits and raises :class:`ExportError`.

    Where ``fork`` exists and there is a second core, a forked process plays them (the rows are shared
    copy-on-write, nothing is pickled); elsewhere they are played right away.
    """
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods() or (os.cpu_count() or 1) < 2 or len(rows) < 256:
        problem = check_all_gold(world, rows)

        def done() -> None:
            if problem:
                raise ExportError(problem)

        return done
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_gold_worker, args=(world, rows, sender), daemon=True)
    process.start()
    sender.close()

    def wait() -> None:
        try:
            problem = receiver.recv()
        except EOFError:
            problem = "the process playing the gold solutions died (exit code %s)" % process.exitcode
        finally:
            receiver.close()
            process.join()
        if problem:
            raise ExportError(problem)

    return wait


# ------------------------------------------------------------------------------------------- root files


def _json_bytes(document: Any, sort_keys: bool = False) -> bytes:
    return (json.dumps(document, indent=1, sort_keys=sort_keys) + "\n").encode("ascii")


def _difficulty_counts(rows: Sequence[Mapping[str, Any]]) -> str:
    counts = {name: 0 for name in records.DIFFICULTIES}
    for row in rows:
        counts[row["difficulty"]] += 1
    return ", ".join("%s %s" % ("{:,}".format(counts[name]), name) for name in records.DIFFICULTIES)


def registry_bytes(tasks: Mapping[str, Sequence[Mapping[str, Any]]]) -> bytes:
    """``registry.json``: one Harbor dataset per split, tasks in source order."""
    datasets = []
    for split, rows in tasks.items():
        datasets.append(
            {
                "name": "%s-%s" % (records.TASK_NAME_PREFIX, split),
                "version": REGISTRY_VERSION,
                "description": "TextCraft-Synth %s: %s tasks; %s"
                % (split, "{:,}".format(len(rows)), _difficulty_counts(rows)),
                "tasks": [{"name": row["name"], "path": "tasks/" + row["name"]} for row in rows],
            }
        )
    return _json_bytes(datasets)


def splits_bytes(tasks: Mapping[str, Sequence[Mapping[str, Any]]]) -> bytes:
    """``splits.json``: each split and each split-difficulty to its task names, in source order."""
    splits: Dict[str, List[str]] = {}
    for split, rows in tasks.items():
        splits[split] = [row["name"] for row in rows]
        for difficulty in records.DIFFICULTIES:
            splits["%s-%s" % (split, difficulty)] = [row["name"] for row in rows if row["difficulty"] == difficulty]
    return _json_bytes(splits)


def index_entry(row: Mapping[str, Any], digest: str) -> Dict[str, Any]:
    """One task's entry in ``task-index.json``."""
    return {
        "task_path": "tasks/" + row["name"],
        "split": row["split"],
        "difficulty": row["difficulty"],
        "max_depth": row["max_depth"],
        "num_craft_steps": row["num_craft_steps"],
        "agent_timeout_sec": agent_timeout_sec(row),
        "goal": row["goal"],
        "target_items": records.list_to_counts(row["target_items"]),
        "source_task_id": row["source_task_id"],
        "env_task_id": row["env_task_id"],
        "env_split_task_id": row["env_split_task_id"],
        "digest": digest,
    }


def task_index_bytes(tasks: Mapping[str, Sequence[Mapping[str, Any]]], digests: Mapping[str, str]) -> bytes:
    """``task-index.json``: every task by name (sorted keys, ``indent=1``)."""
    index = {row["name"]: index_entry(row, digests[row["name"]]) for rows in tasks.values() for row in rows}
    return _json_bytes(index, sort_keys=True)


class SharedFiles:
    """The files every task carries, with their digests computed once."""

    def __init__(self, recipes_bytes: bytes, game_bytes: bytes):
        self.recipes = recipes_bytes
        self.game = game_bytes
        self.recipes_sha256 = sha256_hex(recipes_bytes)
        self.test_sh = test_sh_bytes()
        by_bytes = {id(recipes_bytes): self.recipes_sha256, id(game_bytes): sha256_hex(game_bytes), id(self.test_sh): sha256_hex(self.test_sh)}
        sample = task_files(_SAMPLE_ROW, self.recipes, self.game, self.recipes_sha256, self.test_sh)
        self.digests = {item.path: by_bytes[id(item.data)] for item in sample if item.shared}

    def files(self, row: Mapping[str, Any]) -> List[TaskFile]:
        return task_files(row, self.recipes, self.game, self.recipes_sha256, self.test_sh)

    def digest(self, files: Iterable[TaskFile]) -> str:
        return content_digest(files, self.digests)


# A task row with every field the file builders read, to list which paths are shared.
_SAMPLE_ROW: Dict[str, Any] = {
    "name": "textcraft-synth-train-easy-00000",
    "split": "train",
    "index": 0,
    "difficulty": "easy",
    "max_depth": 2,
    "num_craft_steps": 0,
    "goal": "",
    "source_task_id": "",
    "env_task_id": "",
    "env_split_task_id": "",
    "target_items": [],
    "initial_inventory": [],
    "gold_trajectory": [],
}


def game_bytes() -> bytes:
    """The bytes of the engine file, which every task carries as ``textcraft_game.py``."""
    return GAME_SOURCE.read_bytes()


def select_tasks(
    tasks: Mapping[str, Sequence[Mapping[str, Any]]], splits: Optional[Sequence[str]] = None, limit: Optional[int] = None
) -> Dict[str, List[Mapping[str, Any]]]:
    """The rows to export: the chosen splits in the records' order, the first ``limit`` of each."""
    chosen = list(splits) if splits else list(tasks)
    unknown = [split for split in chosen if split not in tasks]
    if unknown:
        raise ExportError("unknown split %s (the splits are %s)" % (", ".join(unknown), ", ".join(tasks)))
    if limit is not None and limit < 1:
        raise ExportError("--limit must be at least 1, got %d" % limit)
    return {split: list(tasks[split][:limit] if limit else tasks[split]) for split in tasks if split in chosen}


def root_index_files(data: store.Records, splits: Optional[Sequence[str]] = None, limit: Optional[int] = None) -> Dict[str, bytes]:
    """``registry.json``, ``task-index.json`` and ``splits.json`` of an export, without writing a task."""
    tasks = select_tasks(data.tasks, splits, limit)
    shared = SharedFiles(data.recipes_bytes, game_bytes())
    digests = {row["name"]: shared.digest(shared.files(row)) for rows in tasks.values() for row in rows}
    return {
        "registry.json": registry_bytes(tasks),
        "task-index.json": task_index_bytes(tasks, digests),
        "splits.json": splits_bytes(tasks),
    }


CARD = """\
---
pretty_name: TextCraft-Synth
license: mit
language:
- en
tags:
- harbor
- rl-environment
- textcraft
- crafting
- planning
size_categories:
- 1K<n<10K
viewer: false
---

# TextCraft-Synth as Harbor tasks

Each task hands an agent a starting inventory and asks it, through a `textcraft` command in a container,
for a few items whose recipe trees run up to 12 levels deep; it has to look recipes up and plan far ahead.  This export
holds {total} tasks as [Harbor](https://pypi.org/project/harbor/) task directories:

| split | tasks | by difficulty |
|---|---|---|
{table}

Difficulty is the target's crafting depth: easy 2-3, medium 4-6, hard 7-9, extreme 10-12.

## Run the tasks with Harbor

`registry.json` declares one dataset per split (`textcraft-synth-train@1.0`, `textcraft-synth-val@1.0`):

```bash
harbor run --repo https://huggingface.co/datasets/{repo_id} --dataset textcraft-synth-val@1.0 --agent oracle
harbor run --repo https://huggingface.co/datasets/{repo_id} --dataset textcraft-synth-train@1.0 \\
  --include-task-name 'textcraft-synth-train-hard-*' --agent terminus-2 --model <model>
harbor run --path tasks/textcraft-synth-val-easy-00003 --agent oracle       # one task from a local copy
```

Harbor's `oracle` agent plays `solution/solve.sh`, which wins every task; the `nop` agent, which does
nothing, gets 0.0.  Task
names carry split and difficulty, so `--include-task-name` selects difficulties.  The tasks run without a
network (`network_mode = "no-network"`): the gold solutions are public.

## Run the tasks with platoon 0.4

platoon's `harbor` service downloads the dataset at a fixed revision and filters tasks by any field
of `task-index.json` (platoon 0.3 dropped `service_kwargs.image_map`; every task builds the same image from
its own `environment/Dockerfile`, so no map is needed):

```yaml
environments:
  - name: textcraft-synth
    service: harbor
    service_kwargs:
      dataset: hf://{repo_id}@<revision>
      select: {{split: train, difficulty: medium}}
      provider: docker            # or singularity, or process (runs solve.sh/test.sh on the host)
    harness: <harness>
```

With the `process` provider there is no image: `tests/test.sh` and `solution/solve.sh` then find the
sandbox's files below `$PLATOON_SANDBOX_ROOT`.

## How a task is played and graded

The agent acts only through the `textcraft` command (`craft`, `info`, `inventory`, `finish`; see any
task's `instruction.md`), which runs the game file `textcraft_game.py` on the files in `/app/textcraft`.
Each command appends one record to `/app/textcraft/actions.jsonl`; that log is the whole state.  The
verifier (`tests/test.sh`) replays the log in a container of its own, from trusted copies of the game
file, `recipes.json` and `task.json` kept in `tests/`, and writes `/logs/verifier/reward.json` (`1.0` or `0.0`) and
`textcraft-verdict.json` (the reason).  Only a log the game could have written scores: well-formed and
numbered records, each craft's `ok` flag equal to what the rules decide, no record after `finish`, a
plain file (no symbolic link on its path, 32 MiB at most), ending in `finish` with a message once every
target is crafted.

## Files

- `tasks/<name>/`: `instruction.md`, `task.toml`, `environment/`, `tests/`, `solution/`.
- `registry.json`: the Harbor datasets, one per split.
- `task-index.json`: per task its path, split, difficulty, depth, gold craft count, agent timeout, goal,
  targets, source ids and `digest` (Harbor's content hash of the task directory).
- `splits.json`: task names per split and per split-difficulty (`train`, `train-medium`, `val-hard`, ...).

## License

MIT.  The tasks and recipes come from the MIT-licensed `platoon-textcraft` 0.3.0 (see `LICENSE`).
"""


def card_bytes(tasks: Mapping[str, Sequence[Mapping[str, Any]]], repo_id: str = REPO_ID) -> bytes:
    table = "\n".join(
        "| %s | %s | %s |" % (split, "{:,}".format(len(rows)), _difficulty_counts(rows)) for split, rows in tasks.items()
    )
    total = "{:,}".format(sum(len(rows) for rows in tasks.values()))
    return CARD.format(total=total, table=table, repo_id=repo_id).encode("utf-8")


# ------------------------------------------------------------------------------------------------- writer


def _check_out(out: Path, force: bool) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ExportError("%s exists and is not a directory" % out)
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError("%s is not empty (use --force to replace it)" % out)


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class TreeWriter:
    """Writes task directories with exact modes; shared files become hard links to their first copy.

    ``chmod`` runs only when the process umask would strip a mode bit (modes must not depend on it).
    """

    TASK_DIRECTORIES = ("environment", "tests", "solution")

    def __init__(self) -> None:
        self.fix_modes = bool(_current_umask() & 0o755)
        self.originals: Dict[str, str] = {}  # shared file name -> the first copy written

    def mkdir(self, path: str) -> None:
        os.mkdir(path, 0o755)
        if self.fix_modes:
            os.chmod(path, 0o755)

    def write(self, path: str, data: bytes, mode: int) -> None:
        # "xb": a fresh file only, never one already staged; buffered writes retry short writes.
        with open(path, "xb") as handle:
            handle.write(data)
        os.chmod(path, mode)

    def task(self, task_dir: str, files: Sequence[TaskFile], link: bool = True) -> None:
        """Write one task directory.  With ``link``, shared files link to the first copy of their name."""
        self.mkdir(task_dir)
        for name in self.TASK_DIRECTORIES:
            self.mkdir(os.path.join(task_dir, name))
        for item in files:
            path = os.path.join(task_dir, item.path)
            # A shared file's bytes depend only on its name (the game, the recipes, test.sh).
            name = os.path.basename(item.path)
            first = self.originals.get(name) if link and item.shared else None
            if link and item.same_as:
                os.link(os.path.join(task_dir, item.same_as), path)
            elif first is not None:
                os.link(first, path)
            else:
                self.write(path, item.data, item.mode)
                if link and item.shared:
                    self.originals.setdefault(name, path)


def write_task(task_dir: Path, files: Iterable[TaskFile]) -> None:
    """Write one task's files into the new directory ``task_dir`` (plain copies, no hard links)."""
    TreeWriter().task(str(task_dir), list(files), link=False)


def export_harbor(
    out: Path,
    data: store.Records,
    splits: Optional[Sequence[str]] = None,
    limit: Optional[int] = None,
    force: bool = False,
    progress: bool = False,
) -> Dict[str, List[Mapping[str, Any]]]:
    """Write the Harbor export of ``data`` to ``out``; returns the exported rows per split.

    Every gold solution is played (in a second process while the files are built in memory) before
    anything is written.  The tree is then staged in a sibling directory and renamed to ``out`` once
    complete: on any error nothing changes at ``out``.
    """
    from tqdm import tqdm

    out = Path(out)
    _check_out(out, force)
    tasks = select_tasks(data.tasks, splits, limit)
    world = game.World(data.world_document)
    rows = [row for split_rows in tasks.values() for row in split_rows]
    shared = SharedFiles(data.recipes_bytes, game_bytes())
    wait_for_gold = check_gold_in_background(world, rows)  # on the other core, while the files are built
    built = []
    digests = {}
    for row in tqdm(rows, desc="building Harbor tasks", unit="task", disable=not progress):
        files = shared.files(row)
        digests[row["name"]] = shared.digest(files)
        built.append((row["name"], files))
    wait_for_gold()  # raises ExportError before anything is written
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".%s-staging-" % out.name, dir=out.parent))
    try:
        writer = TreeWriter()
        os.chmod(staging, 0o755)
        tasks_dir = os.path.join(staging, "tasks")
        writer.mkdir(tasks_dir)
        # One thread, in order: measured faster than a thread pool here (the GIL hand-offs cost more than
        # the file system calls they overlap).
        for name, files in tqdm(built, desc="writing Harbor tasks", unit="task", disable=not progress):
            writer.task(os.path.join(tasks_dir, name), files)
        for name, payload in root_files(data, tasks, digests).items():
            writer.write(os.path.join(staging, name), payload, FILE_MODE)
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return tasks


def root_files(data: store.Records, tasks: Mapping[str, Sequence[Mapping[str, Any]]], digests: Mapping[str, str]) -> Dict[str, bytes]:
    return {
        "LICENSE": data.license_bytes,
        "README.md": card_bytes(tasks),
        "registry.json": registry_bytes(tasks),
        "splits.json": splits_bytes(tasks),
        "task-index.json": task_index_bytes(tasks, digests),
    }


def _replace(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``; an existing ``out`` is moved aside first and removed after."""
    aside = None
    if out.exists():
        aside = Path(tempfile.mkdtemp(prefix=".%s-old-" % out.name, dir=out.parent))
        os.rename(out, aside / "old")
    try:
        os.rename(staging, out)
    except BaseException:
        if aside is not None:
            os.rename(aside / "old", out)
        raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


# ------------------------------------------------------------------------------------------------- the CLI


def cmd_export_harbor(args: argparse.Namespace) -> int:
    from .cli import UserError

    splits = [name for part in args.splits or [] for name in part.split(",") if name] or None
    data = store.load_records(Path(args.data_dir))
    try:
        if args.index_only:
            write_index_files(Path(args.out), data, splits, args.limit)
            print("wrote %s to %s" % (", ".join(ROOT_INDEX_FILES), args.out))
            return 0
        tasks = export_harbor(Path(args.out), data, splits, args.limit, args.force, progress=not args.quiet)
    except ExportError as error:
        raise UserError(str(error))
    total = sum(len(rows) for rows in tasks.values())
    print("wrote %d Harbor tasks (%s) to %s" % (total, ", ".join("%s %d" % (k, len(v)) for k, v in tasks.items()), args.out))
    return 0


def write_index_files(
    out: Path, data: store.Records, splits: Optional[Sequence[str]] = None, limit: Optional[int] = None
) -> List[str]:
    """Write (or overwrite) only the three root index files into the existing directory ``out``.

    The repository root keeps these, so ``python -m textcraft_synth build`` calls this after ``data/``.
    """
    if not out.is_dir():
        raise ExportError("%s is not a directory" % out)
    for name, payload in root_index_files(data, splits, limit).items():
        temporary = out / (".%s.tmp" % name)
        temporary.write_bytes(payload)
        os.replace(temporary, out / name)
    return list(ROOT_INDEX_FILES)


def register_cli(commands: Any) -> None:
    """Add ``export-harbor`` to the ``python -m textcraft_synth`` subcommands."""
    sub = commands.add_parser("export-harbor", help="write every task as a Harbor task directory, with the index files and a card")
    sub.add_argument("out", help="the directory to write (must be absent or empty unless --force)")
    sub.add_argument("--splits", nargs="+", metavar="SPLIT", help="splits to export, e.g. train val or train,val (default: all)")
    sub.add_argument("--limit", type=int, help="keep only the first N tasks of every split")
    sub.add_argument("--force", action="store_true", help="overwrite OUT even when it already holds files")
    sub.add_argument(
        "--index-only",
        action="store_true",
        help="write only %s into the existing directory OUT (the repository root keeps a copy)" % ", ".join(ROOT_INDEX_FILES),
    )
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub.add_argument("--data-dir", default=str(store.DEFAULT_DATA_DIR), help="the data/ directory (default: %(default)s)")
    sub.set_defaults(run=cmd_export_harbor)
