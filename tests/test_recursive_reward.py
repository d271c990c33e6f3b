"""textcraft_recursive_reward: one agent of a tree graded on its own targets and its own snapshot."""

from __future__ import annotations

import json
import pickle
import threading

import pytest

from tcsynth import recursive, store
from tcsynth.rewards import get_textcraft_recursive_reward, textcraft_recursive_reward

from test_recursive import CRAFT_PICK, CRAFT_PLANK, CRAFT_STICK, WORLD_DOCUMENT, call, launch


def assistant(*calls):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call_} for call_ in calls]}


def counts(**items):
    return [{"item": item, "count": count} for item, count in items.items()]


@pytest.fixture(scope="module")
def reward(tmp_path_factory):
    path = tmp_path_factory.mktemp("world") / "recipes.json"
    path.write_text(json.dumps(WORLD_DOCUMENT))
    return get_textcraft_recursive_reward(path)


# A subagent asked for 4 sticks, launched when the inventory already held 4 planks (its snapshot).
STICK_CHILD = [assistant(CRAFT_STICK), assistant(call("finish", message="4 sticks"))]


class TestOwnTargetsAndSnapshot:
    cases = [
        # its own targets over its snapshot: the planks were there at launch
        (counts(stick=4), counts(plank=4, stone=3), 1.0),
        # the same completion against the task's starting inventory (no planks): the craft is refused
        (counts(stick=4), counts(wood=3, stone=3), 0.0),
        # against the root's targets: a child is not graded on the task
        (counts(pick=1), counts(plank=4, stone=3), 0.0),
        # gained on top of the snapshot: 4 sticks already held do not count
        (counts(stick=8), counts(plank=4, stick=4), 0.0),
    ]

    @pytest.mark.parametrize("targets, snapshot, expected", cases)
    def test_case(self, reward, targets, snapshot, expected):
        assert reward([STICK_CHILD], targets=[targets], initial_inventory=[snapshot]) == [expected]

    def test_target_items_is_read_when_targets_is_absent(self, reward):
        assert reward([STICK_CHILD], target_items=[counts(stick=4)], initial_inventory=[counts(plank=4)]) == [1.0]


def test_launches_are_played_by_ideal_subagents(reward):
    parent = [assistant(launch({"stick": 2})), assistant(CRAFT_PICK), assistant(call("finish", message="pick"))]
    snapshot = counts(wood=3, stone=3)
    assert reward([parent], targets=[counts(pick=1)], initial_inventory=[snapshot]) == [1.0]
    # Asking for the wrong item leaves the parent without sticks.
    wrong = [assistant(launch({"plank": 2})), assistant(CRAFT_PICK), assistant(call("finish", message="pick"))]
    assert reward([wrong], targets=[counts(pick=1)], initial_inventory=[snapshot]) == [0.0]


def test_at_the_cap_a_launch_is_refused(reward):
    parent = [assistant(launch({"stick": 2})), assistant(CRAFT_PICK), assistant(call("finish", message="pick"))]
    row = dict(targets=[counts(pick=1)], initial_inventory=[counts(wood=3, stone=3)])
    assert reward([parent], depth=[recursive.DEFAULT_MAX_DEPTH - 1], **row) == [1.0]
    assert reward([parent], depth=[recursive.DEFAULT_MAX_DEPTH], **row) == [0.0]


def test_more_turns_than_num_steps_scores_zero(reward):
    child = [assistant(CRAFT_PLANK), assistant(CRAFT_STICK), assistant(call("finish", message="sticks"))]
    row = dict(targets=[counts(stick=4)], initial_inventory=[counts(wood=3)])
    assert reward([child], num_steps=[3], **row) == [1.0]
    assert reward([child], num_steps=[2], **row) == [0.0]


def test_no_task_means_none_and_lengths_must_agree(reward):
    assert reward([STICK_CHILD, STICK_CHILD]) == [None, None]
    with pytest.raises(ValueError, match="2 completions but 1 targets"):
        reward([STICK_CHILD, STICK_CHILD], targets=[counts(stick=4)], initial_inventory=[counts(plank=4)] * 2)


def test_garbage_scores_zero(reward):
    assert reward([None, 42, "no calls", [{"role": "assistant", "content": "<tool_call>{oops</tool_call>"}]],
                  targets=[counts(stick=4)] * 4, initial_inventory=[counts(plank=4)] * 4) == [0.0] * 4


def test_pickles_and_runs_in_a_thread(reward):
    again = pickle.loads(pickle.dumps(reward))
    assert again.__name__ == "textcraft_recursive_reward"
    results = []
    thread = threading.Thread(target=lambda: results.append(again([STICK_CHILD], targets=[counts(stick=4)], initial_inventory=[counts(plank=4)])))
    thread.start()
    thread.join()
    assert results == [[1.0]]


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError):
        get_textcraft_recursive_reward(max_delegation_depth=-1)
    with pytest.raises(ValueError):
        get_textcraft_recursive_reward(tmp_path / "missing.json")


def test_every_agent_of_committed_rows_scores_one(repo):
    """Each agent's own turns, graded alone (launches by ideal subagents), on the first 40 val tasks."""
    rows = store.read_parquet_rows(store.parquet_path(repo / "data", "sft-recursive", "val"))
    names = list(dict.fromkeys(row["name"] for row in rows))[:40]
    rows = [row for row in rows if row["name"] in names]
    completions = [[json.loads(m) if isinstance(m, str) else m for m in row["messages"]][2:] for row in rows]
    scores = textcraft_recursive_reward(
        completions, targets=[row["targets"] for row in rows], initial_inventory=[row["initial_inventory"] for row in rows],
        depth=[row["depth"] for row in rows], num_steps=[row["num_steps"] for row in rows],
    )
    assert scores == [1.0] * len(rows)
    assert any(row["depth"] > 0 for row in rows)
