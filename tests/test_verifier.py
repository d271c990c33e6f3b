"""The verifier (``tests/test.sh`` -> ``textcraft_game.py verify``) and the oracle run of ``solution/solve.sh``.

The sandbox is laid out as platoon's process provider lays it out: the task's ``environment/`` at
``ROOT/app/textcraft``, its ``tests/`` at ``ROOT/tests``, and ``PLATOON_SANDBOX_ROOT=ROOT``.  Reward 1.0 only
for a log the game could have written that ends in finish with every target (SPEC §3).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping

import pytest

from tcsynth import game, harbor, records

LOG_RELPATH = "app/textcraft/actions.jsonl"


def sample_rows(data) -> List[Mapping]:
    """The task with the shortest gold solution of every split x difficulty (8 tasks)."""
    chosen: Dict = {}
    for split, rows in data.tasks.items():
        for row in rows:
            key = (split, row["difficulty"])
            if key not in chosen or len(row["gold_trajectory"]) < len(chosen[key]["gold_trajectory"]):
                chosen[key] = row
    assert len(chosen) == len(records.SPLITS) * len(records.DIFFICULTIES)
    return [chosen[key] for key in sorted(chosen)]


def write_task(directory: Path, row: Mapping, recipes: bytes) -> Path:
    task_dir = directory / row["name"]
    harbor.write_task(task_dir, harbor.task_files(row, harbor.SharedBytes(recipes, records.TASK_NAME_PREFIX)))
    return task_dir


def make_sandbox(root: Path, task_dir: Path) -> Path:
    """A fresh sandbox: ROOT/app/textcraft (a copy of environment/) and ROOT/tests."""
    shutil.copytree(task_dir / "environment", root / "app" / "textcraft")
    shutil.copytree(task_dir / "tests", root / "tests")
    return root


def shim_dir(directory: Path) -> Path:
    """A ``textcraft`` command on PATH, as the image installs it, but reading $TEXTCRAFT_DIR's game file."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "textcraft"
    shim.write_text('#!/bin/sh\nexec "%s" -I "$TEXTCRAFT_DIR/textcraft_game.py" "$@"\n' % sys.executable)
    shim.chmod(0o755)
    return directory


def run_script(script: Path, root: Path, path_dir: Path = None, **extra) -> subprocess.CompletedProcess:
    env = dict(os.environ, PLATOON_SANDBOX_ROOT=str(root), TEXTCRAFT_DIR=str(root / "app" / "textcraft"), **extra)
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(filter(None, [str(path_dir) if path_dir else None, python_dir, env.get("PATH", "")]))
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=600)


def reward_of(root: Path) -> float:
    text = (root / "logs" / "verifier" / "reward.json").read_text()
    assert text in ('{"reward": 1.0}\n', '{"reward": 0.0}\n'), text
    return json.loads(text)["reward"]


def verdict_of(root: Path) -> dict:
    return json.loads((root / "logs" / "verifier" / game.VERDICT_FILE).read_text())


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory, data) -> Path:
    directory = tmp_path_factory.mktemp("tasks")
    for row in sample_rows(data):
        write_task(directory, row, data.recipes_bytes)
    return directory


# ------------------------------------------------------------------------------------------------- oracle


def test_oracle_scores_one_on_every_split_and_difficulty(tasks_dir, data, tmp_path):
    shims = shim_dir(tmp_path / "bin")
    for row in sample_rows(data):
        root = make_sandbox(tmp_path / row["name"], tasks_dir / row["name"])
        solved = run_script(tasks_dir / row["name"] / "solution" / "solve.sh", root, shims)
        assert solved.returncode == 0, (row["name"], solved.stderr)
        graded = run_script(root / "tests" / "test.sh", root)
        assert graded.returncode == 0, graded.stderr
        assert reward_of(root) == 1.0, verdict_of(root)
        verdict = verdict_of(root)
        assert verdict["crafts"] == len(row["gold_trajectory"]) and verdict["finished"] is True
        assert verdict["records"] == len(row["gold_trajectory"]) + 1


