"""The virtualenvs of the tests that run code on another Python: Harbor's, platoon's and the floor versions'.

All three are made the same way, so it is written once here.  A virtualenv is kept in the directory its
environment variable names (``$TEXTCRAFT_HARBOR_VENV``, ...) when set, else made in a temporary directory, and
made at most once per session.  A kept one is reused when it already runs the right Python and has every
requirement (the pinned ones at their version).  When no interpreter is found or a step fails, the test
fails rather than skips: CI must run these checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

CHECK_TIMEOUT = 120  # seconds for the reuse check
# Prints {"python": "3.x", name: version, ...} for the names in argv; fails when one is not installed.
VERSIONS = (
    "import importlib.metadata as m, json, sys; "
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], **{n: m.version(n) for n in sys.argv[1:]}}))"
)

_made: Dict[str, Path] = {}  # by environment variable, once per session


def find_python(version: str, name: str, this_interpreter: bool = False) -> List[str]:
    """A command that runs Python ``version`` (``"3.12.1"``): pyenv's build, else ``python3.12`` on PATH.

    With ``this_interpreter``, the running interpreter comes first when its minor release is the same.
    """
    minor = ".".join(version.split(".")[:2])
    if this_interpreter and "%d.%d" % sys.version_info[:2] == minor:
        return [sys.executable]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for root in (pyenv_root, Path("/root/.pyenv")):
        candidate = root / "versions" / version / "bin" / "python"
        if candidate.exists():
            return [str(candidate)]
    found = shutil.which("python" + minor)
    if found:
        return [found]
    pytest.fail("no Python %s found for the %s venv (install pyenv's %s or put python%s on PATH)" % (minor, name, version, minor))


def installed(python: Path, names: Sequence[str], env: Dict[str, str], cwd: Optional[Path] = None) -> Dict[str, str]:
    """``{"python": "3.x", name: version, ...}`` of a virtualenv's interpreter; ``{}`` when a name is missing."""
    result = subprocess.run([str(python), "-c", VERSIONS, *names], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=CHECK_TIMEOUT)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def step(command: List[str], env: Dict[str, str], timeout: float, name: str, cwd: Optional[Path] = None) -> None:
    """Runs one step of making the ``name`` venv; the test fails if it does."""
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        pytest.fail("cannot make the %s venv: %s\n%s" % (name, " ".join(command), result.stderr[-3000:]))


def pip_install(python: Path, arguments: Sequence[str], env: Dict[str, str], timeout: float, name: str,
                cwd: Optional[Path] = None) -> None:
    step([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *arguments], env, timeout, name, cwd)


def venv(name: str, variable: str, tmp_path_factory: pytest.TempPathFactory, python_version: str,
         requirements: Sequence[str], env: Dict[str, str], timeout: float, cwd: Optional[Path] = None,
         this_interpreter: bool = False) -> Path:
    """A virtualenv on Python ``python_version`` with ``requirements``: in ``$variable`` when set, else temporary.

    A kept one is reused when it runs that minor release and has every requirement, ``name==version`` ones
    at that version; otherwise it is made afresh (``venv --clear``, then one ``pip install``).  Every
    command runs with ``env`` in ``cwd``; ``timeout`` is per command.
    """
    if variable in _made:
        return _made[variable]
    path = Path(os.environ.get(variable) or tmp_path_factory.mktemp(name + "-venv") / "venv")
    python = path / "bin" / "python"
    pins = dict(requirement.partition("==")[::2] for requirement in requirements)  # {name: version or ""}
    versions = installed(python, sorted(pins), env, cwd) if python.exists() else {}
    minor = ".".join(python_version.split(".")[:2])
    if not (versions.get("python") == minor and all(versions.get(n) == v for n, v in pins.items() if v)):
        step(find_python(python_version, name, this_interpreter) + ["-m", "venv", "--clear", str(path)], env, timeout, name, cwd)
        pip_install(python, requirements, env, timeout, name, cwd)
    _made[variable] = path
    return path
