"""The loading tests again, on the oldest runtime dependencies the project accepts (issue 8).

The floors below were found by bisection on Python 3.11 (each older release fails, or is refused by the
newer floors' own requirements):

- ``datasets`` 4.7.0: the first release with the ``Json`` feature type the ``sft`` configs declare
  (4.6.1 fails with ``Feature type 'Json' not found``, and ``tcsynth.configs`` cannot be imported).
- ``pyarrow`` 21.0.0 and ``huggingface_hub`` 0.25.0: the floors that ``datasets`` 4.7.0 itself requires;
  both pass everything here.

A Python 3.11 virtualenv with exactly these versions (plus ``tqdm`` and ``pytest``) is made once per
session by ``tests/venvs.py``, kept in ``$TEXTCRAFT_FLOOR_VENV`` when set, else in a temporary directory.
If it cannot be made the tests fail: CI must run them.  The checkout is installed into it with
``--no-deps`` (from a copy, so the build leaves nothing in the checkout) and ``pip check`` then proves the
declared dependencies admit the floors.  The tests themselves run from the checkout, in a subprocess, with
no ``TEXTCRAFT_*`` variable, the Hub offline and a fresh ``HF_HOME``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

import venvs

FLOORS = {"datasets": "4.7.0", "pyarrow": "21.0.0", "huggingface_hub": "0.25.0"}
PYTHON_VERSION = "3.11.7"
VENV_VARIABLE = "TEXTCRAFT_FLOOR_VENV"
# What a user does at run time: every config through load_dataset, the engine, the TRL reward.
LOADING_TESTS = ["tests/test_load_dataset.py", "tests/test_engine_rules.py", "tests/test_rewards.py"]
# The builder class is still run on the floors (test_builder_difficulty_option_filters_rows); its row-by-row
# comparison with the Parquet files of four configs is left to the main run: on pyarrow 21 it takes minutes.
# The reward's tests on real chat templates need transformers and tokenizers, which a user of the reward
# alone does not install: they run in the main run.
DESELECTED = ["tests/test_load_dataset.py::test_builder_generates_the_parquet_rows", "tests/test_rewards.py::TestRealTemplates"]

# Run from the checkout: the calls a user makes without datasets' builder, reported for comparison.
USER_CALLS = r"""
import hashlib, json
import textcraft_synth
from tcsynth import store
world = textcraft_synth.load_world()
data = store.load_records()
print(json.dumps({
    "module": textcraft_synth.__file__,
    "recipes": len(world.recipes),
    "rows": {split: hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
             for split, rows in data.tasks.items()},
}))
"""


def rows_digest(rows: List[Dict]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def floor_env(hf_home: Path) -> Dict[str, str]:
    """The environment of every floor-venv command: nothing of ours, the Hub offline, a fresh cache."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TEXTCRAFT_")}
    for key in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTEST_ADDOPTS"):
        env.pop(key, None)
    env.update(HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def run(command: List[str], env: Dict[str, str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def hf_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("floor-hf-home")


@pytest.fixture(scope="session")
def floor_venv(tmp_path_factory, hf_home, repo) -> Path:
    """A Python 3.11 virtualenv with the floor versions and this checkout (installed with ``--no-deps``).

    A cached venv whose versions already match is reused; the checkout is installed afresh every session,
    so its metadata is the checkout's own.
    """
    env = floor_env(hf_home)
    requirements = ["%s==%s" % item for item in sorted(FLOORS.items())] + ["tqdm", "pytest"]
    venv = venvs.venv("floor", VENV_VARIABLE, tmp_path_factory, PYTHON_VERSION, requirements, env, timeout=1500, cwd=repo,
                      this_interpreter=True)
    # pip builds a local project in place; a copy keeps build/ and *.egg-info out of the checkout.
    source = tmp_path_factory.mktemp("floor-source") / "textcraft-synth"
    shutil.copytree(repo, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__"))
    venvs.pip_install(venv / "bin" / "python", ["--no-deps", str(source)], env, 1500, "floor", cwd=repo)
    return venv


def test_floor_venv_has_exactly_the_floor_versions(floor_venv, hf_home, repo):
    versions = venvs.installed(floor_venv / "bin" / "python", sorted(FLOORS) + ["pytest"], floor_env(hf_home), repo)
    assert {name: versions.get(name) for name in FLOORS} == FLOORS
    assert versions["python"] == "3.11"
    assert "pytest" in versions


def test_declared_dependencies_admit_the_floors(floor_venv, hf_home, repo):
    # pip check reads textcraft-synth's installed metadata: a pin or floor above these versions shows here.
    result = run([str(floor_venv / "bin" / "python"), "-m", "pip", "check"], floor_env(hf_home), repo, 300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_user_calls_read_the_same_records_on_the_floors(floor_venv, hf_home, repo, data, world):
    result = run([str(floor_venv / "bin" / "python"), "-c", USER_CALLS], floor_env(hf_home), repo, 600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert Path(report["module"]).resolve() == (repo / "textcraft_synth.py").resolve()
    assert report["recipes"] == len(world.recipes)
    assert report["rows"] == {split: rows_digest(rows) for split, rows in data.tasks.items()}


def test_loading_tests_pass_on_the_floors(floor_venv, hf_home, repo):
    command = [str(floor_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *LOADING_TESTS]
    command += ["--deselect=%s" % node for node in DESELECTED]
    result = run(command, floor_env(hf_home), repo, 3000)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "deselected" in summary, summary
