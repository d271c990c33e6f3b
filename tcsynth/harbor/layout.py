"""The facts of a Harbor task tree: file names, paths inside the container, limits, modes, the template renderer.

Every other module of :mod:`tcsynth.harbor` imports its names from here; the in-container facts (the log's
name, ``task.json``, ``recipes.json``, the verdict file) come from :mod:`tcsynth.game`, which the container
runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping

from .. import game, templating
from ..errors import UserError

GAME_FILE = "textcraft_game.py"  # tcsynth/game.py under the name it has in every task
GAME_SOURCE = Path(game.__file__)
TASK_FILE = game.TASK_FILE
RECIPES_FILE = game.RECIPES_FILE
GAME_DIR = "/app/textcraft"
LOG_PATH = GAME_DIR + "/" + game.LOG_NAME
# python:3.12-slim as the published tasks pin it: every task and verifier image starts from these bytes.
BASE_IMAGE = (
    "docker.io/library/python:3.12-slim@sha256:a6e34c598f2467ed0e9a8d349809fcd8b5c603269512df273a0bb1784edc11b1"
)
REGISTRY_VERSION = "1.0"
KEYWORDS = ("textcraft", "textcraft-synth", "crafting", "planning")
VERIFIER_TIMEOUT_SEC = 180.0
BUILD_TIMEOUT_SEC = 900.0
# The agent's time: a base plus a little per gold craft, in whole minutes.
AGENT_BASE_SEC = 600
AGENT_SEC_PER_CRAFT = 10
REGISTRY_FILE, TASK_INDEX_FILE, SPLITS_FILE = "registry.json", "task-index.json", "splits.json"
ROOT_INDEX_FILES = (REGISTRY_FILE, TASK_INDEX_FILE, SPLITS_FILE)
CARD_FILE, LICENSE_FILE = "README.md", "LICENSE"
TASKS_DIR = "tasks"
# Written at the root of every export, so a later export knows the directory is one of ours to replace.
EXPORT_MARKER = ".textcraft-synth-export"
FILE_MODE = 0o644
SCRIPT_MODE = 0o755
DIR_MODE = 0o755
# The task's root files and directories Harbor's content hash covers.
HASHED_ROOT_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
HASHED_DIRECTORIES = ("environment/", "tests/", "solution/", "steps/")
# The directories of a task, each written before its files.
TASK_DIRECTORIES = ("environment", "tests", "solution")
TEMPLATES = Path(__file__).resolve().parent / "templates"


class ExportError(UserError):
    """The export cannot be written: a bad option, an existing OUT, or a gold solution that fails."""


@dataclass(frozen=True)
class TaskFile:
    """One file of a task: its path inside the task directory, bytes and mode.

    ``shared`` files have the same bytes at the same path in every task (the game, the recipes,
    ``test.sh``); the writer makes them hard links to one copy per path, never across the agent's side
    (``environment/``) and the grader's (``tests/``).
    """

    path: str
    data: bytes
    mode: int = FILE_MODE
    shared: bool = False


_PIECES: Dict[str, List[str]] = {}


def render(name: str, values: Mapping[str, object]) -> str:
    """The Harbor template ``templates/<name>`` rendered with ``values`` (see :mod:`tcsynth.templating`).

    The same text as :func:`tcsynth.templating.render`; the template is split into text and placeholder
    names once, since an export renders four templates per task.
    """
    pieces = _PIECES.get(name)
    if pieces is None:
        pieces = _PIECES[name] = templating._PLACEHOLDER.split(templating.template_text(TEMPLATES / name))
    out = pieces[:]
    for position in range(1, len(out), 2):
        key = out[position]
        if key not in values:
            raise KeyError("template %s needs {{%s}}" % (name, key))
        out[position] = str(values[key])
    return "".join(out)
