"""The export's self-check: every task's gold solution, as ``solve.sh`` plays it, must win in the engine.

Played in a forked process on the second core while the files are rendered, so it costs no wall time.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence

from .. import game, records
from .layout import ExportError


def check_gold(world: game.World, row: Mapping[str, Any]) -> None:
    """Play the task's gold solution (what ``solve.sh`` runs) with the engine; raise :class:`ExportError`
    unless every craft is accepted and ``finish`` succeeds."""
    verdict = game.replay(world, records.engine_task(row), records.gold_tool_calls(row))
    for number, answer in enumerate(verdict.observations[: len(row["gold_trajectory"])], 1):
        if not game.craft_succeeded(answer):
            raise ExportError("the gold solution of %s fails at craft %d: %s" % (row["name"], number, answer))
    if not verdict.success:
        raise ExportError("the gold solution of %s does not reach the goal: %s" % (row["name"], verdict.reason))


def first_failure(world: game.World, rows: Iterable[Mapping[str, Any]]) -> Optional[str]:
    """The first gold solution that fails, as an error message, or None when all reach their goal."""
    try:
        for row in rows:
            check_gold(world, row)
    except ExportError as error:
        return str(error)
    return None


def _worker(function: Callable[..., Any], args: Sequence[Any], connection: Any) -> None:
    try:
        connection.send(function(*args))
    finally:
        connection.close()


def in_background(function: Callable[..., Optional[str]], *args: Any) -> Callable[[], Optional[str]]:
    """Start ``function(*args)``; return a function that waits for it and returns its result (a message or None).

    Where ``fork`` exists and there is a second core, a forked process runs it (the arguments are shared
    copy-on-write, nothing is pickled but the result); elsewhere it runs right away.  Fork before starting
    threads.
    """
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods() or (os.cpu_count() or 1) < 2:
        result = function(*args)
        return lambda: result
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_worker, args=(function, args, sender), daemon=True)
    process.start()
    sender.close()

    outcome: List[Optional[str]] = []

    def wait() -> Optional[str]:
        if not outcome:  # the first call waits; later calls give the same answer
            try:
                outcome.append(receiver.recv())
            except EOFError:
                outcome.append("the process checking the gold solutions died (exit code %s)" % process.exitcode)
            finally:
                receiver.close()
                process.join()
        return outcome[0]

    return wait
