"""The gold trajectories read column by column from the records' Arrow tables, for a fast export.

Turning every gold step into Python dicts costs more than writing the whole task tree, and the export
needs only two things from them: each task's ``textcraft`` command lines (``solve.sh``) and the crafts to
play for the gold check.  :class:`GoldColumns` holds the steps as flat Python lists (one call per leaf
column), :func:`command_texts` builds every task's command lines with Arrow string kernels, and
:func:`gold_failure` plays the crafts from the flat lists.  Each gives what its row-wise counterpart
gives (:func:`tcsynth.harbor.files.gold_commands`, :func:`tcsynth.harbor.gold.check_gold`); the tests
hold them together.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence

from .. import game, records

if TYPE_CHECKING:
    import pyarrow as pa

# The names shlex.quote leaves as they are (its own test, anchored): such names need no quoting.
_SAFE_WORD = r"^[A-Za-z0-9_@%+=:,./-]+$"


def _flat(array: "pa.Array") -> "tuple":
    """``(values, offsets from 0)`` of a list array, whatever its slice offset."""
    offsets = array.offsets.to_pylist()
    base = offsets[0]
    return array.flatten(), [offset - base for offset in offsets]


def _fields(array: "pa.StructArray") -> dict:
    """A struct array's fields by name (``flatten`` honours the array's slice offset)."""
    return {array.type.field(i).name: child for i, child in enumerate(array.flatten())}


class GoldColumns:
    """The gold steps of a table's tasks as flat lists.

    ``steps[i]:steps[i + 1]`` are task ``i``'s steps; step ``j`` makes ``counts[j]`` of ``items[j]`` from
    ``parts[j]:parts[j + 1]`` of ``part_items``/``part_counts``.
    """

    def __init__(self, table: "pa.Table") -> None:
        steps, self.steps = _flat(table.column("gold_trajectory").combine_chunks())
        step_fields = _fields(steps)
        parts, self.parts = _flat(step_fields["ingredients"])
        part_fields = _fields(parts)
        self.item_array, self.count_array = step_fields["item"], step_fields["count"]
        self.part_item_array, self.part_count_array = part_fields["item"], part_fields["count"]
        self.items: List[str] = self.item_array.to_pylist()
        self.counts: List[int] = self.count_array.to_pylist()
        self.part_items: List[str] = self.part_item_array.to_pylist()
        self.part_counts: List[int] = self.part_count_array.to_pylist()

    def crafts(self, task: int) -> int:
        """How many gold crafts task ``task`` has."""
        return self.steps[task + 1] - self.steps[task]


def command_texts(gold: GoldColumns) -> Optional[List[str]]:
    """Each task's gold crafts as ``textcraft craft`` lines joined by newlines (no ``finish``), or None when
    a name needs shell quoting (the caller then formats them one by one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = pa.concat_arrays([gold.item_array.cast(pa.string()), gold.part_item_array.cast(pa.string())])
    if len(names) and not pc.all(pc.match_substring_regex(names, _SAFE_WORD)).as_py():
        return None
    string = pa.string()
    pairs = pc.binary_join_element_wise(gold.part_item_array, pc.cast(gold.part_count_array, string), "=")
    per_step = pc.binary_join(pa.ListArray.from_arrays(pa.array(gold.parts, pa.int32()), pairs), " ")
    head = pc.binary_join_element_wise(pa.scalar("textcraft craft"), gold.item_array, pc.cast(gold.count_array, string), " ")
    lines = pc.if_else(pc.equal(pc.binary_length(per_step), 0), head, pc.binary_join_element_wise(head, per_step, " "))
    texts = pc.binary_join(pa.ListArray.from_arrays(pa.array(gold.steps, pa.int32()), lines), "\n")
    return texts.to_pylist()


def commands_text(gold_text: str, row: Mapping[str, Any]) -> str:
    """The whole command block of ``solve.sh``: the gold lines, then ``textcraft finish``."""
    finish = "textcraft finish " + shlex.quote(records.finish_message(records.list_to_counts(row["target_items"])))
    return gold_text + "\n" + finish if gold_text else finish


def gold_failure(world: game.World, rows: Sequence[Mapping[str, Any]], gold: GoldColumns) -> Optional[str]:
    """The first task whose gold solution (what ``solve.sh`` runs) fails in the engine, as the message
    :func:`tcsynth.harbor.gold.check_gold` gives, or None.  ``rows[i]`` is task ``i`` of ``gold``."""
    items, counts, parts, part_items, part_counts = gold.items, gold.counts, gold.parts, gold.part_items, gold.part_counts
    for number, row in enumerate(rows):
        episode = game.Game.for_task(world, records.engine_task(row))
        call = episode.call
        for position, step in enumerate(range(gold.steps[number], gold.steps[number + 1]), 1):
            start, end = parts[step], parts[step + 1]
            arguments = {"ingredients": dict(zip(part_items[start:end], part_counts[start:end])), "target": [items[step], counts[step]]}
            answer = call("craft", arguments)
            if not game.craft_succeeded(answer):
                return "the gold solution of %s fails at craft %d: %s" % (row["name"], position, answer)
        call("finish", {"message": records.finish_message(records.list_to_counts(row["target_items"]))})
        verdict = game.judge(episode, gold.crafts(number) + 1, [])
        if not verdict.success:
            return "the gold solution of %s does not reach the goal: %s" % (row["name"], verdict.reason)
    return None
