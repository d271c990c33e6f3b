"""Validation with Harbor's own code (the PyPI package ``harbor`` 0.25.0, which needs Python >= 3.12).

A Python 3.12 virtualenv with ``harbor==0.25.0`` is made once per session (kept in
``$TEXTCRAFT_HARBOR_VENV`` when set, else in a temporary directory).  If it cannot be made the tests
fail: this validation must run in CI.  Harbor runs with ``HOME`` in a temporary directory and
``HARBOR_TELEMETRY=0``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from tcsynth import harbor, records

HARBOR_REQUIREMENT = "harbor==0.25.0"
PYTHON_VERSION = "3.12.1"
VENV_VARIABLE = "TEXTCRAFT_HARBOR_VENV"

CHECK_ALL = r"""
import json, sys
from pathlib import Path
from harbor.models.registry import Registry
from harbor.models.task.config import TaskConfig
from harbor.publisher.packager import Packager

out = Path(sys.argv[1])
index = json.loads((out / "task-index.json").read_text())
registry = Registry.from_path(out / "registry.json")
report = {"datasets": {d.name: [t.name for t in d.tasks] for d in registry.datasets}, "tasks": {}}
for name, entry in index.items():
    task_dir = out / entry["task_path"]
    config = TaskConfig.model_validate_toml((task_dir / "task.toml").read_text())
    content_hash, files = Packager.compute_content_hash(task_dir)
    report["tasks"][name] = {
        "hash": "sha256:" + content_hash,
        "files": len(files),
        "agent_timeout_sec": config.agent.timeout_sec,
        "verifier_mode": getattr(config.verifier.environment_mode, "value", config.verifier.environment_mode),
    }
print(json.dumps(report))
"""


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


def harbor_env(home: Path) -> Dict[str, str]:
    env = dict(os.environ, HOME=str(home), HARBOR_TELEMETRY="0", PYENV_VERSION=PYTHON_VERSION)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture(scope="session")
def harbor_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("harbor-home")


@pytest.fixture(scope="session")
def harbor_venv(tmp_path_factory, harbor_home) -> Path:
    """A virtualenv with harbor 0.25.0: reused when the cached one already has it, else made and filled."""
    venv = Path(os.environ.get(VENV_VARIABLE) or tmp_path_factory.mktemp("harbor-venv") / "venv")
    python = venv / "bin" / "python"
    env = harbor_env(harbor_home)
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('harbor'))"]
    if python.exists() and subprocess.run(check, env=env, capture_output=True, text=True).stdout.strip() == "0.25.0":
        return venv
    steps = [
        find_python312() + ["-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", HARBOR_REQUIREMENT],
    ]
    for step in steps:
        result = subprocess.run(step, env=env, capture_output=True, text=True, timeout=1500)
        if result.returncode != 0:
            pytest.fail("cannot install %s: %s\n%s" % (HARBOR_REQUIREMENT, " ".join(step), result.stderr[-3000:]))
    return venv


@pytest.fixture(scope="session")
def full_export(tmp_path_factory, data) -> Path:
    out = tmp_path_factory.mktemp("harbor-export") / "out"
    harbor.export_harbor(out, data)
    return out


def sample_names(data) -> List[str]:
    """The first task of every split x difficulty, and the first task of each split."""
    names = []
    for split, rows in data.tasks.items():
        names.append(rows[0]["name"])
        for difficulty in records.DIFFICULTIES:
            names.append(next(row["name"] for row in rows if row["difficulty"] == difficulty))
    return sorted(set(names))


def test_harbor_lint_finds_nothing(harbor_venv, harbor_home, full_export, data):
    task_dirs = [str(full_export / "tasks" / name) for name in sample_names(data)]
    result = subprocess.run(
        [str(harbor_venv / "bin" / "harbor"), "lint", "--json", *task_dirs],
        env=harbor_env(harbor_home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


def test_harbor_models_and_content_hash_accept_every_task(harbor_venv, harbor_home, full_export, data):
    result = subprocess.run(
        [str(harbor_venv / "bin" / "python"), "-c", CHECK_ALL, str(full_export)],
        env=harbor_env(harbor_home),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["datasets"] == {
        "textcraft-synth-%s" % split: [row["name"] for row in rows] for split, rows in data.tasks.items()
    }
    index = json.loads((full_export / "task-index.json").read_text())
    assert len(report["tasks"]) == len(index) == 3154
    for name, checked in report["tasks"].items():
        assert checked["hash"] == index[name]["digest"], name
        assert checked["files"] == 12
        assert checked["agent_timeout_sec"] == index[name]["agent_timeout_sec"]
        assert checked["verifier_mode"] == "separate"
