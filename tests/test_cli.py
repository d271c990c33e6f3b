"""`python -m textcraft_synth replay`: verdicts from the shell, one error line for user mistakes."""

from __future__ import annotations

import json
import subprocess
import sys

from tcsynth import records


def _run(repo, *args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "textcraft_synth", *args], cwd=repo, input=stdin, capture_output=True, text=True
    )


def test_gold_replay_wins_and_prints_the_verdict(repo):
    result = _run(repo, "replay", "textcraft-synth-val-medium-00003", "--gold", "-q")
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["task"] == "textcraft-synth-val-medium-00003" and verdict["reward"] == 1.0


def test_calls_from_stdin_as_json_lines(repo, data):
    row = data.tasks["train"][0]
    calls = records.gold_tool_calls(row)[:2]
    stdin = "\n".join(json.dumps(call) for call in calls) + "\n"
    result = _run(repo, "replay", "train:0", "--calls", "-", stdin=stdin)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "[1] Successfully crafted 12 a9_i1(s)"
    assert json.loads(lines[-1])["reason"] == "the episode did not end with finish"


def test_unknown_task_and_bad_json_are_one_line_errors(repo, tmp_path):
    result = _run(repo, "replay", "no-such-task", "--gold")
    assert result.returncode == 1 and result.stderr.startswith("error: no task named") and "Traceback" not in result.stderr
    bad = tmp_path / "calls.json"
    bad.write_text("[{oops")
    result = _run(repo, "replay", "val:0", "--calls", str(bad))
    assert result.returncode == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    result = _run(repo, "replay", "val:0", "--calls", str(tmp_path / "missing.json"))
    assert result.returncode == 1 and "cannot read" in result.stderr
