"""TextCraftEnv: the Gymnasium-style contract over the engine (reset, step, bad actions, budget, reward)."""

from __future__ import annotations

import json

import pytest

from tcsynth import game, prompts, records
from tcsynth.env import NO_LIMIT, NO_TOOL_CALL, TextCraftEnv, action_tool_calls, hermes_tool_calls


@pytest.fixture(scope="module")
def row(data):
    return data.tasks["val"][0]


def gold_calls(row):
    return records.gold_tool_calls(row, "done")


def test_reset_gives_prompt_goal_and_tools(row, world):
    observation, info = TextCraftEnv(row, world).reset(seed=123)
    assert observation["messages"] == [
        {"role": "system", "content": prompts.SYSTEM_PROMPT},
        {"role": "user", "content": row["goal"]},
    ]
    assert [tool["function"]["name"] for tool in observation["tools"]] == ["craft", "get_info", "view_inventory", "finish"]
    assert observation["tools"] == prompts.TOOLS and observation["tools"] is not prompts.TOOLS
    assert info["steps"] == 0 and info["tool_calls"] == 0 and info["max_steps"] == row["max_steps"] == 75


def test_view_inventory_prints_the_inventory_in_order(row, world):
    env = TextCraftEnv(row, world)
    env.reset()
    messages, reward, terminated, truncated, info = env.step([{"name": "view_inventory", "arguments": {}}])
    expected = json.dumps({entry["item"]: entry["count"] for entry in row["initial_inventory"]})
    assert messages == [{"role": "tool", "name": "view_inventory", "content": expected}]
    assert (reward, terminated, truncated, info["steps"], info["problems"]) == (0.0, False, False, 1, [])


def test_gold_in_one_turn_is_one_step_and_succeeds(row, world):
    env = TextCraftEnv(row, world)
    env.reset()
    calls = gold_calls(row)
    messages, reward, terminated, truncated, info = env.step(calls)
    assert len(messages) == len(calls) and messages[-1]["content"] == "done"
    assert all(m["content"].startswith("Successfully crafted") for m in messages[:-1])
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["steps"] == 1 and info["tool_calls"] == len(calls) and info["crafts"] == len(calls) - 1
    assert info["verdict"]["reward"] == 1.0 and info["verdict"]["finished"]


def test_gold_one_call_per_turn_rewards_only_the_finishing_step(row, world):
    env = TextCraftEnv(row, world, max_steps=NO_LIMIT)
    env.reset()
    rewards = [env.step(call)[1] for call in gold_calls(row)]
    assert rewards == [0.0] * (len(rewards) - 1) + [1.0]
    assert env.steps == len(rewards)


def test_finish_without_the_targets_terminates_with_zero(row, world):
    env = TextCraftEnv(row, world)
    env.reset()
    _, reward, terminated, truncated, info = env.step({"name": "finish", "arguments": {"message": "bye"}})
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["verdict"]["missing"] == {row["target_items"][0]["item"]: row["target_items"][0]["count"]}


@pytest.mark.parametrize(
    "action, problem",
    [
        # an unknown tool
        ({"name": "teleport", "arguments": {}}, "unknown tool"),
        # arguments that are not JSON (OpenAI form, arguments as a string)
        ({"id": "c1", "type": "function", "function": {"name": "craft", "arguments": "{not json"}}, "not valid JSON"),
        # wrong argument names
        ({"name": "get_info", "arguments": {"item": "x"}}, "get_info takes items"),
        # a call that is not an object
        (["craft"], "must be an object"),
    ],
)
def test_bad_calls_become_error_observations_and_use_a_step(row, world, action, problem):
    env = TextCraftEnv(row, world)
    env.reset()
    messages, reward, terminated, truncated, info = env.step(action)
    assert len(messages) == 1 and messages[0]["role"] == "tool" and messages[0]["content"].startswith("Error: ")
    assert problem in messages[0]["content"]
    assert info["steps"] == 1 and len(info["problems"]) == 1 and problem in info["problems"][0]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.game.inventory == records.list_to_counts(row["initial_inventory"])  # nothing changed


@pytest.mark.parametrize("action", ["I think I should craft something.", {"role": "assistant", "content": "hmm"}, [], None, 42])
def test_a_turn_without_tool_calls_is_an_error_observation(row, world, action):
    env = TextCraftEnv(row, world)
    env.reset()
    messages, reward, terminated, truncated, info = env.step(action)
    assert messages == [{"role": "user", "content": NO_TOOL_CALL}]
    assert info["steps"] == 1 and info["problems"] == ["turn 1: no tool call"]


