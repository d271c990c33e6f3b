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

import functools
import shlex
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence

from .. import game, records

if TYPE_CHECKING:
    import pyarrow as pa

# The names shlex.quote leaves as they are (its own test, anchored): such names need no quoting.
_SAFE_WORD = r"^[A-Za-z0-9_@%+=:,./-]+$"


def _fields(array: "pa.StructArray") -> dict:
    """A struct array's fields by name (``flatten`` honours the array's slice offset)."""
    return {array.type.field(i).name: child for i, child in enumerate(array.flatten())}


class GoldColumns:
    """The gold steps of a table's tasks as flat lists (and the Arrow arrays they come from).

    ``steps[i]:steps[i + 1]`` are task ``i``'s steps; step ``j`` makes ``counts[j]`` of ``items[j]`` from
    ``parts[j]:parts[j + 1]`` of ``part_items``/``part_counts``.  The offsets are the arrays' own, so
    they index the arrays' unsliced values.
    """

    def __init__(self, table: "pa.Table") -> None:
        gold = table.column("gold_trajectory").combine_chunks()
        self.step_offsets, steps = gold.offsets, gold.values
        step_fields = _fields(steps)
        ingredients = step_fields["ingredients"]
        self.part_offsets, parts = ingredients.offsets, ingredients.values
        part_fields = _fields(parts)
        self.names = table.column("name").combine_chunks()
        self.item_array, self.count_array = step_fields["item"], step_fields["count"]
        self.part_item_array, self.part_count_array = part_fields["item"], part_fields["count"]
        self.steps: List[int] = self.step_offsets.to_pylist()
        self.parts: List[int] = self.part_offsets.to_pylist()

    # The names and counts as Python lists are for the gold check only, which runs in a second process:
    # made there, on first use.
    @functools.cached_property
    def items(self) -> List[str]:
        return self.item_array.to_pylist()

    @functools.cached_property
    def counts(self) -> List[int]:
        return self.count_array.to_pylist()

    @functools.cached_property
    def part_items(self) -> List[str]:
        return self.part_item_array.to_pylist()

    @functools.cached_property
    def part_counts(self) -> List[int]:
        return self.part_count_array.to_pylist()

    def crafts(self, task: int) -> int:
        """How many gold crafts task ``task`` has."""
        return self.steps[task + 1] - self.steps[task]


def _constant(like: "pa.Array", text: str) -> "pa.Array":
    """An array of ``text`` as long as ``like`` (a string array), made by an Arrow kernel: converting a
    Python value to Arrow (``pa.scalar``, ``pa.array``) would import pandas, half a second."""
    import pyarrow.compute as pc

    return pc.utf8_replace_slice(like, start=0, stop=1 << 30, replacement=text)


def command_texts(gold: GoldColumns) -> Optional[List[str]]:
    """Each task's gold crafts as ``textcraft craft`` lines joined by newlines (no ``finish``), or None when
    a name needs shell quoting or a step has no ingredients (the caller then formats them row by row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    string = pa.string()
    items, part_items = gold.item_array.cast(string), gold.part_item_array.cast(string)
    for names in (items, part_items):
        if len(names) and not pc.all(pc.match_substring_regex(names, _SAFE_WORD)).as_py():
            return None
    if any(end == start for start, end in zip(gold.parts, gold.parts[1:])):
        return None
    counts, part_counts = pc.cast(gold.count_array, string), pc.cast(gold.part_count_array, string)
    pairs = pc.binary_join_element_wise(part_items, part_counts, _constant(part_counts, "="))
    per_step = pc.binary_join(pa.ListArray.from_arrays(gold.part_offsets, pairs), _constant(items, " "))
    lines = pc.binary_join_element_wise(_constant(items, "textcraft craft"), items, counts, per_step, _constant(items, " "))
    texts = pc.binary_join(pa.ListArray.from_arrays(gold.step_offsets, lines), _constant(gold.names.cast(string), "\n"))
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
        craft = episode.craft  # what Game.call runs for a well-formed craft call, as solve.sh makes them
        for position, step in enumerate(range(gold.steps[number], gold.steps[number + 1]), 1):
            start, end = parts[step], parts[step + 1]
            answer = craft(dict(zip(part_items[start:end], part_counts[start:end])), [items[step], counts[step]])
            if not game.craft_succeeded(answer):
                return "the gold solution of %s fails at craft %d: %s" % (row["name"], position, answer)
        episode.finish(records.finish_message(records.list_to_counts(row["target_items"])))
        verdict = game.judge(episode, gold.crafts(number) + 1, [])
        if not verdict.success:
            return "the gold solution of %s does not reach the goal: %s" % (row["name"], verdict.reason)
    return None
