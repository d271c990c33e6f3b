"""``generate-world``: a complete dataset directory that every command reads through ``--data-dir``.

A small world (the default sizes are exercised by tests/test_generate.py and the benchmark) is generated
once per module; then the commands a user would run on it, with nothing special for generated worlds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tcsynth import configs, harbor, records, store

REPO = Path(__file__).resolve().parent.parent
SIZES = ["--train", "40", "--val", "24"]


def cli(*args: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "textcraft_synth", *args], capture_output=True, text=True, cwd=cwd, env=dict(os.environ, **env), timeout=600)


def tree(directory: Path) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("worlds") / "s7"
    result = cli("generate-world", "--seed", "7", "--out", str(out), "-q", *SIZES)
    assert result.returncode == 0, result.stderr
    return out


def test_the_directory_is_a_complete_dataset(world_dir):
    assert (world_dir / "README.md").read_text().startswith("---\n")
    for spec in configs.CONFIGS.values():
        for split in spec.splits:
            # Optional configs (sft-recursive) only with --recursive: see the test below.
            assert (world_dir / "data" / spec.name / ("%s.parquet" % split)).is_file() != spec.optional
    assert configs.card_configs_yaml([n for n, s in configs.CONFIGS.items() if not s.optional]) in (world_dir / "README.md").read_text()
    for name in harbor.ROOT_INDEX_FILES:
        assert (world_dir / name).is_file()
    data = store.load_records(world_dir / "data")
    assert data.world_name == "textcraft-synth-s7"
    assert data.world_document["generator"]["seed"] == 7
    assert [len(rows) for rows in data.tasks.values()] == [40, 24]
    assert all(row["name"].startswith("textcraft-synth-s7-") for rows in data.tasks.values() for row in rows)
    # Its names can never be mistaken for textcraft-synth@1's.
    published = store.load_records(REPO / "data")
    assert not {r["name"] for rows in data.tasks.values() for r in rows} & {r["name"] for rows in published.tasks.values() for r in rows}


def test_the_same_seed_gives_the_same_bytes_under_another_hash_seed(world_dir, tmp_path):
    again = tmp_path / "again"
    result = cli("generate-world", "--seed", "7", "--out", str(again), "-q", *SIZES, PYTHONHASHSEED="12345")
    assert result.returncode == 0, result.stderr
    assert tree(again) == tree(world_dir)


def test_load_dataset_reads_it(world_dir, tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    tasks = datasets.load_dataset(str(world_dir), cache_dir=str(tmp_path / "cache"))
    assert tasks["val"].num_rows == 24 and tasks["val"][0]["name"].startswith("textcraft-synth-s7-val-")
    sft = datasets.load_dataset(str(world_dir), "sft", cache_dir=str(tmp_path / "cache"))
    assert sft["train"].num_rows == 40


def test_every_command_reads_it_through_data_dir(world_dir, tmp_path):
    data_dir = str(world_dir / "data")
    first = store.load_records(world_dir / "data").tasks["val"][0]
    replay = cli("replay", first["name"], "--gold", "-q", "--data-dir", data_dir)
    assert replay.returncode == 0 and json.loads(replay.stdout)["reward"] == 1.0, replay.stderr
    sft = cli("sft", first["env_task_id"], "--data-dir", data_dir)
    assert sft.returncode == 0 and json.loads(sft.stdout)["name"] == first["name"]
    run = cli("eval", "--agent", "planner", "--batch", "--split", "val", "--data-dir", data_dir, "--out", str(tmp_path / "eval"), "-q")
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["overall"]["successes"] == 24
    export = cli("export-harbor", str(tmp_path / "harbor"), "--data-dir", data_dir, "-q")
    assert export.returncode == 0, export.stderr
    toml = (tmp_path / "harbor" / "tasks" / first["name"] / "task.toml").read_text()
    assert 'environment = "textcraft-synth-s7@1"' in toml and 'name = "textcraft-synth-s7/val-' in toml
    registry = json.loads((tmp_path / "harbor" / "registry.json").read_text())
    assert [entry["name"] for entry in registry] == ["textcraft-synth-s7-train", "textcraft-synth-s7-val"]
    assert harbor.verify_export(tmp_path / "harbor") == (64, [])
    # The index files of the export are the ones generate-world wrote beside data/.
    for name in harbor.ROOT_INDEX_FILES:
        assert (tmp_path / "harbor" / name).read_bytes() == (world_dir / name).read_bytes()


def test_build_rebuilds_it_in_place_and_leaves_the_checkout_alone(world_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(world_dir, copy)
    before = {name: (REPO / name).read_bytes() for name in harbor.ROOT_INDEX_FILES}
    result = cli("build", "--data-dir", str(copy / "data"), "-q")
    assert result.returncode == 0, result.stderr
    assert tree(copy) == tree(world_dir)
    assert {name: (REPO / name).read_bytes() for name in harbor.ROOT_INDEX_FILES} == before


def test_two_seeds_give_different_worlds(world_dir, tmp_path):
    other = tmp_path / "s8"
    assert cli("generate-world", "--seed", "8", "--out", str(other), "-q", *SIZES).returncode == 0
    assert (other / "data" / records.RECIPES_FILE).read_bytes() != (world_dir / "data" / records.RECIPES_FILE).read_bytes()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seed", "7", "--counts", "val=1,2,3"], "SPLIT=N,N,N,N"),
        (["--seed", "7", "--counts", "test=1,1,1,1"], "SPLIT=N,N,N,N"),
        (["--seed", "x"], "invalid int value"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, args, message):
    result = cli("generate-world", "--out", str(tmp_path / "w"), *args)
    assert result.returncode == 2 and message in result.stderr and not (tmp_path / "w").exists()


def test_a_foreign_directory_is_refused(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    result = cli("generate-world", "--seed", "1", "--out", str(out), "-q", *SIZES)
    assert result.returncode == 1 and result.stderr.startswith("error: ") and "not an earlier generated dataset" in result.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_recursive_adds_the_optional_config_and_build_keeps_it(tmp_path):
    import datasets

    out = tmp_path / "rec"
    result = cli("generate-world", "--seed", "7", "--out", str(out), "-q", "--recursive", "--counts", "train=1,1,1,0", "--counts", "val=1,1,0,0")
    assert result.returncode == 0, result.stderr
    optional = [name for name, spec in configs.CONFIGS.items() if spec.optional]
    assert optional and all((out / "data" / name).is_dir() for name in optional)
    assert configs.card_configs_yaml() in (out / "README.md").read_text()  # every config declared
    assert "--recursive" in (out / "README.md").read_text()  # and the command that regenerates it says so
    rows = datasets.load_dataset(str(out), optional[0], cache_dir=str(tmp_path / "cache"))
    assert {row["name"] for row in rows["val"]} == {row["name"] for row in store.load_records(out / "data").tasks["val"]}
    before = tree(out)
    assert cli("build", "--data-dir", str(out / "data"), "-q").returncode == 0
    assert tree(out) == before
