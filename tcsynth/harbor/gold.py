"""The export's self-check: every task's gold solution, as ``solve.sh`` plays it, must win in the engine.

Played in a forked process on the second core while the files are rendered, so it costs no wall time.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

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
