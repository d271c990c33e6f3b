"""The Harbor export: the task tree, each file's contract (SPEC §3), the index files and the writer."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Dict, Tuple

import pytest

from tcsynth import game, harbor, records, store

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE_PREFIX = "docker.io/library/python:3.12-slim@sha256:"
TASK_FILES = {
    "instruction.md",
    "task.toml",
    "environment/Dockerfile",
    "environment/textcraft_game.py",
    "environment/recipes.json",
    "environment/task.json",
    "tests/test.sh",
    "tests/Dockerfile",
    "tests/textcraft_game.py",
    "tests/recipes.json",
    "tests/task.json",
    "solution/solve.sh",
}


def tree(root: Path) -> Dict[str, Tuple[int, bytes]]:
    """Every path below ``root`` with its mode and (for files) bytes."""
    listing = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        listing[path.relative_to(root).as_posix()] = (mode, path.read_bytes() if stat.S_ISREG(mode) else b"")
    return listing


def harbor_hash(task_dir: Path) -> str:
    """Harbor's content hash, written from SPEC §3 (not from our exporter)."""
    selected = []
    for path in task_dir.rglob("*"):
        relative = path.relative_to(task_dir).as_posix()
        top = relative.split("/")[0]
        if path.is_file() and (relative in ("task.toml", "instruction.md", "README.md", "trajectory.json") or (
            "/" in relative and top in ("environment", "tests", "solution", "steps")
        )):
            selected.append(relative)
    outer = hashlib.sha256()
    for relative in sorted(selected):
        outer.update(("%s\0%s\n" % (relative, hashlib.sha256((task_dir / relative).read_bytes()).hexdigest())).encode())
    return "sha256:" + outer.hexdigest()


@pytest.fixture(scope="module")
def small(data):
    """The first rows of every split x difficulty plus the first 5 of each split."""
    chosen = {split: [] for split in data.tasks}
    for split, rows in data.tasks.items():
        seen = set()
        for row in rows:
            if row["index"] < 5 or row["difficulty"] not in seen:
                chosen[split].append(row)
                seen.add(row["difficulty"])
    return chosen


@pytest.fixture(scope="module")
def exported(tmp_path_factory, data) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    harbor.export_harbor(out, data, splits=["train", "val"], limit=40)
    return out


def test_tree_layout_and_modes(exported, data):
    tasks = sorted(p.name for p in (exported / "tasks").iterdir())
    assert tasks == sorted(row["name"] for split in ("train", "val") for row in data.tasks[split][:40])
    assert sorted(p.name for p in exported.iterdir()) == [".textcraft-synth-export", "LICENSE", "README.md", "registry.json", "splits.json", "task-index.json", "tasks"]
    for name in tasks[:10]:
        listing = tree(exported / "tasks" / name)
        files = {path for path, (mode, _) in listing.items() if stat.S_ISREG(mode)}
        assert files == TASK_FILES
        for path, (mode, _) in listing.items():
            expected = 0o755 if stat.S_ISDIR(mode) or path.endswith(".sh") else 0o644
            assert stat.S_IMODE(mode) == expected, path
    assert (exported / "LICENSE").read_bytes() == data.license_bytes


def test_game_file_is_the_engine_and_shared_files_are_hard_links_within_one_side(exported, data):
    engine = Path(game.__file__).read_bytes()
    tasks = sorted((exported / "tasks").iterdir())
    inodes = {(where, name): set() for where in ("environment", "tests") for name in ("textcraft_game.py", "recipes.json")}
    for task_dir in tasks:
        for where, name in inodes:
            assert (task_dir / where / name).read_bytes() == (engine if name.endswith(".py") else data.recipes_bytes)
            inodes[where, name].add((task_dir / where / name).stat().st_ino)
    assert all(len(found) == 1 for found in inodes.values())
    scripts = {(task_dir / "tests" / "test.sh").stat().st_ino for task_dir in tasks}
    assert len(scripts) == 1
    # The agent's copies and the grader's never share an inode: editing one in place cannot edit the other.
    agent_side = {inode for (where, _), found in inodes.items() if where == "environment" for inode in found}
    grader_side = {inode for (where, _), found in inodes.items() if where == "tests" for inode in found}
    assert not agent_side & grader_side
    for task_dir in tasks:
        assert (task_dir / "tests" / "task.json").stat().st_ino != (task_dir / "environment" / "task.json").stat().st_ino


def test_task_json_is_the_spec_document(exported, data):
    recipes_sha = hashlib.sha256(data.recipes_bytes).hexdigest()
    for row in data.tasks["val"][:40]:
        source = records.source_from_row(row)
        expected = json.dumps(
            {
                "format": "textcraft-task/1",
                "name": row["name"],
                "world": "textcraft-synth",
                "goal": source["goal"],
                "target_items": source["misc"]["target_items"],
                "initial_inventory": source["misc"]["initial_inventory"],
                "recipes_sha256": recipes_sha,
            },
            indent=1,
            ensure_ascii=True,
        ) + "\n"
        for where in ("environment", "tests"):
            assert (exported / "tasks" / row["name"] / where / "task.json").read_text() == expected


