"""Where the records live and how they are read: the ``data/`` directory, the packaged world, row look-ups.

Layout (every Parquet file carries its ``datasets`` features in the schema metadata)::

    data/recipes.json                  the world, byte for byte the source file
    data/LICENSE.platoon               the licence of the source records
    data/<config>/<split>.parquet      one file per config and split (tasks, easy, ..., recipes)

``data/tasks/*.parquet`` and ``data/recipes.json`` are the records: everything else is derived from them.

A data directory is found in this order: the one the caller names (``--data-dir``), the checkout's
``data/`` when the package runs from a checkout, else the dataset's ``data/`` downloaded from the Hub
(:data:`HUB_REPO_ID`).  The world alone needs none of them: the package carries ``recipes.json``
(:data:`PACKAGED_WORLD`, the same file as ``data/recipes.json``), so the engine and the reward work from a
plain wheel install.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

from . import game, records
from .errors import UserError

if TYPE_CHECKING:  # pyarrow (with numpy, ~0.3 s) is imported by the functions that read or write Parquet
    import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = REPO_ROOT / "data"
# The world inside the package: in a checkout a symbolic link to data/recipes.json, in a wheel its bytes.
PACKAGED_WORLD = Path(__file__).resolve().parent / records.RECIPES_FILE
# The licence of the records, inside the package too (generated worlds carry it: they follow its design).
PACKAGED_LICENSE = Path(__file__).resolve().parent / records.LICENSE_FILE
HUB_REPO_ID = "apurvaga/textcraft-synth"
# What a command that reads task rows needs from the Hub: the records, not the derived configs.
HUB_RECORD_PATTERNS = ("data/%s/*.parquet" % records.TASKS_CONFIG, "data/" + records.RECIPES_FILE, "data/" + records.LICENSE_FILE)
# Fixed writer settings: the same rows give the same bytes (with the pinned pyarrow version).  zstd level 3
# with 8 MiB pages: level 9 made the files ~20% smaller but cost 6x the CPU, most of a build's time.
PARQUET_OPTIONS = dict(compression="zstd", compression_level=3, data_page_size=8 << 20, use_dictionary=True, write_statistics=True)
ROW_GROUP_ROWS = 1000


class DataError(UserError):
    """``data/`` is missing a file or holds one that does not read as a record."""


def parquet_path(data_dir: Path, config: str, split: str) -> Path:
    return Path(data_dir) / config / ("%s.parquet" % split)


def _storage_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every extension type (``datasets.Json``: JSON text) replaced by its storage type."""
    import pyarrow as pa

    if isinstance(data_type, pa.BaseExtensionType):
        return data_type.storage_type
    if pa.types.is_list(data_type):
        return pa.list_(data_type.value_field.with_type(_storage_type(data_type.value_type)))
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_storage_type(field.type)) for field in data_type])
    return data_type


def parquet_bytes(rows: List[Mapping[str, Any]], schema: pa.Schema) -> bytes:
    """The Parquet file of ``rows`` under the Arrow ``schema`` of a config (:func:`tcsynth.configs.arrow_schema`,
    the ``datasets`` features in its metadata).

    A JSON value (``datasets.Json``) is given as its JSON text (Arrow builds no extension type from Python objects).
    """
    return table_parquet_bytes(arrow_table(rows, schema))


