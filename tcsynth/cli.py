"""``python -m textcraft_synth SUBCOMMAND``: the command line, on top of everything else.

Each subcommand parses its arguments, checks every one of them before anything is written, calls the
package, and prints.  No other module imports this one.  User mistakes (a missing file, a bad hash, an
unknown task, an output that cannot be written) end in one ``error:`` line and exit status 1, never a
traceback; ``--help`` of each subcommand lists its options.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, NoReturn, Optional

from . import configs, game, records, store
from .errors import UserError

EXIT_BROKEN_PIPE = 141  # what a shell reports for a writer killed by SIGPIPE (`... | head`)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _data_dir(args: argparse.Namespace) -> Path:
    """The data directory a command reads: ``--data-dir``, else the checkout's, else the Hub dataset's."""
    return store.resolve_data_dir(Path(args.data_dir) if args.data_dir else None)


def _writable_directory(path: Path, what: str) -> Path:
    """``path`` if it is an existing directory this process may write into, else :class:`UserError`."""
    if not path.is_dir():
        raise UserError("%s %s is not a directory" % (what, path))
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError("%s %s is not writable" % (what, path))
    return path


# --------------------------------------------------------------------------------------------- the data


def cmd_build_data(args: argparse.Namespace) -> int:
    from .build import build_data

    written = build_data(Path(args.source), Path(args.data_dir or store.DEFAULT_DATA_DIR), log=_log if args.verbose else None, progress=not args.quiet)
    print("built %d files in %s from %s" % (len(written), args.data_dir or store.DEFAULT_DATA_DIR, args.source))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """The main job: every product from the records in data/ (the configs, the root index files, Harbor)."""
    from . import harbor
    from .build import config_names, version_mismatches, write_data

    data_dir = Path(args.data_dir or store.DEFAULT_DATA_DIR)
    # Every argument is checked before anything is written.  The index files belong beside data/.
    index_dir = _writable_directory(Path(args.index_dir) if args.index_dir else data_dir.parent, "--index-dir")
    if args.harbor:
        harbor.writer.check_target(Path(args.harbor), args.force)
    for mismatch in version_mismatches():
        _log("note: %s; the Parquet files may not match the committed bytes (pip install '.[build]')" % mismatch)
    data = store.load_records(data_dir)
    written = write_data(data, data_dir, log=_log if args.verbose else None, progress=not args.quiet, names=config_names(data_dir), index_dir=index_dir)
    print("rebuilt %d files in %s from its records" % (len(written), data_dir))
    print("wrote %s to %s" % (", ".join(harbor.ROOT_INDEX_FILES), index_dir))
    if args.harbor:
        tasks = harbor.export_harbor(Path(args.harbor), data, force=args.force, progress=not args.quiet)
        print("wrote %d Harbor tasks to %s" % (sum(map(len, tasks.values())), args.harbor))
    return 0


# ------------------------------------------------------------------------------------------ play, replay


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
    except (ValueError, RecursionError) as error:
        raise UserError("%s: not JSON or JSON Lines (%s)" % (path, error))
    return calls


def cmd_replay(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    row = store.find_row(store.load_records(data_dir), args.task)
    calls = records.gold_tool_calls(row) if args.gold else read_calls(args.calls)
    verdict = game.replay(store.load_world(data_dir), records.engine_task(row), calls)
    if not args.quiet:
        for number, observation in enumerate(verdict.observations, 1):
            print("[%d] %s" % (number, observation))
    print(json.dumps(dict(task=row["name"], **verdict.as_dict())))
    return 0 if verdict.success else 1


def cmd_sft(args: argparse.Namespace) -> int:
    from . import sft

    data_dir = _data_dir(args)
    data = store.load_records(data_dir)
    world = store.load_world(data_dir)
    rows = [store.find_row(data, wanted) for wanted in args.task]  # every name checked before printing
    for row in rows:
        rendered = sft.sft_row(row, world, parallel=not args.one_call_per_turn)
        if not args.tools:
            del rendered["tools"]
        sys.stdout.write(json.dumps(rendered, indent=args.indent) + "\n")
    return 0


# ------------------------------------------------------------------------------------------------- harbor


def _splits(values: Optional[List[str]]) -> Optional[List[str]]:
    return [name for part in values or [] for name in part.split(",") if name] or None


def cmd_export_harbor(args: argparse.Namespace) -> int:
    from . import harbor

    data = store.load_records(_data_dir(args))
    if args.index_only:
        harbor.write_index_files(Path(args.out), data, _splits(args.splits), args.limit)
        print("wrote %s to %s" % (", ".join(harbor.ROOT_INDEX_FILES), args.out))
        return 0
    tasks = harbor.export_harbor(Path(args.out), data, _splits(args.splits), args.limit, args.force, progress=not args.quiet)
    total = sum(len(rows) for rows in tasks.values())
    print("wrote %d Harbor tasks (%s) to %s" % (total, ", ".join("%s %d" % (k, len(v)) for k, v in tasks.items()), args.out))
    return 0


def cmd_verify_export(args: argparse.Namespace) -> int:
    from . import harbor

    checked, problems = harbor.verify_export(Path(args.dir))
    for problem in problems:
        print(problem)
    print("%d tasks checked, %d problem(s)" % (checked, len(problems)))
    return 1 if problems else 0


def _counts_option(text: str) -> Any:
    """``--counts val=10,10,10,10``: one split's tasks per difficulty, easy to extreme."""
    split, _, numbers = text.partition("=")
    parts = numbers.split(",")
    if split not in records.SPLITS or len(parts) != len(records.DIFFICULTIES):
        raise argparse.ArgumentTypeError("expected SPLIT=%s with SPLIT one of %s" % (",".join("N" for _ in records.DIFFICULTIES), ", ".join(records.SPLITS)))
    try:
        return split, dict(zip(records.DIFFICULTIES, (int(part) for part in parts)))
    except ValueError:
        raise argparse.ArgumentTypeError("counts must be whole numbers: %r" % numbers)


