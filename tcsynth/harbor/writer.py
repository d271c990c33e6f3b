"""Writing a task tree to disk: exact modes whatever the umask, shared files as hard links, all or nothing.

A shared file (the same bytes at the same path in every task) is written once per path and hard-linked
from every other task.  Links never join the agent's side (``environment/``) and the grader's
(``tests/``): a sandbox copied with ``cp -a`` keeps hard links, and an agent that edits its own copy in
place must not edit the grader's.  The tree is built in a staging directory beside the target and swapped
in by :func:`tcsynth.store.swap_directory`, so the target is never half written.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from .. import background, store
from .layout import DIR_MODE, EXPORT_MARKER, FILE_MODE, TASK_DIRECTORIES, TASKS_DIR, ExportError, TaskFile

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MARKER_TEXT = b"A Harbor export written by textcraft-synth; export-harbor may replace this directory.\n"


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class TreeWriter:
    """Writes files and directories with exact modes; shared files become hard links to their first copy.

    ``chmod`` runs only when the process umask would strip a mode bit (modes must not depend on it).
    """

    def __init__(self, link_shared: bool = True) -> None:
        self.umask = _current_umask()
        self.fix_modes = bool(self.umask & 0o755)
        self.link_shared = link_shared
        self.originals: Dict[str, Tuple[str, bytes]] = {}  # task-relative path -> (first copy, its bytes)

    def mkdir(self, path: str) -> None:
        os.mkdir(path, DIR_MODE)
        if self.fix_modes:
            os.chmod(path, DIR_MODE)

    def write(self, path: str, data: bytes, mode: int = FILE_MODE) -> None:
        # O_EXCL: a fresh file only, never one already staged; a short write is continued from where it stopped.
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | _CLOEXEC, mode)
        try:
            written, total = 0, len(data)
            while written < total:
                written += os.write(descriptor, data[written:] if written else data)
        finally:
            os.close(descriptor)
        if self.umask & mode:
            os.chmod(path, mode)

    def task(self, task_dir: str, files: Sequence[TaskFile]) -> None:
        """Write one task directory (which must not exist)."""
        self.mkdir(task_dir)
        for name in TASK_DIRECTORIES:
            self.mkdir(os.path.join(task_dir, name))
        for item in files:
            path = os.path.join(task_dir, item.path)
            first = self.originals.get(item.path) if self.link_shared and item.shared else None
            if first is not None and (first[1] is item.data or first[1] == item.data):
                os.link(first[0], path)
                continue
            self.write(path, item.data, item.mode)
            if self.link_shared and item.shared and first is None:
                self.originals[item.path] = (path, item.data)


def write_task(task_dir: Path, files: Iterable[TaskFile]) -> None:
    """Write one task's files into the new directory ``task_dir`` (plain copies, no hard links)."""
    TreeWriter(link_shared=False).task(str(task_dir), list(files))


def check_target(out: Path, force: bool) -> Path:
    """The absolute export directory, refused if writing it could lose something.

    ``out`` may be absent, empty, or an earlier export (it holds :data:`EXPORT_MARKER`); anything else
    needs ``force``.  Never the current directory or one that contains it, the filesystem root, or a
    directory holding a ``data/`` folder (a checkout or a dataset), whatever ``force`` says.
    """
    out = Path(os.path.abspath(out))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ExportError("%s exists and is not a directory" % out)
    here = Path(os.path.abspath(os.getcwd()))
    if out == here or out in here.parents or out.parent == out:
        raise ExportError("%s is the current directory or above it; export into a directory of its own" % out)
    if (out / "data").is_dir() or (out / "textcraft_synth.py").exists():
        raise ExportError("%s looks like a checkout or a dataset (it has data/); export into a directory of its own" % out)
    if out.is_dir() and any(out.iterdir()) and not (out / EXPORT_MARKER).is_file() and not force:
        raise ExportError("%s is not empty and is not an earlier export (use --force to replace it)" % out)
    return out


# Below this many tasks one process writes them all (a fork costs more than it saves).
PARALLEL_WRITE_TASKS = 512


def _write_tasks(writer: TreeWriter, tasks_dir: str, tasks: Sequence[Tuple[str, Sequence[TaskFile]]], advance: Callable[[int], object]) -> None:
    """Write every task directory below ``tasks_dir``.

    File system calls dominate and a thread pool does not overlap them (measured: the GIL hand-offs cost
    more than they save), so where ``fork`` exists and there is a second core, a forked process writes the
    second half of the tasks while this one writes the first.  The first task is written before the fork,
    so both processes hard-link the shared files to the same first copies.
    """
    can_fork = hasattr(os, "fork") and background.cores() > 1 and len(tasks) >= PARALLEL_WRITE_TASKS
    if not can_fork:
        for name, files in tasks:
            writer.task(os.path.join(tasks_dir, name), files)
            advance(1)
        return
    first, rest = tasks[0], tasks[1:]
    writer.task(os.path.join(tasks_dir, first[0]), first[1])
    advance(1)
    half = len(rest) // 2
    child = os.fork()
    if child == 0:  # the child writes the second half and leaves at once (no cleanup of the parent's state)
        code = 0
        try:
            for name, files in rest[half:]:
                writer.task(os.path.join(tasks_dir, name), files)
        except BaseException:  # noqa: BLE001 - reported to the parent by the exit status
            code = 1
        os._exit(code)
    try:
        for name, files in rest[:half]:
            writer.task(os.path.join(tasks_dir, name), files)
            advance(2)
    finally:
        _, status = os.waitpid(child, 0)
    if status != 0:
        raise ExportError("the process writing the second half of the tasks failed (status %d)" % status)


def write_tree(
    out: Path,
    tasks: Iterable[Tuple[str, Sequence[TaskFile]]],
    root_files: Mapping[str, bytes],
    progress: bool = False,
    total: int = 0,
    before_swap: Optional[Callable[[], None]] = None,
) -> None:
    """Write ``out/tasks/<name>/...`` for every ``(name, files)`` and ``root_files`` at ``out``, then swap in.

    ``before_swap`` runs once the tree is staged; if it raises, the staged tree is removed and ``out`` is
    left as it was.  A large tree is written by two processes (see :func:`_write_tasks`).
    """
    from tqdm.auto import tqdm

    staging = store.staging_directory(out)
    try:
        writer = TreeWriter()
        tasks_dir = os.path.join(staging, TASKS_DIR)
        writer.mkdir(tasks_dir)
        tasks = list(tasks)
        with tqdm(desc="writing Harbor tasks", unit="task", total=len(tasks), disable=not progress or None) as bar:
            _write_tasks(writer, tasks_dir, tasks, bar.update)
        for name, payload in sorted(dict(root_files, **{EXPORT_MARKER: MARKER_TEXT}).items()):
            writer.write(os.path.join(staging, name), payload)
        if before_swap is not None:
            before_swap()
        store.swap_directory(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