def test_task_toml_fields(exported, data):
    for row in data.tasks["train"][:40]:
        config = tomllib.loads((exported / "tasks" / row["name"] / "task.toml").read_text())
        assert config["schema_version"] == "1.4"
        assert config["artifacts"] == ["/app/textcraft/actions.jsonl"]
        assert config["task"]["name"] == "textcraft-synth/%s-%s-%05d" % (row["split"], row["difficulty"], row["index"])
        assert config["task"]["description"] and config["task"]["keywords"]
        source = records.source_from_row(row)
        assert config["metadata"] == {
            "environment": "textcraft-synth@1",
            "split": "train",
            "difficulty": source["misc"]["difficulty"],
            "max_depth": source["misc"]["max_depth"],
            "num_craft_steps": source["misc"]["num_craft_steps"],
            "goal": source["goal"],
            "source_task_id": "textcraft_synth.train.%d" % row["index"],
            "env_task_id": "train:%d" % row["index"],
            "env_split_task_id": row["env_split_task_id"],
        }
        assert config["verifier"] == {"environment_mode": "separate", "timeout_sec": 180.0}
        crafts = len(source["misc"]["gold_trajectory"])
        assert config["agent"] == {"timeout_sec": float(math.ceil((600 + 10 * crafts) / 60) * 60)}
        assert config["environment"] == {
            "network_mode": "no-network",
            "cpus": 1,
            "memory_mb": 2048,
            "gpus": 0,
            "build_timeout_sec": 900.0,
        }


def test_agent_timeout_rounds_up_to_a_minute():
    def row(crafts):
        return {"gold_trajectory": [None] * crafts}

    assert harbor.agent_timeout_sec(row(0)) == 600
    assert harbor.agent_timeout_sec(row(1)) == 660
    assert harbor.agent_timeout_sec(row(6)) == 660
    assert harbor.agent_timeout_sec(row(22)) == 840


def test_dockerfiles(exported, data):
    row = data.tasks["val"][3]
    task_dir = exported / "tasks" / row["name"]
    for where in ("environment", "tests"):
        lines = (task_dir / where / "Dockerfile").read_text().splitlines()
        assert lines[0].startswith("#") and row["name"] in lines[0]
        froms = [line for line in lines if line.startswith("FROM ")]
        assert len(froms) == 1 and froms[0].startswith("FROM " + BASE_IMAGE_PREFIX)
        assert len(froms[0]) == len("FROM " + BASE_IMAGE_PREFIX) + 64
        runs = [index for index, line in enumerate(lines) if line.startswith("RUN ")]
        assert len(runs) == 1
        text = "\n".join(lines)
        assert "tmux" in text and "/usr/local/bin/textcraft" in text
    environment = (task_dir / "environment" / "Dockerfile").read_text()
    assert "ENV TEXTCRAFT_DIR=/app/textcraft" in environment
    assert "/app/textcraft/" in environment and "task.json" in environment


def test_instruction_states_the_goal_and_the_commands(exported, data):
    row = data.tasks["val"][0]
    text = (exported / "tasks" / row["name"] / "instruction.md").read_text()
    assert row["goal"] in text
    for command in ("textcraft craft", "textcraft info", "textcraft inventory", "textcraft finish"):
        assert command in text


def test_solve_sh_is_the_gold_as_textcraft_commands(exported, data):
    row = data.tasks["train"][0]
    text = (exported / "tasks" / row["name"] / "solution" / "solve.sh").read_text()
    commands = [line for line in text.splitlines() if line.startswith("textcraft ")]
    source = records.source_from_row(row)["misc"]["gold_trajectory"]
    assert len(commands) == len(source) + 1
    for line, step in zip(commands, source):
        ingredients = " ".join("%s=%d" % kv for kv in step["ingredients"].items())
        assert line == "textcraft craft %s %d %s" % (step["target"][0], step["result_count"], ingredients)
    assert commands[-1].startswith("textcraft finish ")
    assert "PLATOON_SANDBOX_ROOT" in text
    assert "PLATOON_SANDBOX_ROOT" in (exported / "tasks" / row["name"] / "tests" / "test.sh").read_text()


