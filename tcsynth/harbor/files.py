"""One task's files, as pure functions of its row: same row, same bytes.

:func:`task_files` lists every file of a task directory (SPEC §3); the texts come from ``templates/``.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any, Dict, List, Mapping, Optional, Tuple

# A task's gold solution as solve.sh needs it: (number of crafts, the command lines joined by newlines).
Gold = Tuple[int, str]

from .. import game, records
from .layout import (
    AGENT_BASE_SEC,
    AGENT_SEC_PER_CRAFT,
    BASE_IMAGE,
    BUILD_TIMEOUT_SEC,
    GAME_DIR,
    GAME_FILE,
    GAME_SOURCE,
    KEYWORDS,
    LOG_PATH,
    RECIPES_FILE,
    SCRIPT_MODE,
    TASK_FILE,
    VERIFIER_TIMEOUT_SEC,
    TaskFile,
    render,
)


def agent_timeout_sec(row: Mapping[str, Any], crafts: Optional[int] = None) -> int:
    """600 s plus 10 s per gold craft, rounded up to a whole minute (``crafts``: the row's gold crafts,
    for a row read without its gold trajectory)."""
    seconds = AGENT_BASE_SEC + AGENT_SEC_PER_CRAFT * (len(row["gold_trajectory"]) if crafts is None else crafts)
    return int(math.ceil(seconds / 60.0)) * 60


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML, ``ensure_ascii`` keeps it 7-bit): ``json.dumps(text)``,
    through the string encoder it uses."""
    return json.encoder.encode_basestring_ascii(text)


_QUOTED: Dict[str, str] = {}  # item name -> the name quoted for the shell (names repeat across tasks)


def shell_word(word: str) -> str:
    """``word`` quoted for the shell when it needs it (``shlex.quote``, cached)."""
    quoted = _QUOTED.get(word)
    if quoted is None:
        quoted = _QUOTED[word] = shlex.quote(word)
    return quoted


def gold_commands(row: Mapping[str, Any]) -> List[str]:
    """The gold trajectory as ``textcraft`` command lines: totals, not crafts; then ``finish``."""
    lines = []
    for step in row["gold_trajectory"]:
        words = ["textcraft craft", shell_word(step["item"]), str(step["count"])]
        words.extend("%s=%d" % (shell_word(part["item"]), part["count"]) for part in step["ingredients"])
        lines.append(" ".join(words))
    message = records.finish_message(records.list_to_counts(row["target_items"]))
    lines.append("textcraft finish " + shlex.quote(message))
    return lines


def task_json_bytes(row: Mapping[str, Any], world: str, recipes_sha256: str) -> bytes:
    """``task.json`` exactly as SPEC §3 gives it (``indent=1``, ASCII, a final newline)."""
    text = '{\n "format": %s,\n "name": %s,\n "world": %s,\n "goal": %s,\n "target_items": %s,\n "initial_inventory": %s,\n "recipes_sha256": %s\n}\n' % (
        _string(game.TASK_FORMAT),
        _string(row["name"]),
        _string(world),
        _string(row["goal"]),
        _counts_json(row["target_items"]),
        _counts_json(row["initial_inventory"]),
        _string(recipes_sha256),
    )
    return text.encode("ascii")


# json.dumps(indent=...) runs the pure-Python encoder; task.json is simple enough to write directly, as the
# same text (strings through the encoder json.dumps uses for them, ASCII; ints as repr; two-space nesting).
_string = json.encoder.encode_basestring_ascii


def _counts_json(entries: Any) -> str:
    """``json.dumps({item: count}, indent=1)`` nested one level deep (as a value of task.json)."""
    if not entries:
        return "{}"
    return "{\n" + ",\n".join("  %s: %d" % (_string(entry["item"]), entry["count"]) for entry in entries) + "\n }"


