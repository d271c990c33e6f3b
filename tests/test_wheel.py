"""The package works installed from a wheel, run from a directory that is not the checkout.

The wheel is built from the checkout and installed (without dependencies) into a new virtualenv; the
dependencies come from the test environment's own site-packages through a ``.pth`` line, which makes
them importable without activating this environment's editable install.  Then, from an empty directory:
the world, the reward, the environment and the command line, with and without a data directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tcsynth import records

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # No build isolation: setuptools comes from the test environment, so no network is needed.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True, capture_output=True, text=True,
    )
    (found,) = out.glob("textcraft_synth-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The python of a fresh virtualenv holding the wheel."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True, capture_output=True, text=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    return directory


def run(python: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, HF_HOME=str(cwd / "hf"), HF_HUB_OFFLINE="1", **env)
    environment.pop("PYTHONPATH", None)
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, env=environment, timeout=300)


def test_the_wheel_carries_the_world_and_the_templates(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert archive.read("tcsynth/recipes.json") == (REPO / "data" / records.RECIPES_FILE).read_bytes()
        templates = {name.rsplit("/", 1)[1] for name in names if name.startswith("tcsynth/harbor/templates/")}
    assert templates == {path.name for path in (REPO / "tcsynth" / "harbor" / "templates").iterdir()}
    assert "textcraft_synth.py" in names and "tcsynth/game.py" in names
    assert not [name for name in names if name.startswith(("tests/", "data/", "scripts/"))]


def test_the_packaged_world_is_the_datasets_world():
    # One source of truth: in the checkout the package's world is a link to data/recipes.json.
    packaged = REPO / "tcsynth" / records.RECIPES_FILE
    assert packaged.is_symlink() and os.readlink(packaged) == "../data/" + records.RECIPES_FILE
    assert packaged.read_bytes() == (REPO / "data" / records.RECIPES_FILE).read_bytes()


def test_world_reward_and_environment_work_outside_the_checkout(installed, elsewhere):
    code = r"""
import json, sys
import tcsynth, textcraft_synth
from textcraft_synth import TextCraftEnv, load_world, textcraft_reward
assert "site-packages" in tcsynth.__file__ and "site-packages" in textcraft_synth.__file__, tcsynth.__file__
world = load_world()
row = json.loads(sys.argv[1])
calls = textcraft_synth.gold_tool_calls(row)
text = "".join("<tool_call>%s</tool_call>" % json.dumps(c) for c in calls)
print(textcraft_reward([text], target_items=[row["target_items"]], initial_inventory=[row["initial_inventory"]]))
env = TextCraftEnv(row, world=world)
env.reset()
print(env.step(calls)[1])
"""
    from tcsynth import store

    row = store.load_records(REPO / "data", splits=("val",)).tasks["val"][3]
    result = run(installed, elsewhere, "-c", code, json.dumps(row))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[1.0]", "1.0"]


def test_the_command_line_reads_a_data_directory(installed, elsewhere):
    data = elsewhere / "copy" / "data"
    shutil.copytree(REPO / "data" / records.TASKS_CONFIG, data / records.TASKS_CONFIG)
    for name in (records.RECIPES_FILE, records.LICENSE_FILE):
        shutil.copy(REPO / "data" / name, data / name)
    result = run(installed, elsewhere, "-m", "textcraft_synth", "replay", "val:3", "--gold", "-q", "--data-dir", str(data))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reward"] == 1.0
    export = run(installed, elsewhere, "-m", "textcraft_synth", "export-harbor", "out", "--splits", "val", "--limit", "3", "-q", "--data-dir", str(data))
    assert export.returncode == 0, export.stderr
    index = json.loads((elsewhere / "out" / "task-index.json").read_text())
    committed = json.loads((REPO / "task-index.json").read_text())
    assert index and all(entry["digest"] == committed[name]["digest"] for name, entry in index.items())


def test_without_a_data_directory_or_the_hub_one_clear_error(installed, elsewhere):
    result = run(installed, elsewhere, "-m", "textcraft_synth", "replay", "val:3", "--gold")
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "--data-dir" in result.stderr and "apurvaga/textcraft-synth" in result.stderr