def test_oracle_without_a_textcraft_command_uses_the_sandbox_root(tasks_dir, data, tmp_path):
    """platoon's process provider: no image and no textcraft on PATH; solve.sh runs the game file below ROOT."""
    row = sample_rows(data)[0]
    root = make_sandbox(tmp_path / "sandbox", tasks_dir / row["name"])
    env_path = tmp_path / "bin-without-textcraft"
    env_path.mkdir()
    (env_path / "python3").symlink_to(sys.executable)
    env = {"PATH": "%s:/usr/bin:/bin" % env_path, "PLATOON_SANDBOX_ROOT": str(root), "HOME": str(tmp_path)}
    solved = subprocess.run(["bash", str(tasks_dir / row["name"] / "solution" / "solve.sh")], env=env, capture_output=True, text=True)
    assert solved.returncode == 0, solved.stderr
    graded = subprocess.run(["bash", str(root / "tests" / "test.sh")], env=env, capture_output=True, text=True)
    assert graded.returncode == 0, graded.stderr
    assert reward_of(root) == 1.0


def test_nop_scores_zero(tasks_dir, data, tmp_path):
    row = sample_rows(data)[0]
    root = make_sandbox(tmp_path / "sandbox", tasks_dir / row["name"])
    assert run_script(root / "tests" / "test.sh", root).returncode == 0
    assert reward_of(root) == 0.0
    assert "never ran a textcraft command" in verdict_of(root)["reason"]


def test_finish_without_the_targets_scores_zero(tasks_dir, data, tmp_path):
    row = sample_rows(data)[0]
    root = make_sandbox(tmp_path / "sandbox", tasks_dir / row["name"])
    game_file = root / "app" / "textcraft" / "textcraft_game.py"
    env = dict(os.environ, TEXTCRAFT_DIR=str(root / "app" / "textcraft"))
    assert subprocess.run([sys.executable, "-I", str(game_file), "finish", "done"], env=env).returncode == 0
    run_script(root / "tests" / "test.sh", root)
    assert reward_of(root) == 0.0
    assert verdict_of(root)["missing"] == records.list_to_counts(row["target_items"])
    assert verdict_of(root)["reason"].startswith("finished without the targets: ")


# --------------------------------------------------------------------------------------- cannot be fooled


def gold_log(row: Mapping) -> List[dict]:
    """The gold episode as the command writes its records."""
    lines = []
    for seq, (item, total, ingredients) in enumerate(records.gold_steps(row), 1):
        lines.append({"seq": seq, "tool": "craft", "args": {"ingredients": ingredients, "target": [item, total]}, "ok": True})
    lines.append({"seq": len(lines) + 1, "tool": "finish", "args": {"message": "done"}})
    return lines


def dump(records_: List[dict]) -> bytes:
    return "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records_).encode()


def _forged_ok(log):  # a rejected craft (impossible count) claimed as accepted, before the real ones
    item = log[0]["args"]["target"][0]
    bad = {"seq": 1, "tool": "craft", "args": {"ingredients": {}, "target": [item, 1]}, "ok": True}
    return [bad] + [dict(record, seq=record["seq"] + 1) for record in log]


def _insufficient_as_accepted(log):  # the last craft twice: the second lacks ingredients, claimed ok
    extra = dict(log[-2], seq=log[-1]["seq"])
    return log[:-1] + [extra, dict(log[-1], seq=log[-1]["seq"] + 1)]


def _accepted_marked_rejected(log):
    return [dict(log[0], ok=False)] + log[1:]


def _after_finish(log):
    return log + [{"seq": len(log) + 1, "tool": "view_inventory", "args": {}}]


def _seq_skips(log):
    return [dict(record, seq=record["seq"] + (1 if index else 0)) for index, record in enumerate(log)]


def _seq_repeats(log):
    return [log[0], dict(log[1], seq=1)] + log[2:]


def _seq_bool(log):
    return [dict(log[0], seq=True)] + log[1:]


def _unknown_tool(log):
    return [{"seq": 1, "tool": "teleport", "args": {}}] + [dict(r, seq=r["seq"] + 1) for r in log]


def _extra_key(log):
    return [dict(log[0], note="trust me")] + log[1:]