def test_index_files(exported, data):
    registry = json.loads((exported / "registry.json").read_text())
    assert [d["name"] for d in registry] == ["textcraft-synth-train", "textcraft-synth-val"]
    for dataset, split in zip(registry, ("train", "val")):
        assert list(dataset) == ["name", "version", "description", "tasks"]
        assert dataset["version"] == "1.0"
        assert dataset["tasks"] == [{"name": r["name"], "path": "tasks/" + r["name"]} for r in data.tasks[split][:40]]
    index = json.loads((exported / "task-index.json").read_text())
    assert list(index) == sorted(index)
    row = data.tasks["val"][7]
    entry = index[row["name"]]
    assert sorted(entry) == sorted(
        ["task_path", "split", "difficulty", "max_depth", "num_craft_steps", "agent_timeout_sec", "goal",
         "target_items", "source_task_id", "env_task_id", "env_split_task_id", "digest"]
    )
    assert entry["task_path"] == "tasks/" + row["name"] and entry["env_task_id"] == "val:7"
    assert entry["target_items"] == records.list_to_counts(row["target_items"])
    assert isinstance(entry["agent_timeout_sec"], int)
    splits = json.loads((exported / "splits.json").read_text())
    assert list(splits) == ["train"] + ["train-" + d for d in records.DIFFICULTIES] + ["val"] + ["val-" + d for d in records.DIFFICULTIES]
    assert splits["val-easy"] == [r["name"] for r in data.tasks["val"][:40] if r["difficulty"] == "easy"]
    for name in ("registry.json", "splits.json"):
        assert (exported / name).read_text() == json.dumps(json.loads((exported / name).read_text()), indent=1) + "\n"


def test_every_digest_is_harbors_content_hash(exported):
    index = json.loads((exported / "task-index.json").read_text())
    assert len(index) == 80
    for name, entry in index.items():
        assert entry["digest"] == harbor_hash(exported / entry["task_path"]), name


def test_full_index_counts(data):
    files = harbor.root_index_files(data)
    splits = json.loads(files["splits.json"])
    counts = {name: len(names) for name, names in splits.items()}
    assert counts == {
        "train": 2522, "train-easy": 588, "train-medium": 852, "train-hard": 544, "train-extreme": 538,
        "val": 632, "val-easy": 147, "val-medium": 213, "val-hard": 136, "val-extreme": 136,
    }
    assert len(json.loads(files["task-index.json"])) == 3154
    assert json.loads(files["registry.json"])[0]["tasks"][0]["name"] == "textcraft-synth-train-medium-00000"


def test_repository_root_index_files_equal_a_fresh_export(data):
    fresh = harbor.root_index_files(data)
    for name, payload in fresh.items():
        committed = REPO / name
        assert committed.exists(), "run: python -m textcraft_synth export-harbor . --index-only"
        assert committed.read_bytes() == payload, (
            "%s is stale; run: python -m textcraft_synth export-harbor . --index-only" % name
        )


def test_two_exports_are_identical(tmp_path, data):
    first, second = tmp_path / "a", tmp_path / "b"
    harbor.export_harbor(first, data, splits=["val"], limit=25)
    old_umask = os.umask(0o077)  # modes must not depend on the umask
    try:
        harbor.export_harbor(second, data, splits=["val"], limit=25)
    finally:
        os.umask(old_umask)
    assert tree(first) == tree(second)