def cmd_generate_world(args: argparse.Namespace) -> int:
    from . import build, generate

    out = build.check_dataset_target(Path(args.out), args.force)
    arguments = ["--seed %d" % args.seed]
    sizes: Dict[str, Any] = {}
    if args.train is not None:
        sizes["train"] = args.train
        arguments.append("--train %d" % args.train)
    if args.val is not None:
        sizes["val"] = args.val
        arguments.append("--val %d" % args.val)
    if args.counts:
        sizes["per_difficulty"] = dict(args.counts)
        arguments += ["--counts %s=%s" % (split, ",".join(map(str, counts.values()))) for split, counts in args.counts]
    if args.recursive:
        arguments.append("--recursive")
    names = build.config_names(optional=args.recursive)
    document = generate.generate_world(args.seed)
    tasks = generate.generate_tasks(document, args.seed, **sizes)
    rows = {split: records.rows_from_source_lines(split, lines, document["name"]) for split, lines in tasks.items()}
    data = store.Records(rows, generate.world_json_bytes(document), store.PACKAGED_LICENSE.read_bytes())
    build.write_dataset(out, data, build.world_card(data, " ".join(arguments), names), progress=not args.quiet, names=names)
    total = sum(len(split_rows) for split_rows in rows.values())
    print("wrote world %s (%d items, %d tasks) to %s; use it with --data-dir %s" % (data.world_name, len(data.world.recipes) + len(data.world.base_items), total, out, out / "data"))
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from . import publish

    staged, commit = publish.publish(
        args.repo_id,
        stage_dir=Path(args.stage) if args.stage else None,
        dry_run=args.dry_run,
        revision=args.revision,
        create_pr=args.create_pr,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        force=args.force,
        delete_missing=args.delete_missing,
        progress=not args.quiet,
    )
    print("staged %s" % staged.summary())
    if commit is not None:
        print("uploaded to %s: %s" % (args.repo_id, getattr(commit, "commit_url", None) or getattr(commit, "pr_url", None) or commit))
    return 0


# --------------------------------------------------------------------------------------------- evaluation


def _agent_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The chosen agent's options as given on the command line; options of other agents are refused."""
    from .agents import AGENTS

    declared = {option.name: option for option in getattr(AGENTS[args.agent], "OPTIONS", ())}
    options: Dict[str, Any] = {}
    for name in _ALL_AGENT_OPTIONS:
        value = getattr(args, name)
        if value is _UNSET:
            continue
        if name not in declared:
            raise UserError("--%s is not an option of the %s agent" % (name.replace("_", "-"), args.agent))
        options[name] = value
    missing = [option.flag for option in declared.values() if option.required and option.name not in options]
    if missing:
        raise UserError("--agent %s needs %s" % (args.agent, ", ".join(missing)))
    return options