def _ok_on_finish(log):
    return log[:-1] + [dict(log[-1], ok=True)]


def _missing_ok(log):
    return [{key: value for key, value in log[0].items() if key != "ok"}] + log[1:]


def _empty_message(log):
    return log[:-1] + [dict(log[-1], args={"message": ""})]


# name -> (tampering, the part of the verdict's reason that names what is wrong)
TAMPERED_RECORDS = {
    "forged ok on a rejected craft": (_forged_ok, "line 1: ok is true, yet the rules reject this craft"),
    "craft the rules reject recorded as accepted": (_insufficient_as_accepted, "ok is true, yet the rules reject this craft"),
    "accepted craft recorded as rejected": (_accepted_marked_rejected, "line 1: ok is false, yet the rules accept this craft"),
    "record after finish": (_after_finish, "follows the finish call"),
    "seq skips": (_seq_skips, "line 2: seq should be 2 but reads 3"),
    "seq repeats": (_seq_repeats, "line 2: seq should be 2 but reads 1"),
    "seq is a boolean": (_seq_bool, "line 1: seq should be 1 but reads true"),
    "unknown tool": (_unknown_tool, '"teleport" is not a tool of the game'),
    "extra key": (_extra_key, "unexpected: note"),
    "ok on a non-craft": (_ok_on_finish, "a finish record has the fields args/seq/tool (unexpected: ok"),
    "craft without ok": (_missing_ok, "absent: ok"),
    "finish with an empty message": (_empty_message, "finish was called with an empty message"),
}


def _duplicate_key(data: bytes) -> bytes:
    return data.replace(b'{"seq":1,', b'{"seq":1,"seq":1,', 1)


def _nan(data: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[0] = lines[0].replace(b'"ok":true', b'"ok":true,"x":NaN')
    return b"\n".join(lines)


def _nan_in_args(data: bytes) -> bytes:
    return data.replace(b'"message":"done"}', b'"message":"done","n":NaN}')


def _infinity_count(data: bytes) -> bytes:
    return b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",Infinity]},"ok":false}\n' + data.replace(
        b'{"seq":', b'{"seq":1000'
    )


def _nested(depth: int):
    """A first record whose count is a list nested ``depth`` deep, then the gold episode renumbered."""
    def tamper(data: bytes) -> bytes:
        head = b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",' + b"[" * depth + b"]" * depth + b']},"ok":false}\n'
        return head + b"".join(_renumber(line, 1) for line in data.splitlines(keepends=True))
    return tamper


def _first_count(literal: bytes):
    """A first record that is a rejected craft whose count is written ``literal``, then the gold episode."""
    def tamper(data: bytes) -> bytes:
        head = b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",' + literal + b']},"ok":true}\n'
        return head + b"".join(_renumber(line, 1) for line in data.splitlines(keepends=True))
    return tamper


def _renumber(line: bytes, by: int) -> bytes:
    record = json.loads(line)
    return dump([dict(record, seq=record["seq"] + by)])


def _spaced(data: bytes) -> bytes:  # the same records, written with json.dumps' default separators
    return b"".join(json.dumps(json.loads(line)).encode() + b"\n" for line in data.splitlines())


def _escaped(data: bytes) -> bytes:  # the same message, one letter written as a JSON escape
    return data.replace(b'"message":"done"', b'"message":"\\u0064one"')


