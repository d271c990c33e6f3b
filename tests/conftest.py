"""Shared fixtures: the repository's records, read once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tcsynth import game, records, store

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
# The shared source files sit beside the checkout (CI lays out a copy of shared/ there too).
SOURCE = Path(os.environ.get("TEXTCRAFT_SOURCE", REPO.parent / "shared" / "source"))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def data() -> store.Records:
    return store.load_records(DATA)


@pytest.fixture(scope="session")
def world() -> game.World:
    return game.World.from_file(DATA / records.RECIPES_FILE)


@pytest.fixture(scope="session")
def source_dir() -> Path:
    if not (SOURCE / records.RECIPES_FILE).exists():
        pytest.fail("the source files are not at %s; set TEXTCRAFT_SOURCE" % SOURCE)
    return SOURCE