def test_refused_crafts_are_play_not_problems(row, world):
    env = TextCraftEnv(row, world)
    env.reset()
    item = row["target_items"][0]["item"]
    messages, *_, info = env.step({"name": "craft", "arguments": {"ingredients": {}, "target": [item, 1]}})
    assert messages[0]["content"].startswith("Error: All 1 recipe(s) failed for %s" % item)
    assert info["problems"] == [] and info["crafts"] == 0


def test_hermes_blocks_and_assistant_messages_are_read(row, world):
    text = "".join('<tool_call>%s</tool_call>' % json.dumps(call) for call in gold_calls(row))
    env = TextCraftEnv(row, world)
    env.reset()
    assert env.step("Plan:\n" + text)[1] == 1.0
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_%d" % n, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for n, c in enumerate(gold_calls(row))
        ],
    }
    env.reset()
    messages, reward, *_ = env.step(message)
    assert reward == 1.0 and [m["tool_call_id"] for m in messages] == ["call_%d" % n for n in range(len(messages))]


def test_hermes_block_that_is_not_json_is_kept_to_be_reported():
    assert hermes_tool_calls('<tool_call>{"name": "finish"}</tool_call> <tool_call>oops</tool_call>') == [{"name": "finish"}, "oops"]
    assert action_tool_calls({"name": "view_inventory"}) == [{"name": "view_inventory"}]


def test_budget_truncates(row, world):
    env = TextCraftEnv(row, world, max_steps=2)
    env.reset()
    first = env.step({"name": "view_inventory"})
    second = env.step({"name": "view_inventory"})
    assert (first[2], first[3]) == (False, False)
    assert (second[1], second[2], second[3]) == (0.0, False, True)
    with pytest.raises(RuntimeError):
        env.step({"name": "view_inventory"})


def test_finishing_on_the_last_step_is_terminated_not_truncated(row, world):
    env = TextCraftEnv(row, world, max_steps=1)
    env.reset()
    _, reward, terminated, truncated, _ = env.step(gold_calls(row))
    assert (reward, terminated, truncated) == (1.0, True, False)


def test_calls_after_finish_in_the_same_turn_change_nothing(row, world):
    env = TextCraftEnv(row, world)
    env.reset()
    messages, reward, terminated, _, info = env.step(gold_calls(row) + [{"name": "view_inventory"}])
    assert messages[-1]["content"] == game.EPISODE_OVER
    assert reward == 1.0 and terminated and info["problems"][-1].endswith("called after finish")


def test_reset_starts_over(row, world):
    env = TextCraftEnv(row, world)
    env.reset()
    env.step(gold_calls(row))
    _, info = env.reset()
    assert info["steps"] == 0 and not env.terminated
    assert env.game.inventory == records.list_to_counts(row["initial_inventory"])


@pytest.mark.parametrize("budget", [-1, 1.5, float("inf"), "75", True])  # 0 is NO_LIMIT
def test_bad_budgets_are_refused(row, world, budget):
    with pytest.raises(ValueError, match="max_steps"):
        TextCraftEnv(row, world, max_steps=budget)


def test_step_before_reset_raises(row, world):
    with pytest.raises(RuntimeError, match="reset"):
        TextCraftEnv(row, world).step({"name": "view_inventory"})


def test_same_actions_same_outputs(row, world):
    def play():
        env = TextCraftEnv(row, world)
        env.reset(seed=1)
        return [env.step(call) for call in [{"name": "get_info", "arguments": {"items": ["x", row["target_items"][0]["item"]]}}] + gold_calls(row)]

    assert play() == play()


def test_text_actions_are_read_in_every_families_format(row, world):
    # A model served without a tool-call parser writes its calls as text; the environment reads them all.
    formats = {
        "hermes": '<tool_call>{"name": "view_inventory", "arguments": {}}</tool_call>',
        "llama3": '{"name": "view_inventory", "parameters": {}}',
        "qwen3.6": "<tool_call>\n<function=view_inventory>\n</function>\n</tool_call>",
    }
    for style, text in formats.items():
        env = TextCraftEnv(row, world=world)
        env.reset()
        messages, *_ = env.step({"role": "assistant", "content": text})
        assert messages[0]["role"] == "tool" and messages[0]["name"] == "view_inventory", style
