"""Harbor's own code for the tests: a Python 3.12 virtualenv with ``harbor==0.25.0``, made once per session.

Harbor needs Python >= 3.12, so it runs as a separate program.  The virtualenv is kept in
``$TEXTCRAFT_HARBOR_VENV`` when set (and reused when it already has the right harbor), else made in a
temporary directory.  If it cannot be made the tests fail: this validation must run in CI.  Harbor runs
with ``HOME`` in a temporary directory and ``HARBOR_TELEMETRY=0``.

Every test module that needs Harbor calls :func:`venv` and :func:`home` from its fixtures; the module
keeps one of each for the whole session, so the virtualenv is built at most once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import pytest

HARBOR_VERSION = "0.25.0"
HARBOR_REQUIREMENT = "harbor==" + HARBOR_VERSION
PYTHON_VERSION = "3.12.1"
VENV_VARIABLE = "TEXTCRAFT_HARBOR_VENV"

_made: Dict[str, Path] = {}  # "venv" and "home", once per session


def find_python312() -> List[str]:
    """A command that runs Python 3.12: pyenv's build, or python3.12 selected by PYENV_VERSION."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for candidate in (pyenv_root / "versions" / PYTHON_VERSION / "bin" / "python", Path("/root/.pyenv/versions") / PYTHON_VERSION / "bin" / "python"):
        if candidate.exists():
            return [str(candidate)]
    found = shutil.which("python3.12")
    if found:
        return [found]
    pytest.fail("no Python 3.12 found for harbor (install pyenv's %s or put python3.12 on PATH)" % PYTHON_VERSION)


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
    if "venv" in _made:
        return _made["venv"]
    path = Path(os.environ.get(VENV_VARIABLE) or tmp_path_factory.mktemp("harbor-venv") / "venv")
    python = path / "bin" / "python"
    env = harbor_env(home(tmp_path_factory))
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('harbor'))"]
    if not (python.exists() and subprocess.run(check, env=env, capture_output=True, text=True).stdout.strip() == HARBOR_VERSION):
        steps = [
            find_python312() + ["-m", "venv", "--clear", str(path)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", HARBOR_REQUIREMENT],
        ]
        for step in steps:
            result = subprocess.run(step, env=env, capture_output=True, text=True, timeout=1500)
            if result.returncode != 0:
                pytest.fail("cannot install %s: %s\n%s" % (HARBOR_REQUIREMENT, " ".join(step), result.stderr[-3000:]))
    _made["venv"] = path
    return path
