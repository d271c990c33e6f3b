"""Harbor's own code for the tests: a Python 3.12 virtualenv with ``harbor==0.25.0``, made once per session.

Harbor needs Python >= 3.12, so it runs as a separate program.  The virtualenv is made by ``tests/venvs.py``:
kept in ``$TEXTCRAFT_HARBOR_VENV`` when set (and reused when it already has the right harbor), else made in a
temporary directory.  If it cannot be made the tests fail: this validation must run in CI.  Harbor runs
with ``HOME`` in a temporary directory and ``HARBOR_TELEMETRY=0``.

Every test module that needs Harbor calls :func:`venv` and :func:`home` from its fixtures; the session
keeps one of each, so the virtualenv is built at most once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

import pytest

import venvs

HARBOR_VERSION = "0.25.0"
HARBOR_REQUIREMENT = "harbor==" + HARBOR_VERSION
PYTHON_VERSION = "3.12.1"
VENV_VARIABLE = "TEXTCRAFT_HARBOR_VENV"

_made: Dict[str, Path] = {}  # "home", once per session


def harbor_env(home: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ, HOME=str(home), HARBOR_TELEMETRY="0", PYENV_VERSION=PYTHON_VERSION)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env.update(extra or {})
    return env


def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Harbor's ``HOME`` for this session (an empty temporary directory)."""
    if "home" not in _made:
        _made["home"] = tmp_path_factory.mktemp("harbor-home")
    return _made["home"]


def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with harbor 0.25.0: reused when the cached one already has it, else made and filled."""
    return venvs.venv("harbor", VENV_VARIABLE, tmp_path_factory, PYTHON_VERSION, [HARBOR_REQUIREMENT],
                      harbor_env(home(tmp_path_factory)), timeout=1500)
