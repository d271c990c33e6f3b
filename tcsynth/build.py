"""Building ``data/``: from the source files (``build-data``) or again from the records it holds (``build``).

Both paths check everything before writing anything: the SHA-256 of every source file, the shape of every
task line, that the rows convert back to the source bytes, and that every gold trajectory replays in the
engine to reward 1.0.  Output goes to a staging directory that replaces ``data/`` only when complete, so a
failed build leaves ``data/`` as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional

from tqdm.auto import tqdm

from . import game, records, store
from .configs import CONFIGS
from .store import Records

Log = Callable[[str], None]


class BuildError(ValueError):
    """The inputs cannot be built from; the message names the file and the reason in one line."""


def read_source(source_dir: Path) -> Records:
    """Read and check the source files in ``source_dir`` (hashes pinned in :data:`records.SOURCE_SHA256`)."""
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        raise BuildError("%s: no such source directory" % source_dir)
    blobs: Dict[str, bytes] = {}
    for filename in list(records.SOURCE_SHA256) + [records.LICENSE_FILE]:
        path = source_dir / filename
        try:
            blobs[filename] = path.read_bytes()
        except OSError as error:
            raise BuildError("%s: cannot read: %s" % (path, error.strerror or error))
        expected = records.SOURCE_SHA256.get(filename)
        if expected is not None and records.sha256_hex(blobs[filename]) != expected:
            raise BuildError(
                "%s: SHA-256 is %s, expected %s (altered or truncated)"
                % (path, records.sha256_hex(blobs[filename]), expected)
            )
    tasks = {}
    for split, filename in records.SOURCE_FILES.items():
        try:
            lines = records.parse_source_file(blobs[filename], str(source_dir / filename))
        except records.SourceError as error:
            raise BuildError(str(error))
        tasks[split] = records.rows_from_source_lines(split, lines)
    return Records(tasks, blobs[records.RECIPES_FILE], blobs[records.LICENSE_FILE])


def verify_records(data: Records, progress: bool = True) -> None:
    """Raise :class:`BuildError` unless the records are complete, lossless and every gold trajectory wins."""
    if records.sha256_hex(data.recipes_bytes) != records.SOURCE_SHA256[records.RECIPES_FILE]:
        raise BuildError("%s: not the textcraft-synth@1 world (SHA-256 differs)" % records.RECIPES_FILE)
    for split, filename in records.SOURCE_FILES.items():
        rows = data.tasks[split]
        if len(rows) != records.TASK_COUNTS[split]:
            raise BuildError("%s: %d tasks, expected %d" % (split, len(rows), records.TASK_COUNTS[split]))
        if records.sha256_hex(records.source_file_bytes(rows)) != records.SOURCE_SHA256[filename]:
            raise BuildError("%s: the rows do not convert back to %s byte for byte" % (split, filename))
    world = game.World(data.world_document)
    total = sum(len(rows) for rows in data.tasks.values())
    with tqdm(total=total, desc="replaying gold trajectories", unit="task", disable=not progress or None) as bar:
        for split in records.SPLITS:
            for row in data.tasks[split]:
                verdict = game.replay(world, records.engine_task(row), records.gold_tool_calls(row))
                if not verdict.success:
                    raise BuildError("%s: the gold trajectory does not reach the goal: %s" % (row["name"], verdict.reason))
                bar.update(1)


def product_files(data: Records) -> Dict[str, bytes]:
    """Every file of ``data/`` ({relative path: bytes}), derived from the records."""
    files = {records.RECIPES_FILE: data.recipes_bytes, records.LICENSE_FILE: data.license_bytes}
    for spec in CONFIGS.values():
        for split in spec.splits:
            path = "%s/%s.parquet" % (spec.name, split)
            files[path] = store.parquet_bytes(spec.rows(data, split), spec.features)
    return files


def write_data(data: Records, data_dir: Path, log: Optional[Log] = None, progress: bool = True) -> List[str]:
    """Verify ``data`` and make ``data_dir`` hold exactly its products; returns the relative paths written."""
    verify_records(data, progress=progress)
    files = product_files(data)
    store.replace_directory(Path(data_dir), files)
    if log:
        for relative in sorted(files):
            log("wrote %s (%d bytes)" % (Path(data_dir) / relative, len(files[relative])))
    return sorted(files)


def build_data(source_dir: Path, data_dir: Path = store.DEFAULT_DATA_DIR, **kwargs) -> List[str]:
    """``build-data``: import the source files into ``data_dir``."""
    return write_data(read_source(source_dir), data_dir, **kwargs)


def build(data_dir: Path = store.DEFAULT_DATA_DIR, **kwargs) -> List[str]:
    """``build``: rebuild every product in ``data_dir`` from the records it already holds."""
    try:
        data = store.load_records(data_dir)
    except store.DataError as error:
        raise BuildError(str(error))
    return write_data(data, data_dir, **kwargs)
