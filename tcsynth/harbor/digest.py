"""Harbor's content hash of a task directory, from its files' paths and bytes (SPEC §3).

``"sha256:" + sha256`` over the lines ``f"{path}\\0{sha256hex(file)}\\n"`` in path order, for the root files
Harbor hashes and every file below the hashed directories.  The same function serves the export (files in
memory) and ``verify-export`` (files on disk).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from .. import records
from .layout import HASHED_DIRECTORIES, HASHED_ROOT_FILES, TaskFile


def is_hashed(path: str) -> bool:
    """Whether Harbor's content hash covers a task file (by its path in the task directory)."""
    return path in HASHED_ROOT_FILES or path.startswith(HASHED_DIRECTORIES)


def digest_of(entries: Iterable[Tuple[str, str]]) -> str:
    """The content hash of ``(path, sha256 hex of the file)`` pairs (any order; unhashed paths skipped)."""
    outer = hashlib.sha256()
    for path, hexdigest in sorted(entry for entry in entries if is_hashed(entry[0])):
        outer.update(("%s\0%s\n" % (path, hexdigest)).encode("utf-8"))
    return "sha256:" + outer.hexdigest()


class FileDigests:
    """The SHA-256 of task files, computed once per path for files every task shares.

    Shared files have the same bytes at the same path in every task, so their digest is remembered by
    path; the bytes are compared with the remembered ones (by identity first, which is the usual case, then
    by value), so a shared file that differs is hashed anew instead of being given the wrong digest.
    """

    def __init__(self) -> None:
        self._shared: Dict[str, Tuple[bytes, str]] = {}

    def hexdigest(self, item: TaskFile) -> str:
        if not item.shared:
            return records.sha256_hex(item.data)
        known = self._shared.get(item.path)
        if known is not None and (known[0] is item.data or known[0] == item.data):
            return known[1]
        hexdigest = records.sha256_hex(item.data)
        self._shared[item.path] = (item.data, hexdigest)
        return hexdigest

    def task_digest(self, files: Iterable[TaskFile]) -> str:
        """The content hash of one task's files."""
        return digest_of((item.path, self.hexdigest(item)) for item in files if is_hashed(item.path))


def directory_digest(task_dir: Path) -> Tuple[str, List[str]]:
    """The content hash of a task directory on disk, and the relative paths it covered.

    Symbolic links are not followed (a link is hashed as its target text would not be, so it is refused).
    """
    task_dir = Path(task_dir)
    entries = []
    for root, directories, files in os.walk(task_dir):
        directories.sort()
        for name in files:
            path = Path(root) / name
            relative = path.relative_to(task_dir).as_posix()
            if not is_hashed(relative):
                continue
            if path.is_symlink():
                raise ValueError("%s is a symbolic link" % path)
            entries.append((relative, records.sha256_hex(path.read_bytes())))
    return digest_of(entries), sorted(path for path, _ in entries)