def arrow_table(rows: List[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``rows`` as an Arrow table of ``schema`` (JSON values given as their text, see :func:`parquet_bytes`)."""
    import pyarrow as pa

    storage = pa.schema([field.with_type(_storage_type(field.type)) for field in schema], metadata=schema.metadata)
    # Column by column: the same table as ``Table.from_pylist(rows)``, without its per-row dict walk
    # (twice as fast on the sft configs' lists of message texts).
    columns = [pa.array([row.get(field.name) for row in rows], type=field.type) for field in storage]
    return pa.Table.from_arrays(columns, schema=storage).cast(schema)


def table_parquet_bytes(table: pa.Table) -> bytes:
    """The Parquet file of ``table``, written with the fixed settings (:data:`PARQUET_OPTIONS`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def _python_values(array: pa.Array) -> List[Any]:
    """``array.to_pylist()``, but fast for nested lists and structs.

    pyarrow builds nested rows value by value, slowly (1.4 s for the train gold trajectories); converting
    each leaf column in one call and regrouping by offsets gives the same objects several times faster.
    """
    import pyarrow as pa

    if array.null_count or not (pa.types.is_list(array.type) or pa.types.is_struct(array.type)):
        return array.to_pylist()
    if pa.types.is_struct(array.type):
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        columns = [_python_values(field) for field in array.flatten()]
        return [dict(zip(names, values)) for values in zip(*columns)]
    offsets = array.offsets.to_pylist()
    start = offsets[0]
    values = _python_values(array.values.slice(start, offsets[-1] - start))
    return [values[offsets[i] - start : offsets[i + 1] - start] for i in range(len(offsets) - 1)]


def table_rows(table: pa.Table) -> List[Dict[str, Any]]:
    """The rows of a table as dicts, as ``Table.to_pylist`` gives them."""
    names = table.column_names
    columns = [_python_values(table.column(name).combine_chunks()) for name in names]
    return [dict(zip(names, values)) for values in zip(*columns)]


def read_parquet_rows(path: Path) -> List[Dict[str, Any]]:
    return table_rows(read_parquet_table(path))


def read_parquet_table(path: Path, columns: Optional[Sequence[str]] = None) -> "pa.Table":
    """The Arrow table of a Parquet file (only ``columns``, when given); :class:`DataError` if it does not read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not pq.read_table: the latter imports pyarrow.dataset and pandas (~0.6 s) on first use.
        with pq.ParquetFile(path) as parquet:
            return parquet.read(columns=list(columns) if columns is not None else None)
    except FileNotFoundError:
        raise DataError("%s is missing: run `python -m textcraft_synth build-data --source DIR`" % path)
    except (OSError, pa.ArrowException) as error:
        raise DataError("%s does not read as Parquet: %s" % (path, error))


class TaskRows(Mapping[str, List[Dict[str, Any]]]):
    """Each split's task rows as Python dicts, converted from the split's Arrow table on first use.

    Turning every row into Python objects is most of the cost of reading the records (the gold
    trajectories above all), so a command pays for it only when it reads rows; one that looks a task up
    by name or reads a few columns (:meth:`Records.column_rows`) works on the tables instead.
    """

    def __init__(self, tables: Mapping[str, "pa.Table"]) -> None:
        self.tables = dict(tables)
        self._rows: Dict[str, List[Dict[str, Any]]] = {}

    def __getitem__(self, split: str) -> List[Dict[str, Any]]:
        rows = self._rows.get(split)
        if rows is None:
            rows = self._rows[split] = table_rows(self.tables[split])
        return rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def __repr__(self) -> str:
        return "TaskRows(%s)" % ", ".join("%s: %d rows" % (split, table.num_rows) for split, table in self.tables.items())


@dataclass(frozen=True)
class Records:
    """The records every product is built from: task rows per split and the world's ``recipes.json``.

    Read from Parquet (:func:`load_records`), ``tasks`` is a :class:`TaskRows` and ``tables`` holds the
    Arrow tables it converts from; records made in memory (the source files, a generated world) have
    plain lists and no tables.
    """

    tasks: Mapping[str, List[Dict[str, Any]]]
    recipes_bytes: bytes
    license_bytes: bytes
    tables: Optional[Mapping[str, "pa.Table"]] = field(default=None, compare=False, repr=False)

    def column_rows(self, split: str, columns: Sequence[str]) -> List[Dict[str, Any]]:
        """The rows of ``split`` with only ``columns``, in order (from the Arrow table when there is one,
        so the other columns are never converted)."""
        if self.tables is not None and not (isinstance(self.tasks, TaskRows) and split in self.tasks._rows):
            return table_rows(self.tables[split].select(list(columns)))
        return [{column: row[column] for column in columns} for row in self.tasks[split]]

    @functools.cached_property
    def world_document(self) -> Dict[str, Any]:
        try:
            document = json.loads(self.recipes_bytes.decode("utf-8"))
        except ValueError as error:
            raise DataError("%s is not JSON: %s" % (records.RECIPES_FILE, error))
        if not isinstance(document, dict) or not isinstance(document.get("name"), str):
            raise DataError("%s is not a textcraft-recipes/1 world (no name)" % records.RECIPES_FILE)
        return document

    @functools.cached_property
    def world(self) -> game.World:
        """The engine's world of these records (``DataError`` when ``recipes.json`` is not one)."""
        try:
            return game.World(self.world_document)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise DataError("%s is not a textcraft-recipes/1 world: %s" % (records.RECIPES_FILE, error))

    @property
    def world_name(self) -> str:
        """The world's name: ``textcraft-synth`` for textcraft-synth@1; it prefixes every task name."""
        return self.world_document["name"]


def load_records(data_dir: Path = DEFAULT_DATA_DIR, splits: Iterable[str] = records.SPLITS) -> Records:
    """Read the records from ``data_dir`` (raises :class:`DataError` naming a missing or broken file).

    ``splits`` limits the task rows read, for callers that need one split only (an eval run).  The files
    are read as Arrow tables; each split becomes Python rows when a caller first reads ``tasks[split]``.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError("%s is not a directory (expected a dataset's data/ folder; build-data makes one)" % data_dir)
    tables = {split: read_parquet_table(parquet_path(data_dir, records.TASKS_CONFIG, split)) for split in splits}
    return Records(TaskRows(tables), _read(data_dir / records.RECIPES_FILE), _read(data_dir / records.LICENSE_FILE), tables)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DataError("cannot read %s: %s" % (path, error.strerror or error))


def staging_directory(target: Path) -> Path:
    """A new empty directory beside ``target`` to build its replacement in (mode 0755)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".%s-new-" % target.name, dir=target.parent))
    os.chmod(staging, 0o755)
    return staging


def swap_directory(staging: Path, target: Path) -> None:
    """Put the complete directory ``staging`` at ``target``; an existing ``target`` is moved aside, then removed.

    If the final rename fails the old directory is put back, so ``target`` is always either the old tree or
    the new one.  ``staging`` must be a sibling of ``target`` (see :func:`staging_directory`).
    """
    staging, target = Path(staging), Path(target)
    aside = None
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=".%s-old-" % target.name, dir=target.parent))
        os.rename(target, aside / target.name)
    try:
        os.rename(staging, target)
    except BaseException:
        if aside is not None:
            os.rename(aside / target.name, target)
        raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def replace_directory(target: Path, files: Mapping[str, bytes]) -> None:
    """Make ``target`` hold exactly ``files`` ({relative path: bytes}), or leave it as it was.

    Everything is written (and fsynced) to a sibling staging directory first, then swapped in.
    """
    staging = staging_directory(target)
    try:
        for relative, data in sorted(files.items()):
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        swap_directory(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# ------------------------------------------------------------------------------------ finding the records


def checkout_data_dir() -> Optional[Path]:
    """The checkout's ``data/`` when this package runs from a checkout that holds the records, else None."""
    records_file = parquet_path(DEFAULT_DATA_DIR, records.TASKS_CONFIG, records.SPLITS[0])
    return DEFAULT_DATA_DIR if (REPO_ROOT / "textcraft_synth.py").is_file() and records_file.is_file() else None


def hub_data_dir(repo_id: str = HUB_REPO_ID, revision: Optional[str] = None) -> Path:
    """The records of the Hub dataset ``repo_id``, downloaded (or found in the Hub cache); ``DataError`` if
    they cannot be had."""
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=list(HUB_RECORD_PATTERNS))
    except Exception as error:  # noqa: BLE001 - offline, unknown repo, no permission: all one answer to the user
        raise DataError(
            "no --data-dir given, this package is not in a checkout, and the Hub dataset %s cannot be reached "
            "(%s: %s); pass --data-dir DIR, a copy of the dataset's data/ folder" % (repo_id, type(error).__name__, error)
        )
    return Path(path) / "data"


