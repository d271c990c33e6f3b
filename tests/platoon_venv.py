"""platoon's own code for the tests: a Python 3.12 virtualenv with ``platoon==0.4.0``, made once per session.

platoon 0.4 needs Python >= 3.12, so it runs as a separate program, like Harbor (``tests/harbor_venv.py``,
whose Python version this module reuses).  The virtualenv is made by ``tests/venvs.py``: kept in
``$TEXTCRAFT_PLATOON_VENV`` when set (and reused when it already has the right platoon), else made in a
temporary directory.  If it cannot be made the tests fail: the card's platoon config is checked in CI.
Only the base package is installed: its ``tinker`` extra (the model gateway, with torch) is for sampling a
policy, which these tests never do.

platoon runs with ``HOME`` in a temporary directory and its site profile (``$PLATOON_SITE``) there too, so its
cache, locks and runs stay inside the test's directory and nothing reads or writes the user's
``~/.cache/platoon``.  ``HF_HUB_OFFLINE=1``: nothing it runs here may reach the Hub.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

import pytest

import venvs
from harbor_venv import PYTHON_VERSION

PLATOON_VERSION = "0.4.0"
PLATOON_REQUIREMENT = "platoon==" + PLATOON_VERSION
VENV_VARIABLE = "TEXTCRAFT_PLATOON_VENV"
# platoon's own variables that would point it at another cache or site than the test's.
_PLATOON_VARIABLES = ("PLATOON_SITE", "PLATOON_HARBOR_CACHE", "PLATOON_TOOLCHAINS", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")


def site(root: Path) -> Path:
    """A site profile whose cache and runs are below ``root`` (made if missing); returns its path."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    profile = root / "site.yaml"
    profile.write_text("cache: ./cache\nruns: ./runs\n")
    return profile


def platoon_env(root: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment platoon runs in: HOME and the site profile below ``root`` (see :func:`site`), offline."""
    env = {name: value for name, value in os.environ.items() if name not in _PLATOON_VARIABLES}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env.update(
        HOME=str(root / "home"),
        PLATOON_SITE=str(root / "site.yaml"),
        HF_HUB_OFFLINE="1",
        WANDB_MODE="disabled",
        PYENV_VERSION=PYTHON_VERSION,
    )
    env.update(extra or {})
    return env


def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with platoon 0.4.0: reused when the cached one already has it, else made and filled."""
    env = dict(os.environ, PYENV_VERSION=PYTHON_VERSION)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return venvs.venv("platoon", VENV_VARIABLE, tmp_path_factory, PYTHON_VERSION, [PLATOON_REQUIREMENT], env, timeout=1800)
