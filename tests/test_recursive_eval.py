"""recursive-planner and the eval runner's recursive side: episode records, the summary, every val task."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from tcsynth import agents, eval_dir, evaluate, recursive
from tcsynth.agents import RecursivePlannerAgent, make_agent
from tcsynth.recursive_env import RecursiveTextCraftEnv, play


def first(data, difficulty):
    return next(row for row in data.tasks["val"] if row["difficulty"] == difficulty)


def test_defaults_agree_with_the_rules():
    assert agents.DEFAULT_DELEGATE_DEPTH == recursive.DEFAULT_DELEGATE_DEPTH
    assert agents.DEFAULT_MAX_DELEGATION_DEPTH == recursive.DEFAULT_MAX_DEPTH


@pytest.mark.parametrize("options", [{"delegate_depth": 0}, {"max_delegation_depth": -1}])
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError):
        make_agent("recursive-planner", **options)


# One call per turn, a subagent at the cap that crafts a deep subtree can run out of its 75 turns (each
# subagent crafts its own copies of shared low items); the medium task fits.
@pytest.mark.parametrize("calls_per_turn, difficulty", [(None, "extreme"), (1, "medium")])
def test_episode_record_has_the_delegation_fields(data, world, calls_per_turn, difficulty):
    row = first(data, difficulty)
    record = evaluate.run_episode(row, world, RecursivePlannerAgent(calls_per_turn), evaluate.Protocol())
    assert record["reward"] == 1.0
    children = record["children"]
    assert record["subagents"] == len(children) > 1
    assert record["max_delegation_depth"] == max(child["depth"] for child in children) <= recursive.DEFAULT_MAX_DEPTH
    assert [child["path"] for child in children][:1] == ["0.1"]
    for child in children:
        assert child["reward"] == 1.0 and child["steps"] <= child["num_steps"]
        assert child["depth"] == child["path"].count(".")
        assert child["targets"] and all(entry["count"] >= 1 for entry in child["targets"])
    # The root's launches: its children at depth 1 match its launch_subagent calls, in order.
    launches = [call["arguments"]["targets"] for turn in record["turns"] for call in turn["action"] if call["name"] == recursive.LAUNCH_TOOL]
    assert [{e["item"]: e["count"] for e in child["targets"]} for child in children if child["depth"] == 1] == launches
    assert record["planner_reward"] == 1.0 and record["planner_steps"] > record["steps"]
    assert record["tree_steps"] == record["steps"] + sum(child["steps"] for child in children)
    assert record["tree_crafts"] == record["crafts"] + sum(child["crafts"] for child in children) >= record["gold_crafts"]


def test_an_easy_task_delegates_nothing_and_matches_the_planner(data, world):
    row = first(data, "easy")
    record = evaluate.run_episode(row, world, RecursivePlannerAgent(None), evaluate.Protocol())
    assert (record["reward"], record["subagents"], record["max_delegation_depth"], record["children"]) == (1.0, 0, 0, [])
    assert record["planner_steps"] == record["steps"]


def test_without_delegation_it_plays_as_the_planner(data, world):
    row = first(data, "hard")
    record = evaluate.run_episode(row, world, RecursivePlannerAgent(None, max_delegation_depth=0), evaluate.Protocol())
    assert record["subagents"] == 0 and record["steps"] == record["planner_steps"] and record["reward"] == 1.0


def test_a_child_is_played_by_the_same_policy_with_the_tool_at_the_cap_removed(data, world):
    row = first(data, "hard")
    seen = []

    class Watch(RecursivePlannerAgent):
        def spawn(self):
            child = Watch(self.calls_per_turn, self.delegate_depth, self.max_delegation_depth)
            seen.append(child)
            return child

    env = RecursiveTextCraftEnv(row, world, max_delegation_depth=2)
    from tcsynth.recursive_env import SubagentRunner

    env.subagent = SubagentRunner(Watch(None), 0)
    outcome = play(env, Watch(None), random.Random(0))
    assert outcome["reward"] == 1.0
    assert seen and all(isinstance(agent, Watch) for agent in seen)
    depths = {record["depth"]: record for record in env.subagent.records}
    assert set(depths) == {1, 2}
    # Agents at depth 2 (the cap) were not offered the tool and launched nothing.
    assert all(record["subagents"] == 0 for record in env.subagent.records if record["depth"] == 2)


def test_summary_reports_root_success_child_success_by_depth_and_turns_saved(data, world):
    rows = [first(data, difficulty) for difficulty in ("easy", "medium", "hard", "extreme")]
    episodes = [evaluate.run_episode(row, world, RecursivePlannerAgent(None), evaluate.Protocol(), record_turns=False) for row in rows]
    summary = evaluate.summarize(episodes, {"agent": "recursive-planner", "config": "tasks", "split": "val", "max_steps": None, "rollouts": 1, "seed": 0})
    delegation = summary["delegation"]
    assert delegation["root_success_rate"] == 1.0
    assert delegation["delegating_episodes"] == sum(1 for e in episodes if e["subagents"])
    assert delegation["mean_agents_per_task"] == sum(1 + e["subagents"] for e in episodes) / 4
    children = [child for e in episodes for child in e["children"]]
    assert sum(stats["agents"] for stats in delegation["child_success_by_depth"].values()) == len(children)
    assert delegation["mean_root_steps_saved"] == sum(e["planner_steps"] - e["steps"] for e in episodes) / 4
    assert delegation["mean_root_steps_saved"] > 0
    assert "Delegation:" in evaluate.summary_markdown(summary)


def test_a_summary_of_plain_agents_has_no_delegation_block(data, world):
    episode = evaluate.run_episode(first(data, "easy"), world, make_agent("planner"), evaluate.Protocol(), record_turns=False)
    assert "subagents" not in episode
    assert "delegation" not in evaluate.summarize([episode], {"agent": "planner", "config": "tasks", "split": "val", "max_steps": None, "rollouts": 1, "seed": 0})


def test_eval_recursive_planner_batch_solves_every_val_task(repo, tmp_path):
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "textcraft_synth", "eval", "--agent", "recursive-planner", "--batch", "--split", "val",
         "--out", str(out), "--workers", "2", "--no-turns", "--quiet"],
        cwd=repo, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / eval_dir.SUMMARY_FILE).read_text())
    assert summary["overall"]["successes"] == summary["overall"]["episodes"] == 632
    delegation = summary["delegation"]
    non_easy = [d for name, d in delegation["by_difficulty"].items() if name != "easy"]
    assert sum(d["delegating"] for d in non_easy) > 0.9 * sum(d["episodes"] for d in non_easy)
    assert delegation["max_delegation_depth"].get("2", 0) > 0
    assert all(stats["success_rate"] == 1.0 for stats in delegation["child_success_by_depth"].values())
    assert delegation["mean_root_steps_saved"] > 0
