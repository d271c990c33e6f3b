"""Opt-in: our ``textcraft`` command and verifier against the reference ones (platoon-textcraft 0.3.0).

Runs only when TEXTCRAFT_REFERENCE points at the unpacked wheel (the directory holding
``platoon_textcraft/``).  The reference is a black box: its game file is run as a command, exactly as a
task runs it, and only outputs, exit codes, logs and rewards are compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Mapping, Sequence, Tuple

import pytest

from tcsynth import game, harbor, records

REFERENCE = os.environ.get("TEXTCRAFT_REFERENCE")
pytestmark = pytest.mark.skipif(not REFERENCE, reason="set TEXTCRAFT_REFERENCE to the unpacked platoon-textcraft wheel")
LOG_RELPATH = "app/textcraft/actions.jsonl"


@pytest.fixture(scope="module")
def reference_game() -> bytes:
    path = Path(REFERENCE or ".") / "platoon_textcraft" / "harbor" / "game.py"
    if not path.exists():
        pytest.fail("no reference game at %s" % path)
    return path.read_bytes()


def sandbox(root: Path, row: Mapping, recipes: bytes, game_bytes: bytes) -> Path:
    """ROOT/app/textcraft with the given game file, and ROOT/tests with the same trusted copies."""
    task_json = harbor.files.task_json_bytes(row, records.TASK_NAME_PREFIX, records.sha256_hex(recipes))
    for where in (root / "app" / "textcraft", root / "tests"):
        where.mkdir(parents=True)
        (where / "textcraft_game.py").write_bytes(game_bytes)
        (where / "recipes.json").write_bytes(recipes)
        (where / "task.json").write_bytes(task_json)
    return root


def command(root: Path, words: Sequence[str]) -> Tuple[int, str]:
    env = dict(os.environ, TEXTCRAFT_DIR=str(root / "app" / "textcraft"))
    result = subprocess.run(
        [sys.executable, "-I", str(root / "app" / "textcraft" / "textcraft_game.py"), *words],
        capture_output=True, text=True, env=env, timeout=60,
    )
    return result.returncode, result.stdout


def verify(root: Path, game_root: Path) -> float:
    """Grade ``root``'s log with the verifier in ``game_root/tests``."""
    out = root / ("out-%s" % game_root.name)
    out.mkdir(exist_ok=True)  # test.sh makes it
    tests = game_root / "tests"
    result = subprocess.run(
        [sys.executable, "-I", str(tests / "textcraft_game.py"), "verify", "--task", str(tests / "task.json"),
         "--recipes", str(tests / "recipes.json"), "--root", str(root) + "/", "--log", LOG_RELPATH, "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads((out / "reward.json").read_text())["reward"]


def episode(row: Mapping, world: game.World) -> List[List[str]]:
    """Gold commands mixed with mistakes of every kind, then finish and one command after it."""
    steps = list(records.gold_steps(row))
    item, total, ingredients = steps[0]
    recipe_count = world.recipes[item][0][0]
    words = ["%s=%d" % kv for kv in ingredients.items()]
    mistakes = [
        ["craft", item, str(total + 1 if (total + 1) % recipe_count else total + 2)] + words,  # not divisible
        ["craft", item, str(total)] + words + ["raw_zz=1"],  # extra ingredient
        ["craft", item, str(total * 1000)] + ["%s=%d" % (k, v * 1000) for k, v in ingredients.items()],  # too few held
        ["craft", "no_such_item", "1", "raw_a1=1"],  # no recipe
        ["craft", item, "0"] + words,  # zero
        ["craft", item, "-3"] + words,  # negative
        ["craft", "--json", json.dumps({"ingredients": ingredients, "target": [item, float(total)]})],  # float count
        ["craft", "--json", json.dumps({"ingredients": [], "target": [item, total]})],  # not a dict
        ["craft", "--json", json.dumps({"ingredients": ingredients, "target": [item, True]})],  # bool count
        ["craft", "--json", json.dumps({"ingredients": ingredients, "target": [item]})],  # short target
        ["info", item, "raw_a1", "nothing"],
        ["info", "--json", json.dumps([item, item])],
        ["info"],
        ["inventory"],
        ["get_info", item],
        ["view_inventory"],
    ]
    script = [mistakes[0], mistakes[1]]
    for number, (step_item, step_total, step_ingredients) in enumerate(steps):
        script.append(["craft", step_item, str(step_total)] + ["%s=%d" % kv for kv in step_ingredients.items()])
        if number == 0:
            script.extend(mistakes[2:])
    script += [["inventory"], ["finish", "Crafted", "everything"], ["inventory"]]
    return script


USAGE_ERRORS = [["craft", "x", "three"], ["craft", "x", "3", "y"], ["inventory", "now"], ["finish"], ["dance"]]


@pytest.fixture(scope="module")
def rows(data) -> List[Mapping]:
    """The val task with the shortest gold solution of each difficulty (short runs, every depth range)."""
    chosen = {}
    for row in data.tasks["val"]:
        best = chosen.get(row["difficulty"])
        if best is None or len(row["gold_trajectory"]) < len(best["gold_trajectory"]):
            chosen[row["difficulty"]] = row
    return [chosen[d] for d in records.DIFFICULTIES]


def test_same_outputs_exit_codes_and_logs(rows, data, world, reference_game, tmp_path):
    for row in rows[:2]:
        ours = sandbox(tmp_path / row["name"] / "ours", row, data.recipes_bytes, harbor.game_bytes())
        theirs = sandbox(tmp_path / row["name"] / "theirs", row, data.recipes_bytes, reference_game)
        script = episode(row, world)
        for number, words in enumerate(script):
            mine, reference = command(ours, words), command(theirs, words)
            if number == len(script) - 1:  # after finish: both refuse; the wording is each game's own
                assert mine[0] == reference[0] == 1
            else:
                assert mine == reference, words
        for words in USAGE_ERRORS:
            assert command(ours, words)[0] == command(theirs, words)[0] == 2
        log = (ours / LOG_RELPATH).read_bytes()
        assert log == (theirs / LOG_RELPATH).read_bytes()


def partial_episodes(row: Mapping) -> List[List[List[str]]]:
    steps = [["craft", i, str(t)] + ["%s=%d" % kv for kv in g.items()] for i, t, g in records.gold_steps(row)]
    return [
        steps + [["finish", "done"]],  # success
        steps[:-1] + [["finish", "done"]],  # one craft short
        steps,  # never finished
        steps + [["finish", ""]],  # empty message
        [["inventory"], ["finish", "nothing"]],  # finish without crafting
        [steps[0], steps[0] + ["x=1"], ["info", "raw_a1"]] + steps[1:] + [["finish", "ok"]],  # rejected craft mid-way
    ]


def test_each_verifier_grades_the_others_logs_the_same(rows, data, reference_game, tmp_path):
    for row in rows:
        for number, script in enumerate(partial_episodes(row)):
            for writer in ("ours", "theirs"):
                base = tmp_path / row["name"] / str(number) / writer
                ours = sandbox(base / "ours", row, data.recipes_bytes, harbor.game_bytes())
                theirs = sandbox(base / "theirs", row, data.recipes_bytes, reference_game)
                played = ours if writer == "ours" else theirs
                for words in script:
                    command(played, words)
                # Grade the written log with both verifiers.
                rewards = {verify(played, ours), verify(played, theirs)}
                assert len(rewards) == 1, (row["name"], number, writer)
                if number == 0:
                    assert rewards == {1.0}