def cmd_eval(args: argparse.Namespace) -> int:
    from . import eval_dir, evaluate

    spec = evaluate.AgentSpec(args.agent, tuple(sorted(_agent_options(args).items())))
    try:
        spec.build()  # options the agent refuses are the user's to fix
    except ValueError as error:
        raise UserError(str(error))
    request = evaluate.EvalRequest(
        spec=spec,
        split=args.split,
        config=args.config,
        protocol=evaluate.Protocol(max_steps=args.max_steps, rollouts=args.rollouts, seed=args.seed),
        limit=args.limit,
        workers=args.workers,
        concurrency=args.concurrency,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        record_turns=not args.no_turns,
    )
    out = Path(args.out)
    summary = eval_dir.run_into(request, out, force=args.force, resume=args.resume, progress=not args.quiet)
    overall = summary["overall"]
    print(
        "%s on %s/%s: %d/%d solved (%.1f%%, 95%% CI %.1f-%.1f), score %.1f -> %s"
        % (spec.name, args.config, args.split, overall["successes"], overall["episodes"], 100 * overall["success_rate"],
           100 * overall["ci95"][0], 100 * overall["ci95"][1], summary["score"], out)
    )
    if summary["aborted"]:
        reason, _ = summary["abort_reasons"][0]
        print("error: %d of %d episodes aborted (%s); see %s" % (summary["aborted"], overall["episodes"], reason, out / eval_dir.SUMMARY_MD_FILE), file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------------------- argument parsing


class _Unset:
    def __repr__(self) -> str:
        return "(unset)"


_UNSET = _Unset()
_ALL_AGENT_OPTIONS: List[str] = []


def _whole_number(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("not an integer: %r" % text)
        if value < minimum:
            raise argparse.ArgumentTypeError("must be an integer >= %d" % minimum)
        return value

    return parse


def _budget(text: str) -> int:
    """``--max-steps``: a turn budget, 0 (``tcsynth.env.NO_LIMIT``) for none."""
    return _whole_number(0)(text)


def _typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from an agent option's parser (its ``ValueError`` becomes a usage error)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error))

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _add_agent_options(sub: argparse.ArgumentParser) -> None:
    """One flag per option any agent declares (``OPTIONS``), grouped, defaults left to the agent."""
    from .agents import AGENTS

    group = sub.add_argument_group("agent options (each applies to the agents that declare it)")
    seen: Dict[str, Any] = {}
    for agent in AGENTS.values():
        for option in getattr(agent, "OPTIONS", ()):
            if option.name in seen:
                continue
            seen[option.name] = option
            _ALL_AGENT_OPTIONS.append(option.name)
            group.add_argument(option.flag, dest=option.name, type=_typed(option.type), default=_UNSET, help=option.help % {"default": option.default})
            if option.shorthand:
                flag, value = option.shorthand
                group.add_argument(flag, dest=option.name, action="store_const", const=value, help="the same as %s with every ready call in one turn" % option.flag)


def parser() -> argparse.ArgumentParser:
    from .agents import AGENTS

    top = argparse.ArgumentParser(prog="python -m textcraft_synth", description="TextCraft-Synth: build, play, verify, evaluate.")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def data_dir_option(sub: argparse.ArgumentParser, fixed: bool = False) -> None:
        where = "default: %s" % store.DEFAULT_DATA_DIR if fixed else "default: the checkout's data/, else %s from the Hub" % store.HUB_REPO_ID
        sub.add_argument("--data-dir", default=None, metavar="DIR", help="the dataset's data/ directory (%s)" % where)

    def quiet_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def task_argument(sub: argparse.ArgumentParser, **kwargs: Any) -> None:
        sub.add_argument("task", help="task name (textcraft-synth-val-medium-00000), env_task_id (val:0) or source_task_id", **kwargs)

    sub = commands.add_parser("build-data", help="import the source files into data/ (checks hashes and gold trajectories)")
    sub.add_argument("--source", required=True, help="directory with the source files (%s)" % ", ".join(records.SOURCE_SHA256))
    data_dir_option(sub, fixed=True)
    sub.add_argument("-v", "--verbose", action="store_true", help="list the files written")
    quiet_option(sub)
    sub.set_defaults(run=cmd_build_data, quick_exit=True, without_pandas=True)

    sub = commands.add_parser("build", help="rebuild every product from the records in data/")
    data_dir_option(sub, fixed=True)
    sub.add_argument("--index-dir", default=None, help="where to write registry.json, task-index.json, splits.json (default: the directory holding data/)")
    sub.add_argument("--harbor", metavar="DIR", help="also export every Harbor task to DIR (absent, empty or an earlier export)")
    sub.add_argument("--force", action="store_true", help="with --harbor: replace DIR even when it is not an earlier export")
    sub.add_argument("-v", "--verbose", action="store_true", help="list the files written")
    quiet_option(sub)
    sub.set_defaults(run=cmd_build, quick_exit=True, without_pandas=True)

    sub = commands.add_parser("replay", help="replay tool calls (or the gold trajectory) on a task and print the verdict")
    task_argument(sub)
    source = sub.add_mutually_exclusive_group(required=True)
    source.add_argument("--calls", help="JSON list or JSON Lines of tool calls or action-log records; - for stdin")
    source.add_argument("--gold", action="store_true", help="replay the task's gold trajectory")
    sub.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    data_dir_option(sub)
    sub.set_defaults(run=cmd_replay)

    sub = commands.add_parser("sft", help="print the SFT conversation of tasks (replayed through the engine)")
    task_argument(sub, nargs="+")
    sub.add_argument("--one-call-per-turn", action="store_true", help="one tool call per assistant turn (the sft-sequential form)")
    sub.add_argument("--tools", action="store_true", help="include the tool schemas")
    sub.add_argument("--indent", type=_whole_number(0), default=None, help="indent the JSON (default: one line per task)")
    data_dir_option(sub)
    sub.set_defaults(run=cmd_sft)

    sub = commands.add_parser("export-harbor", help="write every task as a Harbor task directory, with the index files and a card")
    sub.add_argument("out", help="the directory to write (absent, empty or an earlier export, unless --force)")
    sub.add_argument("--splits", nargs="+", metavar="SPLIT", help="splits to export, e.g. train val or train,val (default: all)")
    sub.add_argument("--limit", type=_whole_number(1), help="keep only the first N tasks of every split")
    sub.add_argument("--force", action="store_true", help="replace OUT even when it holds files that are not an earlier export")
    sub.add_argument("--index-only", action="store_true", help="write only registry.json, task-index.json and splits.json into the existing directory OUT")
    quiet_option(sub)
    data_dir_option(sub)
    sub.set_defaults(run=cmd_export_harbor, quick_exit=True)

    sub = commands.add_parser("verify-export", help="check a Harbor export against its task-index.json (every content hash) and registry.json")
    sub.add_argument("dir", help="the export's root directory")
    sub.set_defaults(run=cmd_verify_export)

    sub = commands.add_parser("publish", help="stage the complete Hub repository (with a fresh tasks/ export) and upload it (HfApi.upload_folder)")
    sub.add_argument("repo_id", help="the Hub dataset repository, e.g. apurvaga/textcraft-synth (it must exist)")
    sub.add_argument("--stage", metavar="DIR", help="where to stage the tree (default: a temporary directory, removed after the upload)")
    sub.add_argument("--dry-run", action="store_true", help="stage only (needs --stage); upload nothing")
    sub.add_argument("--revision", help="the branch to commit to (default: main)")
    sub.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing to the branch")
    sub.add_argument("--delete-missing", action="store_true", help="also delete files on the Hub that the new tree no longer has")
    sub.add_argument("--force", action="store_true", help="replace a --stage directory that is not an earlier stage")
    data_dir_option(sub, fixed=True)
    quiet_option(sub)
    sub.set_defaults(run=cmd_publish)

    sub = commands.add_parser("generate-world", help="generate a new world and task set with textcraft-synth@1's shape, as a complete dataset directory")
    sub.add_argument("--seed", type=int, required=True, help="the world's seed: the same seed gives the same bytes")
    sub.add_argument("--out", required=True, help="the dataset directory to write (absent, empty or an earlier one)")
    sub.add_argument("--train", type=_whole_number(0), default=None, help="train tasks (default: 2,522, split like textcraft-synth@1)")
    sub.add_argument("--val", type=_whole_number(0), default=None, help="val tasks (default: 632)")
    sub.add_argument("--counts", type=_counts_option, action="append", metavar="SPLIT=E,M,H,X", help="tasks of one split per difficulty (easy, medium, hard, extreme); repeatable")
    sub.add_argument("--recursive", action="store_true", help="also write the sft-recursive config (its trees of agents add about half a minute)")
    sub.add_argument("--force", action="store_true", help="replace OUT even when it holds files that are not a generated dataset")
    quiet_option(sub)
    sub.set_defaults(run=cmd_generate_world, quick_exit=True, without_pandas=True)

    sub = commands.add_parser("eval", help="run an agent on a split's tasks and write episodes and a summary")
    sub.add_argument("--agent", required=True, choices=sorted(AGENTS), help="the agent to run")
    sub.add_argument("--config", default=configs.DEFAULT_CONFIG, help="task config (%s; default: %%(default)s)" % ", ".join(configs.TASK_CONFIGS))
    sub.add_argument("--split", default="val", help="split (default: %(default)s)")
    sub.add_argument("--max-steps", type=_budget, default=None, help="turn budget per episode (default: the row's max_steps, 75; 0: no limit)")
    sub.add_argument("--rollouts", type=_whole_number(1), default=1, help="episodes per task (default: %(default)s)")
    sub.add_argument("--workers", type=_whole_number(1), default=1, help="worker processes, for CPU-bound agents (default: %(default)s)")
    sub.add_argument("--concurrency", type=_whole_number(1), default=1, metavar="N",
                     help="episodes in flight at once in this process, for agents that wait on a server (default: %(default)s; not with --workers)")
    sub.add_argument("--limit", type=_whole_number(1), default=None, help="only the first N tasks")
    sub.add_argument("--seed", type=int, default=0, help="base seed of the episodes (default: %(default)s)")
    sub.add_argument("--out", required=True, help="output directory (protocol.json, episodes.jsonl, summary.json, summary.md)")
    again = sub.add_mutually_exclusive_group()
    again.add_argument("--force", action="store_true", help="replace an earlier run in --out")
    again.add_argument("--resume", action="store_true", help="finish an earlier run in --out under the same protocol: keep its finished episodes, play the rest")
    sub.add_argument("--no-turns", action="store_true", help="leave each episode's turns out of episodes.jsonl (outcomes only)")
    _add_agent_options(sub)
    data_dir_option(sub)
    quiet_option(sub)
    sub.set_defaults(run=cmd_eval)
    return top


def _os_error_line(error: OSError) -> str:
    where = " ".join("%s" % name for name in (error.filename, error.filename2) if name)
    reason = error.strerror or errno.errorcode.get(error.errno or 0) or str(error)
    return "%s: %s" % (where, reason) if where else reason


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command; returns its exit status (for callers in this process)."""
    return _run(parser().parse_args(argv))


def entry(argv: Optional[List[str]] = None) -> NoReturn:
    """The process's entry point (``textcraft-synth``, ``python -m textcraft_synth``): run, then exit.

    The commands that hold every record (``build``, ``export-harbor``, ...) end with ``os._exit`` once their
    output is flushed: freeing millions of small objects one by one at interpreter exit took half a second
    and serves nothing (their files are closed and their child processes joined by then).
    """
    args = parser().parse_args(argv)
    if getattr(args, "without_pandas", False) and "pandas" not in sys.modules:
        sys.meta_path.insert(0, _WithoutPandas)
    code = _run(args)
    if getattr(args, "quick_exit", False):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):
            pass
        os._exit(code)
    sys.exit(code)


class _WithoutPandas:
    """A meta path finder under which ``import pandas`` fails.

    The commands that write Parquet never use pandas, but pyarrow imports it (~0.4 s, in each of the
    build's processes) only to ask whether a list of rows holds pandas objects.  Under this finder pyarrow
    behaves as if pandas were not installed, a configuration it supports.  Set in this process's entry
    point only, never by the library.
    """

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used by this command", name=name)
        return None


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except UserError as error:
        print("error: %s" % error, file=sys.stderr)
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as error:
        print("error: %s" % _os_error_line(error), file=sys.stderr)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return 1
