"""The build: deterministic, equal to the committed data/, and all-or-nothing on bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcsynth import build, records, store


def _tree(directory: Path) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fresh_build(source_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("build") / "data"
    build.build_data(source_dir, out, progress=False)
    return out


def test_build_data_reproduces_the_committed_data_byte_for_byte(fresh_build, repo):
    assert _tree(fresh_build) == _tree(repo / "data")


def test_rebuilding_from_the_records_gives_the_same_bytes(fresh_build, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(fresh_build, copy)
    for derived in ("easy", "recipes"):
        shutil.rmtree(copy / derived)
    build.build(copy, progress=False)
    assert _tree(copy) == _tree(fresh_build)


@pytest.fixture
def source_copy(source_dir, tmp_path):
    copy = tmp_path / "source"
    shutil.copytree(source_dir, copy)
    for path in copy.iterdir():
        path.chmod(0o644)
    return copy


@pytest.fixture
def existing_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "marker.txt").write_text("untouched")
    return data


def _assert_untouched(data: Path):
    assert sorted(p.name for p in data.iterdir()) == ["marker.txt"]
    assert (data / "marker.txt").read_text() == "untouched"
    assert not [p for p in data.parent.iterdir() if p.name.startswith(".data-")], "staging left behind"


def _corrupt_line(path: Path):
    lines = path.read_bytes().split(b"\n")
    lines[5] = lines[5][:40]
    path.write_bytes(b"\n".join(lines))


def _truncate(path: Path):
    path.write_bytes(path.read_bytes()[:1000])


@pytest.mark.parametrize(
    "damage, filename, complaint",
    [
        (lambda p: p.unlink(), "textcraft_synth_val.jsonl", "cannot read"),
        (lambda p: p.unlink(), "recipes.json", "cannot read"),
        (lambda p: p.write_bytes(p.read_bytes().replace(b"3x", b"4x", 1)), "textcraft_synth_train.jsonl", "SHA-256"),
        (_truncate, "textcraft_synth_val.jsonl", "SHA-256"),
        (_corrupt_line, "textcraft_synth_train.jsonl", "SHA-256"),
        (lambda p: p.write_bytes(p.read_bytes()[:-2]), "recipes.json", "SHA-256"),
    ],
)
def test_bad_sources_fail_naming_the_file_and_leave_data_untouched(source_copy, existing_data, damage, filename, complaint):
    damage(source_copy / filename)
    with pytest.raises(build.BuildError) as caught:
        build.build_data(source_copy, existing_data, progress=False)
    message = str(caught.value)
    assert filename in message and complaint in message and "\n" not in message
    _assert_untouched(existing_data)


def test_a_corrupt_line_is_named_when_the_hash_is_not_pinned(source_copy, existing_data, monkeypatch):
    _corrupt_line(source_copy / "textcraft_synth_train.jsonl")
    monkeypatch.setitem(records.SOURCE_SHA256, "textcraft_synth_train.jsonl", records.sha256_hex((source_copy / "textcraft_synth_train.jsonl").read_bytes()))
    with pytest.raises(build.BuildError, match=r"textcraft_synth_train.jsonl line 6: not valid JSON"):
        build.build_data(source_copy, existing_data, progress=False)
    _assert_untouched(existing_data)


def test_a_losing_gold_trajectory_fails_the_build(data, existing_data, monkeypatch):
    broken = {split: [dict(row) for row in rows] for split, rows in data.tasks.items()}
    broken["val"][7]["gold_trajectory"] = broken["val"][7]["gold_trajectory"][:-1]
    broken["val"][7]["num_craft_steps"] -= 1
    # The pinned hashes would refuse these rows first; take them out so that the gold replay is what fails.
    monkeypatch.setattr(build, "check_release", lambda data, lines=None: None)
    with pytest.raises(build.BuildError, match="^%s: the gold trajectory does not reach the goal: " % broken["val"][7]["name"]):
        build.write_data(type(data)(broken, data.recipes_bytes, data.license_bytes), existing_data, progress=False)
    _assert_untouched(existing_data)


def test_one_core_builds_the_same_files_without_forking(data, monkeypatch):
    from tcsynth import background

    names = ["tasks", "easy", "recipes"]
    forked = build.verified_products(data, names, progress=False)
    monkeypatch.setattr(background, "cores", lambda: 1)
    monkeypatch.setattr(background, "_child", lambda *args: pytest.fail("a child was forked on one core"))
    assert build.verified_products(data, names, progress=False) == forked


def test_a_checking_process_that_dies_stops_the_build(data, existing_data, monkeypatch):
    from tcsynth import background

    monkeypatch.setattr(background, "_child", lambda function, args, connection: os._exit(7))
    with pytest.raises(background.BackgroundError, match=r"^the process checking the records died \(exit code 7\)$"):
        build.write_data(data, existing_data, progress=False, names=["tasks", "recipes"])
    _assert_untouched(existing_data)


def test_a_step_count_that_is_not_the_gold_length_fails_the_build(data, existing_data, monkeypatch):
    broken = {split: [dict(row) for row in rows] for split, rows in data.tasks.items()}
    broken["train"][3]["num_craft_steps"] += 1
    monkeypatch.setattr(build, "check_release", lambda data, lines=None: None)
    with pytest.raises(build.BuildError, match="^%s: num_craft_steps is " % broken["train"][3]["name"]):
        build.write_data(type(data)(broken, data.recipes_bytes, data.license_bytes), existing_data, progress=False)
    _assert_untouched(existing_data)


def test_altered_rows_of_the_published_world_fail_the_pinned_hash(data, existing_data):
    broken = {split: [dict(row) for row in rows] for split, rows in data.tasks.items()}
    broken["val"][7]["goal"] += " "
    with pytest.raises(build.BuildError, match="^val: the rows do not convert back to textcraft_synth_val.jsonl"):
        build.write_data(type(data)(broken, data.recipes_bytes, data.license_bytes), existing_data, progress=False)
    _assert_untouched(existing_data)


def test_cli_prints_one_error_line_and_exits_nonzero(source_copy, existing_data, repo):
    (source_copy / "recipes.json").write_bytes(b"{}")
    result = subprocess.run(
        [sys.executable, "-m", "textcraft_synth", "build-data", "--source", str(source_copy), "--data-dir", str(existing_data)],
        cwd=repo, capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and "recipes.json" in result.stderr
    assert "Traceback" not in result.stderr
    _assert_untouched(existing_data)


def test_cli_reports_a_missing_source_directory(tmp_path, repo):
    result = subprocess.run(
        [sys.executable, "-m", "textcraft_synth", "build-data", "--source", str(tmp_path / "nowhere"), "--data-dir", str(tmp_path / "d")],
        cwd=repo, capture_output=True, text=True,
    )
    assert result.returncode == 1 and "no such source directory" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "d").exists()


def test_build_without_records_says_how_to_make_them(tmp_path):
    with pytest.raises(store.DataError, match="build-data"):
        build.build(tmp_path / "empty", progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(store.DataError, match="build-data"):
        build.build(tmp_path / "empty", progress=False)


def test_the_build_command_rebuilds_a_copy_and_writes_index_files_and_harbor(tmp_path, repo):
    # The README's quick start, on a copy of data/ (index files and the Harbor tree go where it is told).
    copy = tmp_path / "data"
    shutil.copytree(repo / "data", copy)
    shutil.rmtree(copy / "hard")
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "textcraft_synth", "build", "--data-dir", str(copy), "--index-dir", str(index_dir), "--harbor", str(tmp_path / "harbor"), "-q"],
        cwd=repo, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert _tree(copy) == _tree(repo / "data")
    for name in ("registry.json", "task-index.json", "splits.json"):
        assert (index_dir / name).read_bytes() == (repo / name).read_bytes() == (tmp_path / "harbor" / name).read_bytes()
    assert len(list((tmp_path / "harbor" / "tasks").iterdir())) == 3154


@pytest.mark.parametrize("problem", ["missing index dir", "foreign harbor dir"])
def test_the_build_command_checks_every_argument_before_writing(tmp_path, repo, problem):
    copy = tmp_path / "data"
    shutil.copytree(repo / "data", copy)
    shutil.rmtree(copy / "easy")
    args = ["--data-dir", str(copy)]
    if problem == "missing index dir":
        args += ["--index-dir", str(tmp_path / "missing")]
    else:
        (tmp_path / "harbor").mkdir()
        (tmp_path / "harbor" / "mine.txt").write_text("keep")
        args += ["--index-dir", str(tmp_path), "--harbor", str(tmp_path / "harbor")]
    result = subprocess.run([sys.executable, "-m", "textcraft_synth", "build", *args, "-q"], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 1 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert not (copy / "easy").exists(), "data/ was rewritten before the bad argument was noticed"
    if problem == "foreign harbor dir":
        assert (tmp_path / "harbor" / "mine.txt").read_text() == "keep"
