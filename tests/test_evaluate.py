"""The eval runner and command, the summary statistics, and the leaderboard rendering."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from pathlib import Path

import pytest

from tcsynth import cli, evaluate, records, store
from tcsynth.agents import PlannerAgent
from tcsynth.env import NO_LIMIT
from tcsynth.evaluate import Protocol, crafter_score, depth_reached, milestone_rates, run_episode, wilson_interval

Z = 1.959963984540054
READ_RECORDS = store.load_records  # before the fixture below replaces it


def load_leaderboard(repo):
    spec = importlib.util.spec_from_file_location("leaderboard", repo / "scripts" / "leaderboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def records_read_once(data, monkeypatch, request):
    """The command reads data/ through store.load_records; hand it the session's copy to keep the tests
    quick, after checking it asked for the checkout's data/ (the real loader runs in the tests marked
    ``real_loader``, through --data-dir)."""
    if "real_loader" in request.keywords:
        return

    def load(data_dir, splits=records.SPLITS):
        assert Path(data_dir).resolve() == store.DEFAULT_DATA_DIR.resolve(), data_dir
        return data

    monkeypatch.setattr(store, "load_records", load)


def run_cli(*argv):
    return cli.main(["eval", *argv, "-q"])


# ------------------------------------------------------------------------------------------------ statistics


class TestWilson:
    def test_no_successes(self):
        # With k = 0 the interval is [0, z^2 / (n + z^2)].
        low, high = wilson_interval(0, 10)
        assert low == 0.0 and high == pytest.approx(Z * Z / (10 + Z * Z))

    def test_all_successes(self):
        low, high = wilson_interval(20, 20)
        assert high == 1.0 and low == pytest.approx(20 / (20 + Z * Z))

    def test_half_is_symmetric_about_one_half(self):
        low, high = wilson_interval(50, 100)
        assert low + high == pytest.approx(1.0) and high - low == pytest.approx(2 * Z * math.sqrt(0.25 / 100 + Z * Z / 40000) / (1 + Z * Z / 100))

    def test_no_trials(self):
        assert wilson_interval(0, 0) == (0.0, 1.0)


class TestCrafterScore:
    @pytest.mark.parametrize(
        "rates, expected",
        [
            ([1.0, 1.0, 1.0], 100.0),  # every milestone every time
            ([0.0, 0.0], 0.0),  # none
            ([1.0, 0.0], math.sqrt(101) - 1),  # exp((ln 101 + ln 1) / 2) - 1
            ([0.5], 50.0),  # one milestone: the rate itself, in percent
            ([], 0.0),  # nothing to score
        ],
    )
    def test_values(self, rates, expected):
        assert crafter_score(rates) == pytest.approx(expected)

    def test_rare_progress_weighs_more_than_common(self):
        # Raising a rare milestone from 0% to 10% moves the score more than raising a common one from 80% to 90%.
        assert crafter_score([0.8, 0.1]) - crafter_score([0.8, 0.0]) > crafter_score([0.9, 0.0]) - crafter_score([0.8, 0.0])


def test_milestones_count_only_episodes_that_could_reach_them():
    episodes = [{"target_depth": 2, "depth_reached": 2}, {"target_depth": 4, "depth_reached": 1}]
    table = milestone_rates(episodes)
    assert list(table) == ["1", "2", "3", "4"]
    assert table["2"] == {"eligible": 2, "reached": 1, "rate": 0.5}
    assert table["3"] == {"eligible": 1, "reached": 0, "rate": 0.0}


def test_depth_reached_counts_only_the_target_tree(data, world):
    row = data.tasks["val"][0]
    target = row["target_items"][0]["item"]
    gold_items = [step["item"] for step in row["gold_trajectory"]]
    assert depth_reached(world, row, []) == 0
    assert depth_reached(world, row, [target]) == row["max_depth"]
    assert depth_reached(world, row, gold_items[:1]) == world.depth(gold_items[0])
    outside = next(item for item in sorted(world.recipes) if world.depth(item) == 12)
    assert depth_reached(world, row, [outside]) == 0


def test_episode_record(data, world):
    row = data.tasks["val"][1]
    episode = run_episode(row, world, PlannerAgent(), Protocol(max_steps=75))
    for key in ("name", "reward", "turns", "verdict", "steps", "tool_calls", "crafts", "gold_crafts", "depth_reached", "problems"):
        assert key in episode
    assert episode["name"] == row["name"] and episode["reward"] == 1.0 == episode["verdict"]["reward"]
    assert len(episode["turns"]) == episode["steps"] and episode["depth_reached"] == row["max_depth"]
    assert episode["turns"][0]["action"] == [{"name": "view_inventory", "arguments": {}}]
    json.dumps(episode, allow_nan=False)  # plain JSON


def test_an_eval_run_can_read_one_split(repo, data):
    only_val = READ_RECORDS(repo / "data", splits=("val",))
    assert list(only_val.tasks) == ["val"] and only_val.tasks["val"] == data.tasks["val"]
    assert only_val.world_document == data.world_document


def test_episode_seeds_are_stable_and_distinct():
    assert evaluate.episode_seed(0, "t", 0) == evaluate.episode_seed(0, "t", 0)
    assert len({evaluate.episode_seed(s, n, r) for s in (0, 1) for n in ("a", "b") for r in (0, 1)}) == 8


def test_episode_seeds_do_not_depend_on_the_hash_seed():
    # Two other processes with other PYTHONHASHSEED values give the same seeds as this one.
    import os
    import subprocess
    import sys

    code = "from tcsynth import evaluate; print([evaluate.episode_seed(s, n, 1) for s in (0, 7) for n in ('val-a', 'train-b')])"
    here = [evaluate.episode_seed(s, n, 1) for s in (0, 7) for n in ("val-a", "train-b")]
    for hash_seed in ("1", "4242"):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                env=dict(os.environ, PYTHONHASHSEED=hash_seed), cwd=Path(__file__).resolve().parent.parent)
        assert json.loads(result.stdout) == here


# --------------------------------------------------------------------------------------------- the command


def test_eval_writes_episodes_and_summary(tmp_path, data):
    out = tmp_path / "oracle"
    assert run_cli("--agent", "oracle", "--batch", "--limit", "6", "--out", str(out)) == 0
    assert sorted(p.name for p in out.iterdir()) == ["episodes.jsonl", "protocol.json", "summary.json", "summary.md"]
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["name"] for e in episodes] == [row["name"] for row in data.tasks["val"][:6]]
    assert all(e["reward"] == 1.0 and e["steps"] == 1 for e in episodes)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["successes"] == 6 and summary["score"] == 100.0
    assert summary["agent"] == "oracle" and summary["options"] == {"calls_per_turn": None}
    assert set(summary["by_difficulty"]) <= set(records.DIFFICULTIES)
    assert "| all | 6 | 100.0 |" in (out / "summary.md").read_text()


def test_same_inputs_same_bytes_whatever_the_worker_count(tmp_path):
    outputs = []
    for name, workers in (("a", "1"), ("b", "1"), ("c", "2")):
        out = tmp_path / name
        assert run_cli("--agent", "random", "--limit", "12", "--rollouts", "2", "--seed", "3", "--workers", workers, "--out", str(out)) == 0
        outputs.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert outputs[0] == outputs[1] == outputs[2]


def test_rollouts_and_seed_change_random_episodes(tmp_path):
    assert run_cli("--agent", "random", "--limit", "4", "--rollouts", "3", "--out", str(tmp_path / "x")) == 0
    episodes = [json.loads(line) for line in (tmp_path / "x" / "episodes.jsonl").read_text().splitlines()]
    assert [(e["name"][-5:], e["rollout"]) for e in episodes][:3] == [("00000", 0), ("00000", 1), ("00000", 2)]
    assert len({json.dumps(e["turns"]) for e in episodes[:3]}) > 1


def test_budget_one_truncates_the_planner(tmp_path):
    assert run_cli("--agent", "planner", "--max-steps", "1", "--limit", "5", "--no-turns", "--out", str(tmp_path / "p")) == 0
    episodes = [json.loads(line) for line in (tmp_path / "p" / "episodes.jsonl").read_text().splitlines()]
    assert all(e["truncated"] and not e["terminated"] and e["reward"] == 0.0 and "turns" not in e for e in episodes)
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["max_steps"] == 1 and summary["overall"]["truncated"] == 5


def test_unlimited_budget_is_recorded(tmp_path):
    assert run_cli("--agent", "nop", "--max-steps", "0", "--limit", "1", "--out", str(tmp_path / "n")) == 0
    summary = json.loads((tmp_path / "n" / "summary.json").read_text())
    assert summary["max_steps"] == 0 == NO_LIMIT  # one scheme: 0 is no limit, null the row's budget
    assert "turn budget none" in (tmp_path / "n" / "summary.md").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--agent", "planner", "--config", "nope"], "unknown task config 'nope'"),
        (["--agent", "planner", "--config", "recipes"], "unknown task config 'recipes'"),
        (["--agent", "planner", "--split", "test"], "has no split 'test'"),
        (["--agent", "nop", "--batch"], "--calls-per-turn is not an option of the nop agent"),
        (["--agent", "planner", "--model", "m"], "--model is not an option of the planner agent"),
        (["--agent", "openai"], "--agent openai needs --model"),
    ],
)
def test_user_mistakes_are_one_error_line(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert run_cli(*argv, "--out", str(out)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_an_output_directory_with_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert run_cli("--agent", "nop", "--limit", "1", "--out", str(tmp_path)) == 1
    assert "not eval output" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_previous_run_is_kept_unless_forced(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli("--agent", "oracle", "--limit", "3", "--out", str(out)) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run_cli("--agent", "nop", "--limit", "2", "--out", str(out)) == 1
    assert "already holds an eval run" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert run_cli("--agent", "nop", "--limit", "2", "--out", str(out), "--force") == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2


# ------------------------------------------------------------------------------------------- the leaderboard


def test_readme_table_is_what_the_script_renders_from_the_committed_results(repo):
    leaderboard = load_leaderboard(repo)
    rendered = leaderboard.render_table(leaderboard.load_summaries(repo / "results"))
    assert leaderboard.readme_table((repo / "README.md").read_text()) == rendered


def test_committed_results_follow_the_protocol_and_cover_the_baselines(repo):
    leaderboard = load_leaderboard(repo)
    summaries = leaderboard.load_summaries(repo / "results")
    assert {name for name, _ in leaderboard.BASELINES} <= set(summaries)
    for name, summary in summaries.items():
        assert summary["tasks"] == records.TASK_COUNTS["val"], name
        assert summary["overall"]["episodes"] == records.TASK_COUNTS["val"] * leaderboard.PROTOCOL["rollouts"], name
    assert summaries["oracle-batched"]["overall"]["success_rate"] == 1.0
    assert summaries["planner-batched"]["overall"]["success_rate"] == 1.0
    assert summaries["nop"]["overall"]["successes"] == 0


def test_rendering_rewrites_only_between_the_markers(repo, tmp_path):
    leaderboard = load_leaderboard(repo)
    readme = tmp_path / "README.md"
    readme.write_text("intro\n%s\nstale table\n%s\noutro\n" % (leaderboard.START_MARKER, leaderboard.END_MARKER))
    table = leaderboard.update_readme(readme, repo / "results")
    text = readme.read_text()
    assert text.startswith("intro\n%s\n| rank |" % leaderboard.START_MARKER) and text.endswith("%s\noutro\n" % leaderboard.END_MARKER)
    assert "stale" not in text and leaderboard.readme_table(text) == table
    assert leaderboard.update_readme(readme, repo / "results") == table and readme.read_text() == text  # idempotent


def test_rendering_needs_the_markers(repo, tmp_path):
    leaderboard = load_leaderboard(repo)
    with pytest.raises(leaderboard.LeaderboardError, match="leaderboard:start"):
        leaderboard.replace_between_markers("no markers here", "| table |\n")


def test_a_run_under_another_protocol_is_refused(repo, tmp_path):
    leaderboard = load_leaderboard(repo)
    assert run_cli("--agent", "nop", "--limit", "3", "--out", str(tmp_path / "results" / "short")) == 0
    with pytest.raises(leaderboard.LeaderboardError, match="protocol"):
        leaderboard.load_summaries(tmp_path / "results")


def test_table_orders_by_success_then_score(repo):
    leaderboard = load_leaderboard(repo)

    def summary(rate, score):
        stats = {"success_rate": rate, "ci95": [0.0, 1.0], "mean_steps": 1.0, "mean_tool_calls": 1.0, "crafts_over_gold": 0.0}
        return {"agent": "nop", "options": {}, "score": score, "overall": stats, "by_difficulty": {}}

    table = leaderboard.render_table({"b": summary(0.5, 10.0), "a": summary(0.5, 20.0), "c": summary(0.9, 1.0)})
    assert [line.split("|")[2].strip() for line in table.splitlines()[2:]] == ["`c`", "`a`", "`b`"]


def test_an_action_that_is_not_json_is_recorded_as_its_repr(data, world):
    class NaNAgent(PlannerAgent):
        def act(self, observations):
            return evaluate.agents.Turn({"name": "craft", "arguments": {"ingredients": {}, "target": ["x", float("nan")]}})

    episode = run_episode(data.tasks["val"][0], world, NaNAgent(), Protocol(max_steps=2))
    line = json.loads(evaluate.episode_line(episode))
    assert line["turns"][0]["action"] == repr(episode["turns"][0]["action"]) and "nan" in line["turns"][0]["action"]
    assert len(line["turns"]) == 2 and line["truncated"]


def test_shared_subtrees_give_the_same_tree_as_the_walk(data, world):
    for row in data.tasks["val"][:60]:
        targets = [entry["item"] for entry in row["target_items"]]
        assert frozenset().union(*(evaluate._item_tree(world, t) for t in targets)) == evaluate.recipe_tree(world, targets)


@pytest.mark.real_loader
def test_the_real_loader_reads_the_data_dir_it_is_given(tmp_path, data, repo):
    # A data directory whose val split holds only its first three tasks: what eval runs shows it was read.
    copy = tmp_path / "data"
    (copy / records.TASKS_CONFIG).mkdir(parents=True)
    for name in (records.RECIPES_FILE, records.LICENSE_FILE):
        shutil.copy(repo / "data" / name, copy / name)
    shutil.copy(store.parquet_path(repo / "data", records.TASKS_CONFIG, "train"), store.parquet_path(copy, records.TASKS_CONFIG, "train"))
    from tcsynth import configs

    store.parquet_path(copy, records.TASKS_CONFIG, "val").write_bytes(store.parquet_bytes(data.tasks["val"][:3], configs.arrow_schema(configs.TASKS)))
    out = tmp_path / "run"
    assert run_cli("--agent", "planner", "--batch", "--data-dir", str(copy), "--out", str(out)) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["name"] for e in episodes] == [row["name"] for row in data.tasks["val"][:3]]


@pytest.mark.real_loader
def test_a_missing_data_dir_is_one_error_line(tmp_path, capsys):
    assert run_cli("--agent", "nop", "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "run")) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nowhere" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_config_selects_one_difficulty(tmp_path, data):
    out = tmp_path / "medium"
    assert run_cli("--agent", "oracle", "--config", "medium", "--limit", "4", "--out", str(out)) == 0
    names = [json.loads(line)["name"] for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert names == [row["name"] for row in data.tasks["val"] if row["difficulty"] == "medium"][:4]


def test_calls_per_turn_sets_the_turns(tmp_path, data):
    row = next(r for r in data.tasks["val"] if len(r["gold_trajectory"]) >= 9)
    position = data.tasks["val"].index(row)
    out = tmp_path / "three"
    assert run_cli("--agent", "oracle", "--calls-per-turn", "3", "--limit", str(position + 1), "--out", str(out)) == 0
    episode = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()][-1]
    calls = len(row["gold_trajectory"]) + 1
    assert episode["name"] == row["name"] and episode["steps"] == -(-calls // 3) and episode["reward"] == 1.0
