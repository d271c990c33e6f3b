"""Shared fixtures: the repository's records, read once per session.

No fixture reads anything outside the checkout: the source files are rebuilt from ``data/`` (and their
SHA-256 checked against the published ones), so the suite passes on a fresh clone with nothing beside it.
The maintainer's copy of the original files is used only by the tests marked for it, which skip without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tcsynth import game, records, store

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
# Where a maintainer keeps the original source files (optional: see the `shared_source` fixture).
SHARED_SOURCE = os.environ.get("TEXTCRAFT_SOURCE")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def data() -> store.Records:
    return store.load_records(DATA)


@pytest.fixture(scope="session")
def world() -> game.World:
    return game.World.from_file(DATA / records.RECIPES_FILE)


def rebuilt_source_files(data: store.Records) -> dict:
    """``{file name: bytes}`` of the source files, rebuilt from the rows in ``data/`` alone."""
    files = {records.SOURCE_FILES[split]: records.source_file_bytes(data.tasks[split]) for split in records.SPLITS}
    files[records.RECIPES_FILE] = data.recipes_bytes
    files[records.LICENSE_FILE] = data.license_bytes
    return files


@pytest.fixture(scope="session")
def source_dir(data, tmp_path_factory) -> Path:
    """The source files rebuilt from data/ into a directory, each checked against its published SHA-256."""
    directory = tmp_path_factory.mktemp("source")
    for name, payload in rebuilt_source_files(data).items():
        expected = records.SOURCE_SHA256.get(name)
        assert expected is None or records.sha256_hex(payload) == expected, "%s rebuilt from data/ differs from the published file" % name
        (directory / name).write_bytes(payload)
    return directory


@pytest.fixture(scope="session")
def shared_source() -> Path:
    """A maintainer's copy of the original source files (``TEXTCRAFT_SOURCE``); skips when there is none."""
    if not SHARED_SOURCE:
        pytest.skip("set TEXTCRAFT_SOURCE to a directory with the original source files to compare them byte for byte")
    return Path(SHARED_SOURCE)
