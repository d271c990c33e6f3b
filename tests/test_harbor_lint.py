"""Validation with Harbor's own code (the PyPI package ``harbor`` 0.25.0, which needs Python >= 3.12).

The virtualenv comes from ``tests/harbor_venv.py`` (made once per session, shared with test_publish.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import List

import pytest

import harbor_venv as harbor_venv_module
from harbor_venv import harbor_env
from tcsynth import harbor, records

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


@pytest.fixture(scope="session")
def harbor_home(tmp_path_factory) -> Path:
    return harbor_venv_module.home(tmp_path_factory)


@pytest.fixture(scope="session")
def harbor_venv(tmp_path_factory) -> Path:
    return harbor_venv_module.venv(tmp_path_factory)


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


def test_a_generated_worlds_export_passes_harbor_lint_and_hash(harbor_venv, harbor_home, tmp_path):
    # A generated world's tasks have their own names (textcraft-synth-s5-...) and pass Harbor's checks too.
    import sys

    world = tmp_path / "world"
    subprocess.run([sys.executable, "-m", "textcraft_synth", "generate-world", "--seed", "5", "--out", str(world), "-q",
                    "--counts", "train=2,2,2,2", "--counts", "val=1,1,1,1"], check=True, capture_output=True)
    out = tmp_path / "export"
    subprocess.run([sys.executable, "-m", "textcraft_synth", "export-harbor", str(out), "-q", "--data-dir", str(world / "data")],
                   check=True, capture_output=True)
    task_dirs = sorted(str(path) for path in (out / "tasks").iterdir())
    assert len(task_dirs) == 12 and all(Path(path).name.startswith("textcraft-synth-s5-") for path in task_dirs)
    lint = subprocess.run([str(harbor_venv / "bin" / "harbor"), "lint", "--json", *task_dirs], env=harbor_env(harbor_home),
                          capture_output=True, text=True, timeout=600)
    assert lint.returncode == 0 and json.loads(lint.stdout) == [], lint.stdout + lint.stderr
    check = subprocess.run([str(harbor_venv / "bin" / "python"), "-c", CHECK_ALL, str(out)], env=harbor_env(harbor_home),
                           capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stderr[-3000:]
    report = json.loads(check.stdout)
    assert sorted(report["datasets"]) == ["textcraft-synth-s5-train", "textcraft-synth-s5-val"]
    index = json.loads((out / "task-index.json").read_text())
    assert {name: entry["hash"] for name, entry in report["tasks"].items()} == {name: entry["digest"] for name, entry in index.items()}