def task_toml_bytes(row: Mapping[str, Any], world: str, crafts: Optional[int] = None) -> bytes:
    """``task.toml``: Harbor schema 1.4, the episode log as an artifact, the metadata and the limits."""
    metadata = [
        ("environment", toml_string(records.environment_id(world))),
        ("split", toml_string(row["split"])),
        ("difficulty", toml_string(row["difficulty"])),
        ("max_depth", str(row["max_depth"])),
        ("num_craft_steps", str(row["num_craft_steps"])),
        ("goal", toml_string(row["goal"])),
        ("source_task_id", toml_string(row["source_task_id"])),
        ("env_task_id", toml_string(row["env_task_id"])),
        ("env_split_task_id", toml_string(row["env_split_task_id"])),
    ]
    targets = records.targets_text(records.list_to_counts(row["target_items"]))
    description = "Craft %s in TextCraft-Synth (%s, crafting depth %d)" % (targets, row["difficulty"], row["max_depth"])
    suffix = records.task_suffix(row["split"], row["difficulty"], row["index"])
    lines = [
        'schema_version = "1.4"',
        "# The verifier replays this log; with a separate verifier Harbor hands it over as an artifact.",
        "artifacts = [%s]" % toml_string(LOG_PATH),
        "",
        "[task]",
        "name = %s" % toml_string("%s/%s" % (world, suffix)),
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
        "timeout_sec = %.1f" % agent_timeout_sec(row, crafts),
        "",
        "[environment]",
        'network_mode = "no-network"',
        "cpus = 1",
        "memory_mb = 2048",
        "gpus = 0",
        "build_timeout_sec = %.1f" % BUILD_TIMEOUT_SEC,
    ]
    return ("\n".join(lines) + "\n").encode("ascii")


_NAMES = dict(game_dir=GAME_DIR, game_file=GAME_FILE, recipes_file=RECIPES_FILE, task_file=TASK_FILE)


def instruction_bytes(row: Mapping[str, Any]) -> bytes:
    return render("instruction.md", dict(_NAMES, goal=row["goal"])).encode("utf-8")


def dockerfile_bytes(row: Mapping[str, Any], side: str, task_json_sha256: str) -> bytes:
    """The Dockerfile of ``side`` (``environment`` or ``tests``): one shared head, then the side's copies.

    Its first line names the task: image caches key on the Dockerfile's text.
    """
    values = dict(_NAMES, task_name=row["name"], task_json_sha256=task_json_sha256, base_image=BASE_IMAGE)
    return (render("Dockerfile.head", values) + render("Dockerfile." + side, values)).encode("ascii")


def test_sh_bytes() -> bytes:
    values = dict(_NAMES, log_path=LOG_PATH, verdict_file=game.VERDICT_FILE, log_relpath=LOG_PATH.lstrip("/"))
    return render("test.sh", values).encode("ascii")


def row_gold(row: Mapping[str, Any]) -> Gold:
    """``(crafts, command lines)`` of a row with its gold trajectory."""
    return len(row["gold_trajectory"]), "\n".join(gold_commands(row))


def solve_sh_bytes(row: Mapping[str, Any], gold: Optional[Gold] = None) -> bytes:
    crafts, commands = row_gold(row) if gold is None else gold
    values = dict(_NAMES, task_name=row["name"], crafts=crafts, commands=commands)
    return render("solve.sh", values).encode("utf-8")


def game_bytes() -> bytes:
    """The bytes of the engine file, which every task carries as ``textcraft_game.py``."""
    return GAME_SOURCE.read_bytes()


class SharedBytes:
    """The bytes every task carries (the game, the world, ``test.sh``), read and rendered once."""

    def __init__(self, recipes_bytes: bytes, world: str, game: bytes = b""):
        self.recipes = recipes_bytes
        self.recipes_sha256 = records.sha256_hex(recipes_bytes)
        self.game = game or game_bytes()
        self.test_sh = test_sh_bytes()
        self.world = world


def task_files(row: Mapping[str, Any], shared: SharedBytes, gold: Optional[Gold] = None) -> List[TaskFile]:
    """Every file of one task directory, sorted by path (``gold``: see :func:`row_gold`, for a row read
    without its gold trajectory)."""
    if gold is None:
        gold = row_gold(row)
    task_json = task_json_bytes(row, shared.world, shared.recipes_sha256)
    task_json_sha = records.sha256_hex(task_json)
    files = [
        TaskFile("instruction.md", instruction_bytes(row)),
        TaskFile("task.toml", task_toml_bytes(row, shared.world, gold[0])),
        TaskFile("environment/Dockerfile", dockerfile_bytes(row, "environment", task_json_sha)),
        TaskFile("environment/" + GAME_FILE, shared.game, shared=True),
        TaskFile("environment/" + RECIPES_FILE, shared.recipes, shared=True),
        TaskFile("environment/" + TASK_FILE, task_json),
        TaskFile("tests/test.sh", shared.test_sh, SCRIPT_MODE, shared=True),
        TaskFile("tests/Dockerfile", dockerfile_bytes(row, "tests", task_json_sha)),
        TaskFile("tests/" + GAME_FILE, shared.game, shared=True),
        TaskFile("tests/" + RECIPES_FILE, shared.recipes, shared=True),
        TaskFile("tests/" + TASK_FILE, task_json),
        TaskFile("solution/solve.sh", solve_sh_bytes(row, gold), SCRIPT_MODE),
    ]
    return sorted(files, key=lambda item: item.path)
