"""``eval`` as it runs: episodes streamed to disk, ``--resume`` after a kill, ``--concurrency``, the protocol file."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tcsynth import cli, eval_dir, evaluate
from tcsynth.agents import OpenAIAgent


def run_cli(*argv):
    return cli.main(["eval", *argv, "-q"])


def files_of(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def lines_of(out):
    return (out / eval_dir.EPISODES_FILE).read_text().splitlines()


@pytest.fixture(scope="module")
def bench(repo):
    """benchmarks/bench_eval_server.py, whose stand-in server the kill test plays against."""
    spec = importlib.util.spec_from_file_location("bench_eval_server", repo / "benchmarks" / "bench_eval_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PLANNER = ("--agent", "planner", "--limit", "8", "--rollouts", "2")


def test_a_finished_run_resumes_to_the_same_files(tmp_path):
    out = tmp_path / "run"
    assert run_cli(*PLANNER, "--out", str(out)) == 0
    before = files_of(out)
    assert json.loads(before["protocol.json"])["agent"] == "planner"
    assert run_cli(*PLANNER, "--out", str(out), "--resume") == 0
    assert files_of(out) == before


def test_resume_keeps_finished_lines_and_replays_torn_and_aborted_ones(tmp_path):
    out = tmp_path / "run"
    assert run_cli(*PLANNER, "--out", str(out)) == 0
    complete = files_of(out)
    lines = lines_of(out)
    # As a killed run leaves it: completion order, an aborted episode, a torn last line, no summary.
    kept = [json.loads(line) for line in lines[:5]]
    kept[0]["steps"] = 999  # a mark: a kept episode is copied, not played again
    kept[1]["aborted"] = "the endpoint went away"  # an aborted episode is played again
    torn = lines[5][: len(lines[5]) // 2]
    shuffled = [kept[3], kept[0], kept[4], kept[2], kept[1]]
    (out / eval_dir.EPISODES_FILE).write_text("".join(evaluate.episode_line(e) + "\n" for e in shuffled) + torn)
    (out / eval_dir.SUMMARY_FILE).unlink()
    (out / eval_dir.SUMMARY_MD_FILE).unlink()

    assert run_cli(*PLANNER, "--out", str(out), "--resume") == 0
    resumed = lines_of(out)
    assert len(resumed) == len(lines)
    assert json.loads(resumed[0])["steps"] == 999  # kept as it was, and put back in task order
    assert resumed[1:] == lines[1:]  # the aborted and the torn episode were played again, the rest kept or played
    assert files_of(out)["protocol.json"] == complete["protocol.json"]
    assert json.loads((out / eval_dir.SUMMARY_FILE).read_text())["overall"]["episodes"] == 16


@pytest.mark.parametrize(
    "change, difference",
    [
        (("--agent", "planner", "--limit", "8", "--rollouts", "3"), "rollouts 2, now 3"),
        (("--agent", "planner", "--limit", "9", "--rollouts", "2"), "limit 8, now 9"),
        (("--agent", "planner", "--limit", "8", "--rollouts", "2", "--seed", "1"), "seed 0, now 1"),
        (("--agent", "planner", "--limit", "8", "--rollouts", "2", "--max-steps", "0"), "max_steps null, now 0"),
        (("--agent", "planner", "--limit", "8", "--rollouts", "2", "--batch"), "options"),
        (("--agent", "planner", "--limit", "8", "--rollouts", "2", "--no-turns"), "record_turns true, now false"),
        (("--agent", "oracle", "--limit", "8", "--rollouts", "2"), 'agent "planner", now "oracle"'),
    ],
)
def test_resume_under_another_protocol_is_refused_in_one_line(tmp_path, capsys, change, difference):
    out = tmp_path / "run"
    assert run_cli(*PLANNER, "--out", str(out)) == 0
    before = files_of(out)
    capsys.readouterr()
    assert run_cli(*change, "--out", str(out), "--resume") == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "another protocol" in err and difference in err
    assert files_of(out) == before


def test_an_earlier_run_needs_resume_or_force(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli(*PLANNER, "--out", str(out)) == 0
    capsys.readouterr()
    assert run_cli(*PLANNER, "--out", str(out)) == 1
    assert "pass --resume to finish it, --force to replace it" in capsys.readouterr().err


def test_a_run_without_a_protocol_file_cannot_be_resumed(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli(*PLANNER, "--out", str(out)) == 0
    (out / eval_dir.PROTOCOL_FILE).unlink()
    capsys.readouterr()
    assert run_cli(*PLANNER, "--out", str(out), "--resume") == 1
    assert "holds no protocol.json" in capsys.readouterr().err


def test_resume_of_nothing_is_a_fresh_run(tmp_path):
    assert run_cli(*PLANNER, "--out", str(tmp_path / "new"), "--resume") == 0
    assert len(lines_of(tmp_path / "new")) == 16


def test_workers_and_concurrency_do_not_combine(tmp_path, capsys):
    assert run_cli(*PLANNER, "--workers", "2", "--concurrency", "4", "--out", str(tmp_path / "x")) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --workers and --concurrency do not combine") and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_same_bytes_whatever_the_concurrency(tmp_path):
    runs = []
    for name, extra in (("one", ()), ("threads", ("--concurrency", "5")), ("many", ("--concurrency", "64"))):
        out = tmp_path / name
        assert run_cli("--agent", "random", "--limit", "10", "--rollouts", "2", "--seed", "4", *extra, "--out", str(out)) == 0
        runs.append(files_of(out))
    assert runs[0] == runs[1] == runs[2]


def test_an_error_in_an_episode_thread_reaches_the_caller(data, world, monkeypatch):
    calls = []

    def broken(row, *args, **kwargs):
        calls.append(row["name"])
        raise RuntimeError("boom in %s" % row["name"])

    monkeypatch.setattr(evaluate, "run_episode", broken)
    spec = evaluate.AgentSpec("nop")
    with pytest.raises(RuntimeError, match="boom in"):
        evaluate.run_episodes(data.tasks["val"][:50], data.world_document, spec, evaluate.Protocol(), progress=False, concurrency=4)
    assert len(calls) < 50  # the other threads stopped taking episodes


# ------------------------------------------------------------------------------------- a killed real run


def seeds_of(names):
    """The ``seed`` the openai agent sends for each (task, rollout 0) episode, as the stand-in sees it."""
    seeds = {}
    for name in names:
        agent = OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1")
        agent.reset({"messages": [], "tools": []}, {}, rng=random.Random(evaluate.episode_seed(0, name, 0)))
        seeds[agent.seed] = name
    return seeds


def test_a_killed_run_resumes_without_redoing_finished_episodes(repo, tmp_path, bench):
    stand_in = bench.StandIn(latency=0.15).start()
    try:
        command = [sys.executable, "-m", "textcraft_synth", "eval", "--agent", "openai", "--model", "stand-in",
                   "--base-url", stand_in.base_url, "--limit", "16", "--concurrency", "4", "-q"]
        # An uninterrupted run, for comparison.
        subprocess.run(command + ["--out", str(tmp_path / "whole")], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        whole_requests = len(stand_in.log)
        stand_in.log.clear()

        out = tmp_path / "killed"
        child = subprocess.Popen(command + ["--out", str(out)], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        episodes = out / eval_dir.EPISODES_FILE
        deadline = time.monotonic() + 120
        while not (episodes.exists() and episodes.read_bytes().count(b"\n") >= 5):
            assert child.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        first_requests = len(stand_in.log)
        stand_in.log.clear()

        on_disk = episodes.read_bytes()
        finished = {json.loads(line)["name"] for line in on_disk.split(b"\n")[:-1]}
        assert 5 <= len(finished) < 16 and not (out / eval_dir.SUMMARY_FILE).exists()
        seeds = seeds_of(finished)

        subprocess.run(command + ["--out", str(out), "--resume"], cwd=repo, check=True, stdout=subprocess.DEVNULL)
        redone = sorted({seeds[seed] for seed, _, _ in stand_in.log if seed in seeds})
        assert redone == []  # no finished episode asked the server anything again
        assert len(stand_in.log) < whole_requests <= first_requests + len(stand_in.log)
        assert files_of(out) == files_of(tmp_path / "whole")
        summary = json.loads((out / eval_dir.SUMMARY_FILE).read_text())
        assert summary["usage"]["requests"] == whole_requests
    finally:
        stand_in.stop()