TAMPERED_BYTES = {
    "duplicate key": (_duplicate_key, "repeated member name(s): 'seq'"),
    "NaN": (_nan, "NaN is outside JSON"),
    "NaN in arguments": (_nan_in_args, "NaN is outside JSON"),
    "Infinity": (_infinity_count, "Infinity is outside JSON"),
    "no final newline": (lambda data: data[:-1], "final line is missing its newline"),
    "not UTF-8": (lambda data: data.replace(b"done", b"d\xffne"), "holds bytes outside ASCII"),
    "not ASCII": (lambda data: data.replace(b"done", "d\u00f6ne".encode()), "holds bytes outside ASCII"),
    "blank line": (lambda data: b"\n" + data, "line 1 is not a single JSON value"),
    "CRLF": (lambda data: data.replace(b"\n", b"\r\n"), "line 1 is not a single JSON value"),
    "trailing garbage": (lambda data: data + b"#\n", "is not a single JSON value"),
    "spaces after separators": (_spaced, "line 1 is not written as the game writes it"),
    "an escaped letter": (_escaped, "is not written as the game writes it"),
    "a count written -0": (_first_count(b"-0"), "line 1 is not written as the game writes it"),
    "a count with a leading zero": (_first_count(b"02"), "line 1 is not a single JSON value"),
    # A float is how the command writes 2.0, so the line is well formed; the rules reject the craft.
    "a count written 2.0": (_first_count(b"2.0"), "line 1: ok is true, yet the rules reject this craft"),
    "a float seq": (lambda data: data.replace(b'{"seq":1,', b'{"seq":1.0,', 1), "line 1: seq should be 1 but reads 1.0"),
    "nested 1,100 deep (a RecursionError on 3.11)": (_nested(1100), "JSON arrays and objects (at most"),
    "nested 5,000 deep (a RecursionError on 3.12)": (_nested(5000), "JSON arrays and objects (at most"),
    "nested just past the cap": (_nested(game.CONTAINER_LIMIT - 3), "opens %d JSON arrays and objects" % (game.CONTAINER_LIMIT + 1)),
    "a 19-digit count": (lambda data: data.replace(b'"message":"done"', b'"message":"done","n":1234567890123456789'),
                         "has a number of more than 18 digits"),
    "a 64 KiB line": (lambda data: data.replace(b'"message":"done"', b'"message":"' + b"d" * game.LINE_LIMIT + b'"'),
                      "is longer than %d bytes" % game.LINE_LIMIT),
}


@pytest.fixture(scope="module")
def gold_case(tasks_dir, data):
    row = sample_rows(data)[0]
    return row, tasks_dir / row["name"]


def grade(root: Path) -> float:
    result = run_script(root / "tests" / "test.sh", root)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return reward_of(root)


def test_the_untampered_log_scores_one(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    assert grade(root) == 1.0


@pytest.mark.parametrize("name", list(TAMPERED_RECORDS))
def test_tampered_records_score_zero_for_the_right_reason(gold_case, tmp_path, name):
    row, task_dir = gold_case
    tamper, reason = TAMPERED_RECORDS[name]
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(tamper(gold_log(row))))
    assert grade(root) == 0.0
    assert reason in verdict_of(root)["reason"]


@pytest.mark.parametrize("name", list(TAMPERED_BYTES))
def test_tampered_bytes_score_zero_for_the_right_reason(gold_case, tmp_path, name):
    row, task_dir = gold_case
    tamper, reason = TAMPERED_BYTES[name]
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(tamper(dump(gold_log(row))))
    assert grade(root) == 0.0
    assert reason in verdict_of(root)["reason"]


