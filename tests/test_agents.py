"""The baseline agents: oracle and planner solve everything given the turns, nop never scores, random is seeded."""

from __future__ import annotations

import random

import pytest

from tcsynth import agents
from tcsynth.env import NO_LIMIT, TextCraftEnv


def play(agent, row, world, max_steps=NO_LIMIT, seed=0, give_row=None):
    """Run one episode in process; returns (reward, terminated, truncated, info, actions)."""
    env = TextCraftEnv(row, world, max_steps=max_steps)
    observation, info = env.reset()
    agent.reset(observation, info, rng=random.Random(seed), row=row if (agent.privileged if give_row is None else give_row) else None)
    observations, actions = [], []
    while True:
        action = agent.act(observations).action
        actions.append(action)
        observations, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return reward, terminated, truncated, info, actions


def without_gold(row):
    """The row with its gold trajectory removed, so an agent that read it would fail."""
    return {key: value for key, value in row.items() if key != "gold_trajectory"}


@pytest.mark.parametrize("split", ["train", "val"])
def test_oracle_solves_every_task_with_no_budget(data, world, split):
    failed = [row["name"] for row in data.tasks[split] if play(agents.OracleAgent(), row, world)[0] != 1.0]
    assert failed == []


@pytest.mark.parametrize("split", ["train", "val"])
def test_planner_solves_every_task_with_no_budget_and_no_gold(data, world, split):
    failed = []
    for row in data.tasks[split]:
        reward, terminated, truncated, info, _ = play(agents.PlannerAgent(), without_gold(row), world)
        if reward != 1.0 or info["problems"]:
            failed.append(row["name"])
        # It never crafts more often than the gold trajectory does.
        assert info["crafts"] <= len(row["gold_trajectory"]), row["name"]
    assert failed == []


def test_batched_planner_solves_val_within_the_row_budget(data, world):
    for row in data.tasks["val"]:
        reward, _, _, info, _ = play(agents.PlannerAgent(calls_per_turn=None), without_gold(row), world, max_steps=row["max_steps"])
        assert reward == 1.0 and info["steps"] <= 2 + row["max_depth"], row["name"]


def test_planner_is_not_privileged():
    assert agents.PlannerAgent.privileged is False and agents.OracleAgent.privileged is True


def test_nop_scores_zero_everywhere(data, world):
    for row in data.tasks["val"]:
        reward, terminated, truncated, info, _ = play(agents.NopAgent(), row, world)
        assert (reward, terminated, truncated, info["crafts"]) == (0.0, True, False, 0)


def test_planner_with_a_budget_of_one_is_truncated(data, world):
    for row in data.tasks["val"]:
        reward, terminated, truncated, info, _ = play(agents.PlannerAgent(), row, world, max_steps=1)
        assert (reward, terminated, truncated, info["steps"]) == (0.0, False, True, 1), row["name"]


def test_oracle_batching_puts_the_gold_in_one_turn(data, world):
    row = data.tasks["val"][-1]
    reward, _, _, info, actions = play(agents.OracleAgent(calls_per_turn=None), row, world, max_steps=row["max_steps"])
    assert reward == 1.0 and len(actions) == 1 and len(actions[0]) == len(row["gold_trajectory"]) + 1


def test_oracle_needs_the_row(data, world):
    with pytest.raises(ValueError, match="row"):
        play(agents.OracleAgent(), data.tasks["val"][0], world, give_row=False)


def test_random_is_seeded(data, world):
    row = data.tasks["val"][5]
    first = play(agents.RandomAgent(), row, world, max_steps=75, seed=7)[4]
    again = play(agents.RandomAgent(), row, world, max_steps=75, seed=7)[4]
    others = [play(agents.RandomAgent(), row, world, max_steps=75, seed=seed)[4] for seed in range(8, 12)]
    assert first == again
    assert any(other != first for other in others)


def test_random_calls_are_well_formed(data, world):
    for row in data.tasks["val"][:40]:
        _, _, _, info, actions = play(agents.RandomAgent(), row, world, max_steps=75, seed=1)
        assert info["problems"] == [], row["name"]
        assert all(len(action) == 1 for action in actions)


def test_goal_targets_reads_the_goal():
    observation = {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "Craft the following items: 3x a_1, 12x b"}]}
    assert agents.goal_targets(observation) == {"a_1": 3, "b": 12}


@pytest.mark.parametrize("size, expected", [(1, [[1], [2], [3]]), (2, [[1, 2], [3]]), (None, [[1, 2, 3]])])
def test_in_turns(size, expected):
    assert agents.in_turns([1, 2, 3], size) == expected


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2"])
def test_calls_per_turn_must_be_positive(bad):
    with pytest.raises(ValueError, match="calls_per_turn"):
        agents.PlannerAgent(calls_per_turn=bad)


def test_make_agent_names_the_agents():
    assert isinstance(agents.make_agent("planner", calls_per_turn=3), agents.PlannerAgent)
    with pytest.raises(ValueError, match="oracle, nop, random, planner, openai"):
        agents.make_agent("genius")
    with pytest.raises(ValueError, match="nop"):
        agents.make_agent("nop", calls_per_turn=2)
