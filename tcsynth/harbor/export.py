"""The export: the records' tasks as a Harbor task tree, plus its index files, card and licence.

:func:`export_harbor` plays every gold solution (in the background), renders every task's files in memory,
then has :mod:`.writer` put the tree in place at once.  :func:`write_index_files` writes only the three
index files, which the repository root keeps.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import background, records, store
from .columns import GoldColumns, command_texts, commands_text, gold_failure
from .digest import FileDigests
from .files import SharedBytes, gold_commands, row_gold, task_files
from .gold import first_failure
from .index import card_bytes, index_files
from .layout import CARD_FILE, LICENSE_FILE, ExportError
from .writer import check_target, write_tree

Rows = Dict[str, List[Mapping[str, Any]]]


def select_tasks(tasks: Mapping[str, Sequence[Mapping[str, Any]]], splits: Optional[Sequence[str]] = None, limit: Optional[int] = None) -> Rows:
    """The rows to export: the chosen splits in the records' order, the first ``limit`` of each."""
    chosen = list(splits) if splits else list(tasks)
    unknown = [split for split in chosen if split not in tasks]
    if unknown:
        raise ExportError("unknown split %s (the splits are %s)" % (", ".join(unknown), ", ".join(tasks)))
    if limit is not None and limit < 1:
        raise ExportError("--limit must be at least 1, got %d" % limit)
    return {split: list(tasks[split][:limit] if limit else tasks[split]) for split in tasks if split in chosen}


class Selection:
    """The rows an export writes and each one's gold solution as ``solve.sh`` needs it.

    From records with Arrow tables the rows are read without their gold trajectories (the costly column
    to turn into Python), and the gold command lines are built column-wise (:mod:`.columns`); otherwise
    from the rows themselves.  The bytes are the same either way.
    """

    def __init__(self, data: store.Records, splits: Optional[Sequence[str]] = None, limit: Optional[int] = None) -> None:
        self.world = data.world
        self.columns: Dict[str, Any] = {}
        if data.tables is None:
            self.tasks = select_tasks(data.tasks, splits, limit)
            self.gold = {row["name"]: row_gold(row) for rows in self.tasks.values() for row in rows}
            return

        chosen = select_tasks({split: range(table.num_rows) for split, table in data.tables.items()}, splits, limit)
        light = [name for name in records.TASK_COLUMNS if name != "gold_trajectory"]
        self.tasks, self.gold = {}, {}
        for split, positions in chosen.items():
            table = data.tables[split].slice(0, len(positions))
            rows = store.table_rows(table.select(light))
            gold = self.columns[split] = GoldColumns(table)
            texts = command_texts(gold)
            if texts is None:  # a name the shell must quote: format the lines row by row
                texts = ["\n".join(gold_commands(row)[:-1]) for row in data.tasks[split][: len(positions)]]
            for number, row in enumerate(rows):
                self.gold[row["name"]] = (gold.crafts(number), commands_text(texts[number], row))
            self.tasks[split] = rows

    @property
    def rows(self) -> List[Mapping[str, Any]]:
        return [row for rows in self.tasks.values() for row in rows]

    @property
    def crafts(self) -> Dict[str, int]:
        return {name: gold[0] for name, gold in self.gold.items()}

    def gold_failure(self) -> Optional[str]:
        """The first gold solution that fails in the engine, as a message, or None."""
        if not self.columns:
            return first_failure(self.world, self.rows)
        for split, gold in self.columns.items():
            problem = gold_failure(self.world, self.tasks[split], gold)
            if problem:
                return problem
        return None


def task_digests(data: store.Records, tasks: Rows, shared: Optional[SharedBytes] = None) -> Dict[str, str]:
    """Each exported task's content hash, by name."""
    shared = shared or SharedBytes(data.recipes_bytes, data.world_name)
    digests = FileDigests()
    return {row["name"]: digests.task_digest(task_files(row, shared)) for rows in tasks.values() for row in rows}


def root_index_files(data: store.Records, splits: Optional[Sequence[str]] = None, limit: Optional[int] = None) -> Dict[str, bytes]:
    """``registry.json``, ``task-index.json`` and ``splits.json`` of an export, without writing a task."""
    selection = Selection(data, splits, limit)
    shared = SharedBytes(data.recipes_bytes, data.world_name)
    digests = FileDigests()
    names = {row["name"]: digests.task_digest(task_files(row, shared, selection.gold[row["name"]])) for row in selection.rows}
    return index_files(selection.tasks, names, data.world_name, selection.crafts)


def export_harbor(
    out: Path,
    data: store.Records,
    splits: Optional[Sequence[str]] = None,
    limit: Optional[int] = None,
    force: bool = False,
    progress: bool = False,
    repo_id: str = store.HUB_REPO_ID,
) -> Rows:
    """Write the Harbor export of ``data`` to ``out``; returns the exported rows per split.

    Every gold solution is played (in a second process while the files are built and staged beside
    ``out``) before the staged tree replaces ``out``; on any error nothing changes at ``out``.
    """
    out = check_target(out, force)
    selection = Selection(data, splits, limit)
    tasks = selection.tasks
    rows = selection.rows
    if len(rows) >= 256:  # enough rows to pay for a second process
        wait_for_gold = background.start(selection.gold_failure, what="the process checking the gold solutions")
    else:
        problem = selection.gold_failure()
        wait_for_gold = lambda: problem  # noqa: E731
    shared = SharedBytes(data.recipes_bytes, data.world_name)
    digests = FileDigests()
    built = []
    names: Dict[str, str] = {}
    for row in rows:
        files = task_files(row, shared, selection.gold[row["name"]])
        names[row["name"]] = digests.task_digest(files)
        built.append((row["name"], files))
    root = dict(index_files(tasks, names, data.world_name, selection.crafts))
    root[CARD_FILE] = card_bytes(tasks, data.world_name, repo_id)
    root[LICENSE_FILE] = data.license_bytes

    def gold_must_win() -> None:
        problem = wait_for_gold()
        if problem:
            raise ExportError(problem)  # the staged tree is removed; nothing changes at out

    try:
        write_tree(out, built, root, progress=progress, total=len(built), before_swap=gold_must_win)
    except BaseException:
        wait_for_gold()  # never leave the checking process behind
        raise
    return tasks


def write_index_files(out: Path, data: store.Records, splits: Optional[Sequence[str]] = None, limit: Optional[int] = None) -> List[str]:
    """Write (or overwrite) only the three root index files into the existing directory ``out``."""
    return write_root_files(out, root_index_files(data, splits, limit))


def write_root_files(out: Path, files: Mapping[str, bytes]) -> List[str]:
    """Write (or overwrite) ``files`` ({name: bytes}) into the existing directory ``out``, each atomically."""
    out = Path(out)
    if not out.is_dir():
        raise ExportError("%s is not a directory" % out)
    for name, payload in files.items():
        temporary = out / (".%s.tmp" % name)
        try:
            temporary.write_bytes(payload)
            os.replace(temporary, out / name)
        except OSError as error:
            raise ExportError("cannot write %s: %s" % (out / name, error.strerror or error))
    return list(files)
