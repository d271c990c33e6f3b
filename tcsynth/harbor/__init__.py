"""The Harbor export: every task as a Harbor task directory, plus the dataset's index files and card.

Layout written by :func:`export_harbor` (SPEC §3)::

    OUT/registry.json  task-index.json  splits.json  LICENSE  README.md  .textcraft-synth-export
    OUT/tasks/<name>/instruction.md              the game, the goal and the textcraft commands
    OUT/tasks/<name>/task.toml                   Harbor's task config
    OUT/tasks/<name>/environment/Dockerfile      the agent's image: Python, tmux, the textcraft command
    OUT/tasks/<name>/environment/{textcraft_game.py, recipes.json, task.json}
    OUT/tasks/<name>/tests/{test.sh, Dockerfile, textcraft_game.py, recipes.json, task.json}
    OUT/tasks/<name>/solution/solve.sh           the gold crafts as textcraft commands, then finish

``textcraft_game.py`` is the bytes of :mod:`tcsynth.game` itself: the same file is the in-container command
and the verifier.  The modules, each with one job, in the order data flows through them:

- :mod:`.layout`: file names, container paths, limits, modes, and the template renderer (``templates/``);
- :mod:`.files`: one task's files as pure functions of its row;
- :mod:`.digest`: Harbor's content hash, by path;
- :mod:`.index`: ``registry.json``, ``task-index.json``, ``splits.json`` and the card;
- :mod:`.columns`: the gold trajectories read column by column, for the ``solve.sh`` lines and the gold check;
- :mod:`.gold`: every gold solution played before the tree is put in place;
- :mod:`.writer`: the tree on disk (modes, hard links within one side, all or nothing);
- :mod:`.export`: the export itself; :mod:`.check`: ``verify-export``.
"""

from .digest import FileDigests, directory_digest, digest_of, is_hashed
from .check import verify_export
from .export import export_harbor, root_index_files, select_tasks, task_digests, write_index_files, write_root_files
from .files import SharedBytes, agent_timeout_sec, game_bytes, gold_commands, task_files
from .index import card_bytes, index_files
from .layout import (
    EXPORT_MARKER,
    GAME_FILE,
    GAME_DIR,
    LOG_PATH,
    RECIPES_FILE,
    ROOT_INDEX_FILES,
    TASK_FILE,
    ExportError,
    TaskFile,
)
from .writer import write_task

__all__ = [
    "EXPORT_MARKER",
    "GAME_DIR",
    "GAME_FILE",
    "LOG_PATH",
    "RECIPES_FILE",
    "ROOT_INDEX_FILES",
    "TASK_FILE",
    "ExportError",
    "FileDigests",
    "SharedBytes",
    "TaskFile",
    "agent_timeout_sec",
    "card_bytes",
    "digest_of",
    "directory_digest",
    "export_harbor",
    "game_bytes",
    "gold_commands",
    "index_files",
    "is_hashed",
    "root_index_files",
    "select_tasks",
    "task_digests",
    "task_files",
    "write_index_files",
    "write_root_files",
    "verify_export",
    "write_task",
]