def resolve_data_dir(data_dir: Optional[Path] = None) -> Path:
    """The data directory to read: ``data_dir`` if given, else the checkout's, else the Hub dataset's."""
    if data_dir is not None:
        return Path(data_dir)
    return checkout_data_dir() or hub_data_dir()


def world_path(data_dir: Optional[Path] = None) -> Path:
    """The ``recipes.json`` of ``data_dir``, or the packaged world when none is given."""
    return PACKAGED_WORLD if data_dir is None else Path(data_dir) / records.RECIPES_FILE


def load_world(data_dir: Optional[Path] = None) -> game.World:
    """The engine's :class:`~tcsynth.game.World` of ``data_dir`` (default: the packaged world)."""
    path = world_path(data_dir)
    try:
        return game.World.from_file(path)
    except OSError as error:
        raise DataError("cannot read %s: %s" % (path, error.strerror or error))
    except (ValueError, KeyError, TypeError) as error:
        raise DataError("%s is not a textcraft-recipes/1 world: %s" % (path, error))


def find_row(data: Records, wanted: str) -> Dict[str, Any]:
    """A task row by name (``textcraft-synth-val-easy-00003``), ``env_task_id`` (``val:3``) or ``source_task_id``.

    With Arrow tables at hand only the three name columns are searched and only the row found is converted.
    """
    if data.tables is not None:
        for split, table in data.tables.items():
            # Plain Python over three string columns: a pyarrow.compute comparison would convert ``wanted``
            # to an Arrow scalar, which imports pandas (half a second).
            names = zip(*(table.column(column).to_pylist() for column in ("name", "env_task_id", "source_task_id")))
            position = next((number for number, ids in enumerate(names) if wanted in ids), None)
            if position is not None:
                return table_rows(table.slice(position, 1))[0]
    for rows in data.tasks.values():
        for row in rows:
            if wanted in (row["name"], row["env_task_id"], row["source_task_id"]):
                return row
    example = next((rows[0] for rows in data.tasks.values() if rows), None)
    hint = " (names look like %s, or %s)" % (example["name"], example["env_task_id"]) if example else ""
    raise DataError("no task named %r%s" % (wanted, hint))
