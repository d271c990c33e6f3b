"""``python -m textcraft_synth SUBCOMMAND``: a thin argparse layer over the package.

User mistakes (a missing file, a bad hash, an unknown task) end in one ``error:`` line and a non-zero exit
status, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, List, Optional

from . import game, records, store


class UserError(Exception):
    """A problem with what the user asked for; printed as one line."""


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_build_data(args: argparse.Namespace) -> int:
    from .build import build_data

    written = build_data(Path(args.source), Path(args.data_dir), log=_log if args.verbose else None)
    print("built %d files in %s from %s" % (len(written), args.data_dir, args.source))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """The main job: every product from the records in data/ (the configs, the root index files, Harbor)."""
    from . import harbor
    from .build import BuildError, write_data

    try:
        data = store.load_records(Path(args.data_dir))
    except store.DataError as error:
        raise BuildError(str(error))
    written = write_data(data, Path(args.data_dir), log=_log if args.verbose else None, progress=not args.quiet)
    print("rebuilt %d files in %s from its records" % (len(written), args.data_dir))
    try:
        harbor.write_index_files(Path(args.index_dir), data)
        print("wrote %s to %s" % (", ".join(harbor.ROOT_INDEX_FILES), args.index_dir))
        if args.harbor:
            tasks = harbor.export_harbor(Path(args.harbor), data, force=True, progress=not args.quiet)
            print("wrote %d Harbor tasks to %s" % (sum(map(len, tasks.values())), args.harbor))
    except harbor.ExportError as error:
        raise UserError(str(error))
    return 0


def find_row(data_dir: Path, wanted: str) -> dict:
    """A task row by Harbor name (``textcraft-synth-val-easy-00003``), ``env_task_id`` or ``source_task_id``."""
    data = store.load_records(data_dir)
    for rows in data.tasks.values():
        for row in rows:
            if wanted in (row["name"], row["env_task_id"], row["source_task_id"]):
                return row
    raise UserError("no task named %r (try a name like textcraft-synth-val-easy-00003 or val:3)" % wanted)


def read_calls(path: str) -> List[Any]:
    """Tool calls from a JSON list, or JSON Lines (one call or action-log record a line); ``-`` is stdin."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UserError("cannot read %s: %s" % (path, error.strerror or error))
    except UnicodeDecodeError:
        raise UserError("%s is not UTF-8 text" % path)
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            calls = json.loads(stripped)
        else:
            calls = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except ValueError as error:
        raise UserError("%s: not JSON or JSON Lines (%s)" % (path, error))
    return calls


def cmd_replay(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    row = find_row(data_dir, args.task)
    calls = records.gold_tool_calls(row) if args.gold else read_calls(args.calls)
    world = game.World.from_file(data_dir / records.RECIPES_FILE)
    verdict = game.replay(world, records.engine_task(row), calls)
    if not args.quiet:
        for number, observation in enumerate(verdict.observations, 1):
            print("[%d] %s" % (number, observation))
    print(json.dumps(dict(task=row["name"], **verdict.as_dict())))
    return 0 if verdict.success else 1


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m textcraft_synth", description="TextCraft-Synth: build, play, verify.")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def data_dir_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--data-dir", default=str(store.DEFAULT_DATA_DIR), help="the data/ directory (default: %(default)s)")

    sub = commands.add_parser("build-data", help="import the source files into data/ (checks hashes and gold trajectories)")
    sub.add_argument("--source", required=True, help="directory with the source files (%s)" % ", ".join(records.SOURCE_SHA256))
    data_dir_option(sub)
    sub.add_argument("-v", "--verbose", action="store_true", help="list the files written")
    sub.set_defaults(run=cmd_build_data)

    sub = commands.add_parser("build", help="rebuild every product from the records in data/")
    data_dir_option(sub)
    sub.add_argument(
        "--index-dir", default=str(store.REPO_ROOT), help="where to write registry.json, task-index.json, splits.json (default: %(default)s)"
    )
    sub.add_argument("--harbor", metavar="DIR", help="also export every Harbor task to DIR (replacing it)")
    sub.add_argument("-v", "--verbose", action="store_true", help="list the files written")
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub.set_defaults(run=cmd_build)

    sub = commands.add_parser("replay", help="replay tool calls (or the gold trajectory) on a task and print the verdict")
    sub.add_argument("task", help="task name, env_task_id (val:3) or source_task_id")
    source = sub.add_mutually_exclusive_group(required=True)
    source.add_argument("--calls", help="JSON list or JSON Lines of tool calls or action-log records; - for stdin")
    source.add_argument("--gold", action="store_true", help="replay the task's gold trajectory")
    sub.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    data_dir_option(sub)
    sub.set_defaults(run=cmd_replay)

    # Each product module adds its own subcommands with `register_cli(commands)`.
    for module_name in _COMMAND_MODULES:
        importlib.import_module(module_name).register_cli(commands)
    return top


_COMMAND_MODULES = ("tcsynth.sft", "tcsynth.harbor", "tcsynth.evaluate")


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    from .build import BuildError

    try:
        return args.run(args)
    except (UserError, BuildError, store.DataError, records.SourceError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