def test_a_log_that_is_a_symbolic_link_scores_zero(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    real = tmp_path / "real.jsonl"
    real.write_bytes(dump(gold_log(row)))
    (root / LOG_RELPATH).symlink_to(real)
    assert grade(root) == 0.0
    assert "symbolic link" in verdict_of(root)["reason"]


@pytest.mark.parametrize("linked", ["app/textcraft", "app"])
def test_a_log_below_a_linked_directory_scores_zero(gold_case, tmp_path, linked):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    real = tmp_path / "real"
    shutil.move(str(root / linked), str(real))
    (root / linked).symlink_to(real)
    assert (root / LOG_RELPATH).read_bytes() == dump(gold_log(row))  # the log is reachable through the link
    assert grade(root) == 0.0
    assert "symbolic link" in verdict_of(root)["reason"]


def test_a_fifo_scores_zero_without_hanging(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    os.mkfifo(root / LOG_RELPATH)
    assert grade(root) == 0.0  # run_script's timeout would fail a verifier that blocks
    assert "is not a regular file" in verdict_of(root)["reason"]


def test_a_log_over_32_mib_scores_zero(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    data = dump(gold_log(row))
    records_ = gold_log(row)
    filler = []
    size, seq = 0, 0
    # Valid get_info records up to the cap, then the real episode: only the size is wrong.
    line_items = ["x" * 1000]
    while size <= game.LOG_LIMIT:
        seq += 1
        line = json.dumps({"seq": seq, "tool": "get_info", "args": {"items": line_items}}, separators=(",", ":")) + "\n"
        filler.append(line)
        size += len(line)
    tail = [dict(record, seq=record["seq"] + seq) for record in records_]
    payload = "".join(filler).encode() + dump(tail)
    assert len(payload) > game.LOG_LIMIT and len(data) < game.LOG_LIMIT
    (root / LOG_RELPATH).write_bytes(payload)
    assert grade(root) == 0.0
    assert "32" in verdict_of(root)["reason"] or str(game.LOG_LIMIT) in verdict_of(root)["reason"]


@pytest.mark.parametrize("planted_as", ["file", "directory", "link"])
def test_a_planted_reward_is_removed_first(gold_case, tmp_path, planted_as):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    out = root / "logs" / "verifier"
    out.mkdir(parents=True)
    for name in ("reward.json", "reward.txt", game.VERDICT_FILE):
        if planted_as == "file":
            (out / name).write_text('{"reward": 1.0}\n' if name.endswith("json") else "1\n")
        elif planted_as == "directory":
            (out / name).mkdir()
            (out / name / "inside").write_text("1")
        else:
            target = tmp_path / ("target-" + name)
            target.write_text('{"reward": 1.0}\n')
            (out / name).symlink_to(target)
    # Call the game directly (test.sh also clears; the verifier must not rely on it).
    game_file = root / "tests" / "textcraft_game.py"
    result = subprocess.run(
        [sys.executable, "-I", str(game_file), "verify", "--task", str(root / "tests" / "task.json"), "--recipes",
         str(root / "tests" / "recipes.json"), "--root", str(root) + "/", "--log", LOG_RELPATH, "--out", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert reward_of(root) == 0.0 and "never ran a textcraft command" in verdict_of(root)["reason"]
    assert not (out / "reward.txt").exists()
    assert not (out / "reward.json").is_symlink()
    if planted_as == "link":
        assert (tmp_path / "target-reward.json").read_text() == '{"reward": 1.0}\n'  # not written through


def test_verdict_names_the_reason_and_counts(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(_after_finish(gold_log(row))))
    grade(root)
    verdict = verdict_of(root)
    assert verdict["reward"] == 0.0 and "follows the finish call" in verdict["reason"]
    assert verdict["task"] == row["name"]
    assert stat.S_IMODE((root / "logs" / "verifier" / "reward.json").stat().st_mode) == 0o644


def test_broken_trusted_files_are_a_setup_fault(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / "tests" / "task.json").write_text("{")
    result = run_script(root / "tests" / "test.sh", root)
    assert result.returncode == game.EXIT_UNPLAYABLE
    assert not (root / "logs" / "verifier" / "reward.json").exists()


@pytest.mark.parametrize("relpath", ["/app/textcraft/actions.jsonl", "app/../app/textcraft/actions.jsonl", "app//textcraft/actions.jsonl"])
def test_log_path_must_be_plainly_relative(gold_case, tmp_path, world, relpath):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    report = game.verify(str(root / "tests" / "task.json"), str(root / "tests" / "recipes.json"), str(root), relpath, str(tmp_path / "out"))
    assert report["reward"] == 0.0
    assert "is not a plain relative path below the root" in report["reason"]


def test_score_log_agrees_with_replay_on_the_gold_episode(world, data):
    """The log grader and the engine's replay give the same verdict for the same calls."""
    for row in sample_rows(data):
        log = gold_log(row)
        by_log = game.score_log(world, records.engine_task(row), dump(log))
        by_replay = game.replay(world, records.engine_task(row), log)
        assert by_log.as_dict() == by_replay.as_dict()
        assert by_log.reward == 1.0


# ------------------------------------------------------------------------------- outputs stay in the sandbox


def verify_directly(root: Path, out: Path) -> subprocess.CompletedProcess:
    tests = root / "tests"
    return subprocess.run(
        [sys.executable, "-I", str(tests / "textcraft_game.py"), "verify", "--task", str(tests / "task.json"), "--recipes",
         str(tests / "recipes.json"), "--root", str(root) + "/", "--log", LOG_RELPATH, "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize("linked", ["logs/verifier", "logs"])
def test_a_linked_output_directory_is_a_setup_fault_and_nothing_is_touched(gold_case, tmp_path, linked):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "verifier").mkdir(parents=True)
    for where in (elsewhere, elsewhere / "verifier"):
        (where / "reward.txt").write_text("1\n")
    (root / linked).parent.mkdir(parents=True, exist_ok=True)
    (root / linked).symlink_to(elsewhere if linked == "logs" else elsewhere / "verifier")
    before = sorted((path.relative_to(elsewhere), path.read_bytes()) for path in elsewhere.rglob("*") if path.is_file())
    result = verify_directly(root, root / "logs" / "verifier")
    assert result.returncode == game.EXIT_UNPLAYABLE
    assert "symbolic link" in result.stderr and "Traceback" not in result.stderr
    after = sorted((path.relative_to(elsewhere), path.read_bytes()) for path in elsewhere.rglob("*") if path.is_file())
    assert after == before


def test_a_missing_output_directory_is_created_below_the_root(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    assert verify_directly(root, root / "logs" / "verifier").returncode == 0
    assert reward_of(root) == 1.0


def test_an_output_directory_it_cannot_write_is_a_setup_fault(gold_case, tmp_path, monkeypatch, capsys):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    out = root / "logs" / "verifier"
    out.mkdir(parents=True)
    if os.geteuid() != 0:
        out.chmod(0o555)
    else:  # root writes through permission bits; make creating the staging file fail as EACCES would
        real_open = os.open

        def refusing_open(path, flags, *args, **kwargs):
            if str(path).endswith(".partial"):
                raise PermissionError(13, "Permission denied")
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(game.os, "open", refusing_open)
    tests = root / "tests"
    code = game.main(["verify", "--task", str(tests / "task.json"), "--recipes", str(tests / "recipes.json"),
                      "--root", str(root), "--log", LOG_RELPATH, "--out", str(out)])
    out.chmod(0o755)
    assert code == game.EXIT_UNPLAYABLE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "the reward cannot be written" in error
    assert sorted(os.listdir(out)) == []


def test_recipes_that_do_not_match_the_task_are_a_setup_fault(gold_case, tmp_path):
    row, task_dir = gold_case
    root = make_sandbox(tmp_path / "sandbox", task_dir)
    (root / LOG_RELPATH).write_bytes(dump(gold_log(row)))
    recipes = root / "tests" / "recipes.json"
    world_document = json.loads(recipes.read_bytes())
    for item in world_document["recipes"]:  # a doctored world: every recipe makes one more
        for recipe in world_document["recipes"][item]:
            recipe["result_count"] += 1
    recipes.write_bytes(json.dumps(world_document).encode())
    result = run_script(root / "tests" / "test.sh", root)
    assert result.returncode == game.EXIT_UNPLAYABLE
    assert "task.json names" in result.stderr and "Traceback" not in result.stderr
    assert not (root / "logs" / "verifier" / "reward.json").exists()


def test_more_records_than_the_cap_score_zero(gold_case, world):
    row, _ = gold_case
    filler = [{"seq": n, "tool": "view_inventory", "args": {}} for n in range(1, game.RECORD_LIMIT + 1)]
    tail = [dict(record, seq=record["seq"] + game.RECORD_LIMIT) for record in gold_log(row)]
    verdict = game.score_log(world, records.engine_task(row), dump(filler + tail))
    assert verdict.reward == 0.0 and "more than %d records" % game.RECORD_LIMIT in verdict.reason
    assert verdict.calls == game.RECORD_LIMIT
    room = game.RECORD_LIMIT - len(tail)  # exactly at the cap: the same episode passes
    within = game.score_log(world, records.engine_task(row), dump(filler[:room] + [dict(record, seq=record["seq"] + room) for record in gold_log(row)]))
    assert within.reward == 1.0 and within.calls == game.RECORD_LIMIT, within.reason
