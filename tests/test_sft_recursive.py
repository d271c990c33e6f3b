"""Config sft-recursive: the committed rows replay together, and the renderer refuses what does not."""

from __future__ import annotations

import collections
import copy
import json

import pytest

from tcsynth import configs, recursive, records, sft_recursive, store
from tcsynth.sft_recursive import SftRecursiveError


@pytest.fixture(scope="module")
def committed(repo):
    """data/sft-recursive/val.parquet, decoded, grouped by task in file order."""
    rows = store.read_parquet_rows(store.parquet_path(repo / "data", "sft-recursive", "val"))
    by_task = collections.OrderedDict()
    for row in rows:
        row["messages"] = [json.loads(message) if isinstance(message, str) else message for message in row["messages"]]
        row["tools"] = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
        by_task.setdefault(row["name"], []).append(row)
    return by_task


def test_columns_are_the_declared_schema():
    assert tuple(configs.features(configs.SFT_RECURSIVE)) == configs.SFT_RECURSIVE_COLUMNS
    assert configs.CONFIGS["sft-recursive"].splits == records.SPLITS


def test_every_val_task_replays_together_to_success_for_every_agent(data, world, committed):
    tasks = {row["name"]: row for row in data.tasks["val"]}
    assert list(committed) == [row["name"] for row in data.tasks["val"]]
    for name, rows in committed.items():
        task = tasks[name]
        verdicts = sft_recursive.verify(task, world, {row["agent_path"]: row["messages"] for row in rows})
        assert list(verdicts) == [row["agent_path"] for row in rows]  # rows in launch order
        assert all(verdict.success for verdict in verdicts.values())
        root = rows[0]
        assert (root["agent_path"], root["parent_path"], root["depth"]) == ("0", None, 0)
        assert root["targets"] == task["target_items"] and root["initial_inventory"] == task["initial_inventory"]


def test_paths_parents_and_launches_agree(committed):
    for rows in committed.values():
        paths = {row["agent_path"]: row for row in rows}
        for row in rows:
            launches = [call for message in row["messages"] if message["role"] == "assistant"
                        for call in message["tool_calls"] if call["function"]["name"] == recursive.LAUNCH_TOOL]
            children = recursive.child_paths(row["agent_path"], len(launches))
            assert all(path in paths for path in children)
            for call, path in zip(launches, children):
                child = paths[path]
                assert child["parent_path"] == row["agent_path"] and child["depth"] == row["depth"] + 1
                assert records.list_to_counts(child["targets"]) == call["function"]["arguments"]["targets"]
                assert child["messages"][1]["content"].split("\n")[0] == records.goal_text(records.list_to_counts(child["targets"]))
                # The launch's answer is the child's finish message.
                answer = next(m for m in row["messages"] if m.get("tool_call_id") == call["id"])
                assert answer["content"] == child["messages"][-1]["content"]
            names = [tool["function"]["name"] for tool in row["tools"]]
            assert (recursive.LAUNCH_TOOL in names) == (row["depth"] < recursive.DEFAULT_MAX_DEPTH)


def test_delegation_is_common_beyond_easy_and_goes_two_levels_deep(committed):
    deepest = {name: max(row["depth"] for row in rows) for name, rows in committed.items()}
    difficulty = {name: rows[0]["difficulty"] for name, rows in committed.items()}
    for level in ("medium", "hard", "extreme"):
        names = [name for name in committed if difficulty[name] == level]
        assert sum(1 for name in names if deepest[name] >= 1) > 0.9 * len(names), level
    assert all(deepest[name] == 2 for name in committed if difficulty[name] in ("hard", "extreme"))


def _tampered(rows, path, change):
    conversations = {row["agent_path"]: copy.deepcopy(row["messages"]) for row in rows}
    change(conversations[path])
    return conversations


def test_verify_refuses_a_wrong_tool_message(data, world, committed):
    name, rows = next((name, rows) for name, rows in committed.items() if len(rows) > 2)
    task = next(row for row in data.tasks["val"] if row["name"] == name)
    child = rows[1]["agent_path"]

    def lie(messages):
        inventory = next(m for m in messages if m["role"] == "tool" and m["name"] == "view_inventory")
        inventory["content"] = "{}"

    with pytest.raises(SftRecursiveError, match="not what the engine returns"):
        sft_recursive.verify(task, world, _tampered(rows, child, lie))


def test_verify_refuses_a_missing_or_failing_child(data, world, committed):
    name, rows = next((name, rows) for name, rows in committed.items() if len(rows) > 2)
    task = next(row for row in data.tasks["val"] if row["name"] == name)
    conversations = {row["agent_path"]: row["messages"] for row in rows}
    leaf = rows[-1]["agent_path"]
    with pytest.raises(SftRecursiveError):
        sft_recursive.verify(task, world, {path: messages for path, messages in conversations.items() if path != leaf})

    def skip_crafts(messages):
        messages[:] = [m for m in messages if not (m["role"] == "assistant" and any(c["function"]["name"] == "craft" for c in m["tool_calls"]))
                       and not (m["role"] == "tool" and m["name"] == "craft")]

    with pytest.raises(SftRecursiveError):
        sft_recursive.verify(task, world, _tampered(rows, leaf, skip_crafts))


def test_rendering_is_deterministic(data, world):
    row = next(row for row in data.tasks["train"] if row["difficulty"] == "hard")
    assert sft_recursive.task_rows(row, world) == sft_recursive.task_rows(row, world)