def test_refuses_a_non_empty_out_unless_forced(tmp_path, data):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(harbor.ExportError):
        harbor.export_harbor(out, data, splits=["val"], limit=1)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    harbor.export_harbor(out, data, splits=["val"], limit=1, force=True)
    assert not (out / "keep.txt").exists() and (out / "registry.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging left behind


def test_an_empty_out_is_filled(tmp_path, data):
    out = tmp_path / "out"
    out.mkdir()
    harbor.export_harbor(out, data, splits=["val"], limit=1)
    assert (out / "tasks" / data.tasks["val"][0]["name"] / "task.toml").exists()


def test_a_failing_gold_solution_writes_nothing(tmp_path, data):
    broken_row = dict(data.tasks["val"][0])
    broken_row["gold_trajectory"] = broken_row["gold_trajectory"][1:]  # skip the first craft
    broken = store.Records({"train": [], "val": [broken_row]}, data.recipes_bytes, data.license_bytes)
    out = tmp_path / "out"
    with pytest.raises(harbor.ExportError, match=broken_row["name"]):
        harbor.export_harbor(out, broken)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_gold_solution_among_many_writes_nothing(tmp_path, data):
    """Enough tasks that the gold solutions are played in a second process: its failure still stops the export."""
    rows = [dict(row) for row in data.tasks["val"]]
    rows[400]["gold_trajectory"] = rows[400]["gold_trajectory"][:-1]  # the last craft missing
    broken = store.Records({"train": [], "val": rows}, data.recipes_bytes, data.license_bytes)
    with pytest.raises(harbor.ExportError, match=rows[400]["name"]):
        harbor.export_harbor(tmp_path / "out", broken)
    assert list(tmp_path.iterdir()) == []


def test_bad_options_are_errors(tmp_path, data):
    with pytest.raises(harbor.ExportError, match="unknown split"):
        harbor.export_harbor(tmp_path / "x", data, splits=["test"])
    with pytest.raises(harbor.ExportError, match="limit"):
        harbor.export_harbor(tmp_path / "x", data, limit=0)
    assert list(tmp_path.iterdir()) == []


def test_command_line(tmp_path):
    out = tmp_path / "out"
    run = [sys.executable, "-m", "textcraft_synth", "export-harbor", str(out), "--splits", "val", "--limit", "2", "-q"]
    result = subprocess.run(run, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert "wrote 2 Harbor tasks" in result.stdout
    again = subprocess.run(run, capture_output=True, text=True, cwd=REPO)  # an earlier export is replaced
    assert again.returncode == 0, again.stderr
    (out / "notes.txt").write_text("mine")
    (out / harbor.EXPORT_MARKER).unlink()
    refused = subprocess.run(run, capture_output=True, text=True, cwd=REPO)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: ") and "not an earlier export" in refused.stderr and "Traceback" not in refused.stderr
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("where", [".", "..", "repo"])
def test_never_exports_over_the_current_directory_or_a_checkout(tmp_path, data, monkeypatch, where):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = REPO if where == "repo" else Path(where)
    with pytest.raises(harbor.ExportError):
        harbor.export_harbor(out, data, splits=["val"], limit=1, force=True)
    assert list(work.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_a_sandbox_copied_with_cp_a_keeps_the_graders_files_apart(exported, tmp_path, data):
    # cp -a keeps hard links; an agent that edits its world in place must not change the grader's copy.
    task = data.tasks["val"][0]["name"]
    copy = tmp_path / "task"
    subprocess.run(["cp", "-a", str(exported / "tasks" / task), str(copy)], check=True)
    for name in ("recipes.json", "textcraft_game.py", "task.json"):
        with open(copy / "environment" / name, "r+b") as handle:  # in place, keeping the inode
            handle.seek(0)
            handle.write(b"#")
        assert (copy / "tests" / name).read_bytes() == (exported / "tasks" / task / "tests" / name).read_bytes()


def test_verify_export_finds_every_change(tmp_path, data):
    out = tmp_path / "out"
    harbor.export_harbor(out, data, splits=["val"], limit=6)
    assert harbor.verify_export(out) == (6, [])
    names = [row["name"] for row in data.tasks["val"][:6]]
    (out / "tasks" / names[0] / "instruction.md").write_bytes((out / "tasks" / names[0] / "instruction.md").read_bytes() + b" ")
    os.unlink(out / "tasks" / names[1] / "tests" / "recipes.json")
    shutil.rmtree(out / "tasks" / names[2])
    shutil.copytree(out / "tasks" / names[3], out / "tasks" / "stray-task")
    checked, problems = harbor.verify_export(out)
    assert checked == 6
    assert [p.split(":")[0] for p in problems] == [names[0], names[1], names[2], "tasks/stray-task"]
    result = subprocess.run([sys.executable, "-m", "textcraft_synth", "verify-export", str(out)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 1 and "4 problem(s)" in result.stdout


def test_verify_export_passes_a_full_export_and_the_command_exits_zero(tmp_path, data):
    out = tmp_path / "out"
    harbor.export_harbor(out, data, splits=["train"], limit=30)
    result = subprocess.run([sys.executable, "-m", "textcraft_synth", "verify-export", str(out)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0 and result.stdout.strip().endswith("30 tasks checked, 0 problem(s)")


def test_index_only_writes_just_the_three_files(tmp_path, data):
    result = subprocess.run([sys.executable, "-m", "textcraft_synth", "export-harbor", str(tmp_path), "--index-only", "--splits", "val", "--limit", "5"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.json", "splits.json", "task-index.json"]
    assert json.loads((tmp_path / "task-index.json").read_text()) == {
        name: entry for name, entry in json.loads((REPO / "task-index.json").read_text()).items()
        if name in {row["name"] for row in data.tasks["val"][:5]}
    }
    missing = subprocess.run([sys.executable, "-m", "textcraft_synth", "export-harbor", str(tmp_path / "nope"), "--index-only"],
                             capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 1 and "is not a directory" in missing.stderr and not (tmp_path / "nope").exists()


def test_a_gold_checker_that_dies_stops_the_export(tmp_path, data, monkeypatch):
    # The forked checker's other failure: the process ends without an answer.
    from tcsynth import background

    monkeypatch.setattr(background, "_child", lambda function, args, connection: os._exit(7))
    with pytest.raises(background.BackgroundError, match=r"^the process checking the gold solutions died \(exit code 7\)$"):
        harbor.export_harbor(tmp_path / "out", data, splits=["val"])
    assert list(tmp_path.iterdir()) == []
