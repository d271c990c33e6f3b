"""The ``data/`` directory: where each file lives, and deterministic Parquet reading and writing.

Layout (every Parquet file carries its ``datasets`` features in the schema metadata)::

    data/recipes.json                  the world, byte for byte the source file
    data/LICENSE.platoon               the licence of the source records
    data/<config>/<split>.parquet      one file per config and split (tasks, easy, ..., recipes)

``data/tasks/*.parquet`` and ``data/recipes.json`` are the records: everything else is derived from them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from . import records

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = REPO_ROOT / "data"
TASKS_CONFIG = "tasks"
# Fixed writer settings: the same rows give the same bytes (with the pinned pyarrow version).
PARQUET_OPTIONS = dict(compression="zstd", compression_level=9, use_dictionary=True, write_statistics=True)
ROW_GROUP_ROWS = 1000


class DataError(ValueError):
    """``data/`` is missing a file or holds one that does not read as a record."""


def parquet_path(data_dir: Path, config: str, split: str) -> Path:
    return Path(data_dir) / config / ("%s.parquet" % split)


def _storage_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every extension type (``datasets.Json``: JSON text) replaced by its storage type."""
    if isinstance(data_type, pa.BaseExtensionType):
        return data_type.storage_type
    if pa.types.is_list(data_type):
        return pa.list_(data_type.value_field.with_type(_storage_type(data_type.value_type)))
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_storage_type(field.type)) for field in data_type])
    return data_type


def parquet_bytes(rows: List[Mapping[str, Any]], features: Any) -> bytes:
    """The Parquet file of ``rows`` under the ``datasets`` features ``features`` (their metadata embedded).

    A ``datasets.Json`` value is given as its JSON text (Arrow builds no extension type from Python objects).
    """
    schema = features.arrow_schema
    storage = pa.schema([field.with_type(_storage_type(field.type)) for field in schema], metadata=schema.metadata)
    table = pa.Table.from_pylist(list(rows), schema=storage).cast(schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def _python_values(array: pa.Array) -> List[Any]:
    """``array.to_pylist()``, but fast for nested lists and structs.

    pyarrow builds nested rows value by value, slowly (1.4 s for the train gold trajectories); converting
    each leaf column in one call and regrouping by offsets gives the same objects several times faster.
    """
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
    try:
        return table_rows(pq.read_table(path))
    except FileNotFoundError:
        raise DataError("%s is missing: run `python -m textcraft_synth build-data --source DIR`" % path)
    except (OSError, pa.ArrowException) as error:
        raise DataError("%s does not read as Parquet: %s" % (path, error))


@dataclass(frozen=True)
class Records:
    """The records every product is built from: task rows per split and the world's ``recipes.json``."""

    tasks: Dict[str, List[Dict[str, Any]]]
    recipes_bytes: bytes
    license_bytes: bytes

    @property
    def world_document(self) -> Dict[str, Any]:
        return json.loads(self.recipes_bytes.decode("utf-8"))


def load_records(data_dir: Path = DEFAULT_DATA_DIR, splits: Iterable[str] = records.SPLITS) -> Records:
    """Read the records from ``data_dir`` (raises :class:`DataError` naming a missing or broken file).

    ``splits`` limits the task rows read, for callers that need one split only (an eval run).
    """
    data_dir = Path(data_dir)
    tasks = {split: read_parquet_rows(parquet_path(data_dir, TASKS_CONFIG, split)) for split in splits}
    return Records(tasks, _read(data_dir / records.RECIPES_FILE), _read(data_dir / records.LICENSE_FILE))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DataError("cannot read %s: %s" % (path, error.strerror or error))


def replace_directory(target: Path, files: Mapping[str, bytes]) -> None:
    """Make ``target`` hold exactly ``files`` ({relative path: bytes}), or leave it as it was.

    Everything is written to a sibling staging directory first; the old directory is moved aside and the
    new one renamed into place only once every file is on disk.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".%s-new-" % target.name, dir=target.parent))
    try:
        for relative, data in sorted(files.items()):
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(staging, 0o755)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    aside = None
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=".%s-old-" % target.name, dir=target.parent))
        os.rename(target, aside / target.name)
    try:
        os.rename(staging, target)
    except BaseException:
        if aside is not None:
            os.rename(aside / target.name, target)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def iter_parquet_files(data_dir: Path) -> Iterable[Path]:
    return sorted(Path(data_dir).glob("*/*.parquet"))
