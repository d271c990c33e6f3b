"""Replaying tool calls: every gold trajectory wins, and the verdict says why an episode does not."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from tcsynth import game, records


def test_every_gold_trajectory_reaches_the_goal_and_without_its_last_craft_does_not(data, world):
    checked = crafts = 0
    for split in records.SPLITS:
        for row in data.tasks[split]:
            calls = records.gold_tool_calls(row)
            task = records.engine_task(row)
            verdict = game.replay(world, task, calls)
            assert verdict.reward == 1.0, (row["name"], verdict.reason)
            assert verdict.crafts == len(row["gold_trajectory"]) == row["num_craft_steps"]
            assert all(text.startswith("Successfully crafted") for text in verdict.observations[:-1])
            short = game.replay(world, task, calls[:-2] + calls[-1:])
            assert short.reward == 0.0 and short.missing, row["name"]
            checked += 1
            crafts += verdict.crafts
    assert (checked, crafts) == (3154, 202814)


@pytest.fixture
def first(data):
    return data.tasks["train"][0]


def _openai(call, as_string):
    arguments = json.dumps(call["arguments"]) if as_string else call["arguments"]
    return {"id": "call_1", "type": "function", "function": {"name": call["name"], "arguments": arguments}}


@pytest.mark.parametrize("form", ["plain", "openai-dict", "openai-string", "plain-string", "log-record"])
def test_tool_call_forms_give_the_same_verdict(first, world, form):
    calls = records.gold_tool_calls(first)
    if form == "openai-dict":
        calls = [_openai(call, False) for call in calls]
    elif form == "openai-string":
        calls = [_openai(call, True) for call in calls]
    elif form == "plain-string":
        calls = [{"name": c["name"], "arguments": json.dumps(c["arguments"])} for c in calls]
    elif form == "log-record":
        calls = [{"seq": n, "tool": c["name"], "args": c["arguments"]} for n, c in enumerate(calls, 1)]
    verdict = game.replay(world, records.engine_task(first), calls)
    assert verdict.reward == 1.0 and verdict.finished and verdict.calls == len(calls)


def test_view_inventory_without_arguments_key(first, world):
    verdict = game.replay(world, records.engine_task(first), [{"name": "view_inventory"}])
    start = json.dumps({e["item"]: e["count"] for e in first["initial_inventory"]})
    assert verdict.observations == [start]
    assert verdict.reward == 0.0 and verdict.reason == "the episode did not end with finish"


@pytest.mark.parametrize(
    "bad_call, reason",
    [
        ("craft", "call 1: a tool call must be an object, got str"),
        ({"function": {"name": "craft", "arguments": "{not json"}}, "call 1: the arguments of craft are not valid JSON"),
        ({"name": "teleport", "arguments": {}}, "call 1: unknown tool 'teleport'"),
        ({"arguments": {}}, "call 1: a tool call needs a name"),
        ({"name": "get_info", "arguments": {"items": ["a"], "extra": 1}}, "call 1: get_info takes items"),
    ],
)
def test_unreadable_calls_stop_the_replay_with_reward_zero(first, world, bad_call, reason):
    calls = [bad_call] + records.gold_tool_calls(first)
    verdict = game.replay(world, records.engine_task(first), calls)
    assert verdict.reward == 0.0 and verdict.reason.startswith(reason) and verdict.calls == 0


def test_calls_after_finish_void_the_episode(first, world):
    calls = records.gold_tool_calls(first) + [{"name": "view_inventory", "arguments": {}}]
    verdict = game.replay(world, records.engine_task(first), calls)
    assert verdict.reward == 0.0 and verdict.reason == "call %d comes after finish" % len(calls)


def test_rejected_crafts_are_part_of_play(first, world):
    calls = records.gold_tool_calls(first)
    wrong = {"name": "craft", "arguments": {"ingredients": {}, "target": ["a1_i5", 3]}}
    verdict = game.replay(world, records.engine_task(first), [wrong] + calls)
    assert verdict.reward == 1.0 and verdict.observations[0].startswith("Error: All 1 recipe(s) failed for a1_i5")


def test_empty_finish_message_scores_zero(first, world):
    calls = records.gold_tool_calls(first, message="")
    verdict = game.replay(world, records.engine_task(first), calls)
    assert verdict.reward == 0.0 and verdict.reason == "finish was called with an empty message"


def test_verdict_as_dict_is_json(first, world):
    verdict = game.replay(world, records.engine_task(first), records.gold_tool_calls(first)[:3])
    plain = json.loads(json.dumps(verdict.as_dict()))
    assert plain["reward"] == 0.0 and plain["crafts"] == 3 and plain["missing"] == {"a1_i5": 3}


def test_the_engine_is_standard_library_python_3_8():
    path = Path(game.__file__)
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the engine must not import the package"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)
