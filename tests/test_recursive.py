"""The recursive game (tcsynth.recursive) and its environment (tcsynth.recursive_env), on a tiny world.

The world: ``wood`` and ``stone`` are base; ``plank`` (depth 1) = 1 wood -> 2; ``stick`` (depth 2) =
2 plank -> 4; ``pick`` (depth 3) = 2 stick + 3 stone -> 1.
"""

from __future__ import annotations

import threading

import pytest

from tcsynth import game, prompts, recursive
from tcsynth.recursive_env import RecursiveTextCraftEnv, child_row

WORLD_DOCUMENT = {
    "format": game.RECIPES_FORMAT,
    "name": "tiny",
    "base_items": ["stone", "wood"],
    "depths": {"plank": 1, "stick": 2, "pick": 3},
    "tags": {},
    "recipes": {
        "plank": [{"result_count": 2, "ingredients": [["wood", 1]]}],
        "stick": [{"result_count": 4, "ingredients": [["plank", 2]]}],
        "pick": [{"result_count": 1, "ingredients": [["stick", 2], ["stone", 3]]}],
    },
}
ROW = {
    "name": "tiny-0",
    "goal": "Craft the following items: 1x pick",
    "target_items": [{"item": "pick", "count": 1}],
    "initial_inventory": [{"item": "wood", "count": 3}, {"item": "stone", "count": 3}],
    "max_steps": 10,
}


def call(tool, **arguments):
    return {"name": tool, "arguments": arguments}


def launch(targets, num_steps=5, context=""):
    arguments = {"targets": targets, "num_steps": num_steps}
    if context:
        arguments["context"] = context
    return call(recursive.LAUNCH_TOOL, **arguments)


CRAFT_PLANK = call("craft", ingredients={"wood": 1}, target=["plank", 2])
CRAFT_STICK = call("craft", ingredients={"plank": 2}, target=["stick", 4])
CRAFT_PICK = call("craft", ingredients={"stick": 2, "stone": 3}, target=["pick", 1])


@pytest.fixture
def tiny():
    return game.World(WORLD_DOCUMENT)


class Scripted:
    """A subagent callback that plays fixed turns per path and remembers what each child saw."""

    def __init__(self, turns_by_path):
        self.turns_by_path = turns_by_path
        self.seen = {}
        self.ended = {}

    def __call__(self, env):
        observation, _ = env.reset()
        self.seen[env.path] = observation
        for action in self.turns_by_path.get(env.path, []):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        self.ended[env.path] = (env.verdict().reward, dict(env.game.inventory), env.truncated)


def root_env(tiny, script, max_depth=2, max_steps=None):
    env = RecursiveTextCraftEnv(ROW, tiny, max_steps, max_delegation_depth=max_depth, subagent=script)
    return env


# ------------------------------------------------------------------------------------------- the prompt


def test_root_is_offered_launch_subagent_and_told_about_it(tiny):
    observation, info = root_env(tiny, None).reset()
    names = [tool["function"]["name"] for tool in observation["tools"]]
    assert names == [tool["function"]["name"] for tool in prompts.TOOLS] + [recursive.LAUNCH_TOOL]
    assert observation["messages"][0]["content"].startswith(prompts.SYSTEM_PROMPT)
    assert recursive.LAUNCH_TOOL in observation["messages"][0]["content"]
    assert observation["messages"][1]["content"] == ROW["goal"]
    assert info["path"] == "0" and info["depth"] == 0 and info["subagents"] == 0


def test_no_launch_tool_when_delegation_is_capped_at_zero(tiny):
    observation, _ = root_env(tiny, None, max_depth=0).reset()
    assert [tool["function"]["name"] for tool in observation["tools"]] == [tool["function"]["name"] for tool in prompts.TOOLS]
    assert observation["messages"][0]["content"] == prompts.SYSTEM_PROMPT


def test_child_goal_is_the_goal_text_of_its_targets_with_context_below(tiny):
    script = Scripted({})
    env = root_env(tiny, script)
    env.reset()
    env.step([launch({"stick": 2}), launch({"plank": 2}, context="for sticks")])
    assert script.seen["0.1"]["messages"][1]["content"] == "Craft the following items: 2x stick"
    assert script.seen["0.2"]["messages"][1]["content"] == "Craft the following items: 2x plank\n\nfor sticks"
    assert recursive.prompt_goal(script.seen["0.2"]["messages"][1]["content"]) == "Craft the following items: 2x plank"


# --------------------------------------------------------------------------------------- shared inventory


def test_a_child_crafts_on_the_parents_inventory_and_the_parent_uses_it(tiny):
    script = Scripted({"0.1": [[CRAFT_PLANK, CRAFT_PLANK], [CRAFT_STICK], [call("finish", message="Made 4 sticks.")]]})
    env = root_env(tiny, script)
    env.reset()
    messages, reward, terminated, _, info = env.step([launch({"stick": 2})])
    assert [m["content"] for m in messages] == ["Made 4 sticks."]  # the child's finish message
    assert env.steps == 1 and info["subagents"] == 1  # the launch cost the parent one turn
    assert env.game.inventory == {"wood": 1, "stone": 3, "plank": 2, "stick": 4}  # the child's crafts are the parent's
    assert env.children[0].game.inventory is env.game.inventory
    messages, reward, terminated, _, _ = env.step([CRAFT_PICK, call("finish", message="Made a pick.")])
    assert messages[0]["content"] == "Successfully crafted 1 pick(s)"
    assert (reward, terminated) == (1.0, True)
    assert script.ended["0.1"][0] == 1.0


def test_a_child_starts_from_a_snapshot_taken_at_its_launch(tiny):
    script = Scripted({})
    env = root_env(tiny, script)
    env.reset()
    env.step([CRAFT_PLANK, launch({"stick": 4})])
    child = env.children[0]
    assert child.node.snapshot == {"wood": 2, "stone": 3, "plank": 2}  # after the parent's craft
    assert child.game.initial_inventory == child.node.snapshot
    assert child.node.snapshot is not env.game.inventory
    assert script.seen["0.1"]["messages"][1]["content"] == "Craft the following items: 4x stick"


def test_a_child_is_judged_on_its_own_targets_over_its_snapshot(tiny):
    # The parent made 4 sticks before launching.  A child asked for 4 sticks that only finishes has gained
    # nothing over its snapshot, so it fails although the inventory holds 4; one that makes 4 more succeeds.
    script = Scripted({"0.1": [[call("finish", message="There are sticks already.")]],
                       "0.2": [[CRAFT_PLANK], [CRAFT_STICK], [call("finish", message="4 more.")]]})
    env = root_env(tiny, script)
    env.reset()
    env.step([CRAFT_PLANK, CRAFT_PLANK])
    env.step([CRAFT_STICK])
    env.step([launch({"stick": 4})])
    assert script.ended["0.1"][0] == 0.0
    env.step([launch({"stick": 4})])
    assert script.ended["0.2"][0] == 1.0 and env.game.inventory["stick"] == 8
    assert env.children[1].node.snapshot["stick"] == 4


def test_child_verdict_is_taken_when_it_ends(tiny):
    script = Scripted({"0.1": [[CRAFT_PLANK, CRAFT_PLANK], [CRAFT_STICK], [call("finish", message="ok")]]})
    env = root_env(tiny, script)
    env.reset()
    env.step([launch({"stick": 4})])
    assert script.ended["0.1"][0] == 1.0
    env.step([CRAFT_PICK])  # the parent uses 2 of the child's 4 sticks
    # Judged now, the child's game would have only 2 sticks gained: the runner keeps the verdict of its end.
    assert env.children[0].verdict().reward == 0.0


def test_a_child_without_finish_makes_the_launch_answer_an_error(tiny):
    script = Scripted({"0.1": [[CRAFT_PLANK]] * 3})
    env = root_env(tiny, script)
    env.reset()
    messages, *_ = env.step([launch({"stick": 4}, num_steps=2)])
    assert messages[0]["content"] == recursive.unfinished_answer(2)
    assert script.ended["0.1"][2] is True  # truncated by its own budget, not the parent's
    assert env.children[0].steps == 2 and env.game.inventory["plank"] == 4


def test_without_a_runner_the_child_plays_nothing(tiny):
    env = RecursiveTextCraftEnv(ROW, tiny)
    env.reset()
    messages, *_ = env.step([launch({"stick": 4})])
    assert messages[0]["content"] == recursive.unfinished_answer(0)


def test_paths_follow_launch_order_and_children_may_launch(tiny):
    script = Scripted({
        "0.1": [[launch({"plank": 2}), launch({"plank": 2})], [CRAFT_STICK], [call("finish", message="sticks")]],
        "0.1.1": [[CRAFT_PLANK], [call("finish", message="planks a")]],
        "0.1.2": [[CRAFT_PLANK], [call("finish", message="planks b")]],
    })
    env = root_env(tiny, script)
    env.reset()
    messages, *_ = env.step([launch({"stick": 2})])
    assert messages[0]["content"] == "sticks"
    assert [node.path for node in env.tree.agents] == ["0", "0.1", "0.1.1", "0.1.2"]
    assert [script.ended[path][0] for path in ("0.1", "0.1.1", "0.1.2")] == [1.0, 1.0, 1.0]
    assert env.tree.agent("0.1.2").snapshot == {"wood": 2, "stone": 3, "plank": 2}


def test_the_depth_cap_removes_the_tool_and_refuses_the_call(tiny):
    script = Scripted({"0.1": [[launch({"plank": 2})], [call("finish", message="tried")]]})
    env = root_env(tiny, script, max_depth=1)
    env.reset()
    env.step([launch({"stick": 2})])
    child_tools = [tool["function"]["name"] for tool in script.seen["0.1"]["tools"]]
    assert recursive.LAUNCH_TOOL not in child_tools
    assert env.children[0].children == []
    assert env.children[0].problems and "cap" in env.children[0].problems[0]
    assert [node.path for node in env.tree.agents] == ["0", "0.1"]


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ({"targets": {}, "num_steps": 3}, "non-empty"),
        ({"targets": {"stick": 0}, "num_steps": 3}, "positive integers"),
        ({"targets": {"stick": 1}, "num_steps": 0}, "num_steps"),
        ({"targets": {"stick": 1}, "num_steps": True}, "num_steps"),
        ({"targets": {"stick": 1}}, "takes targets"),
        ({"targets": {"stick": 1}, "num_steps": 2, "extra": 1}, "takes targets"),
        ({"targets": {"stick": 1}, "num_steps": 2, "context": 5}, "context"),
    ],
)
def test_bad_launches_are_refused_with_a_reason_and_launch_nothing(tiny, arguments, problem):
    env = root_env(tiny, Scripted({}))
    env.reset()
    messages, *_ = env.step([call(recursive.LAUNCH_TOOL, **arguments)])
    assert messages[0]["content"].startswith("Error: ") and problem in messages[0]["content"]
    assert env.children == [] and len(env.tree.agents) == 1
    assert env.problems


def test_a_child_env_plays_once(tiny):
    script = Scripted({})
    env = root_env(tiny, script)
    env.reset()
    env.step([launch({"stick": 2})])
    with pytest.raises(RuntimeError):
        env.children[0].reset()


def test_child_row_carries_goal_snapshot_and_budget(tiny):
    tree = recursive.Tree(tiny, {"target_items": {"pick": 1}, "initial_inventory": {"wood": 3}})
    _, child, refused = tree.root.launch({"targets": {"stick": 2}, "num_steps": 4})
    assert refused is None
    assert child_row("t", child) == {
        "name": "t@0.1", "goal": "Craft the following items: 2x stick", "target_items": [{"item": "stick", "count": 2}],
        "initial_inventory": [{"item": "wood", "count": 3}], "max_steps": 4,
    }


# ------------------------------------------------------------------------------------------ concurrency


def test_concurrent_crafts_on_the_shared_inventory_never_spend_an_ingredient_twice(tiny):
    wood = 500
    tree = recursive.Tree(tiny, {"target_items": {"plank": 1}, "initial_inventory": {"wood": wood}})
    children = [tree.root.launch({"targets": {"plank": 2}, "num_steps": 999})[1] for _ in range(8)]
    accepted = [0] * len(children)
    start = threading.Barrier(len(children))

    def work(position):
        start.wait()
        for _ in range(200):
            if children[position].call("craft", {"ingredients": {"wood": 1}, "target": ["plank", 2]}).startswith("Successfully"):
                accepted[position] += 1

    threads = [threading.Thread(target=work, args=(position,)) for position in range(len(children))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(accepted) == wood  # 1,600 attempts for 500 wood: exactly 500 crafts went through
    assert tree.inventory == {"plank": 2 * wood}


# ------------------------------------------------------------------------------------------------ replay


def test_replay_tree_plays_each_child_at_its_launch(tiny):
    turns = {
        "0": [[launch({"stick": 2})], [CRAFT_PICK, call("finish", message="pick")]],
        "0.1": [[CRAFT_PLANK, CRAFT_PLANK], [CRAFT_STICK], [call("finish", message="sticks")]],
    }
    verdicts = recursive.replay_tree(tiny, {"target_items": {"pick": 1}, "initial_inventory": {"wood": 3, "stone": 3}}, turns)
    assert list(verdicts) == ["0", "0.1"]
    assert [v.reward for v in verdicts.values()] == [1.0, 1.0]
    assert verdicts["0"].observations == ["sticks", "Successfully crafted 1 pick(s)", "pick"]


def test_replay_tree_fails_a_child_over_budget_and_rejects_strays(tiny):
    task = {"target_items": {"pick": 1}, "initial_inventory": {"wood": 3, "stone": 3}}
    turns = {
        "0": [[launch({"stick": 2}, num_steps=2)], [CRAFT_PICK, call("finish", message="pick")]],
        "0.1": [[CRAFT_PLANK, CRAFT_PLANK], [CRAFT_STICK], [call("finish", message="sticks")]],
    }
    verdicts = recursive.replay_tree(tiny, task, turns)
    assert verdicts["0.1"].reward == 0.0 and "budget" in verdicts["0.1"].reason
    # Its first two turns were played (the sticks exist), so the parent is told it did not finish, and can
    # still use what it made.
    assert verdicts["0"].observations[0] == recursive.unfinished_answer(2)
    assert verdicts["0"].reward == 1.0
    with pytest.raises(ValueError, match="never launched"):
        recursive.replay_tree(tiny, task, dict(turns, **{"0.2": []}))


def test_plan_part_delegates_deep_ingredients_and_crafts_the_top():
    recipes = {item: {"ingredients": dict(r[0]["ingredients"]), "result_count": r[0]["result_count"]} for item, r in WORLD_DOCUMENT["recipes"].items()}
    depths = WORLD_DOCUMENT["depths"]
    delegations, crafts = recursive.plan_part({"pick": 1}, recipes, depths, {"wood": 3, "stone": 3}, 2)
    assert delegations == [("stick", 2)]
    assert crafts == [("pick", 1, {"stick": 2, "stone": 3})]
    delegations, crafts = recursive.plan_part({"pick": 1}, recipes, depths, {"wood": 3, "stone": 3}, None)
    assert delegations == [] and [item for item, _, _ in crafts] == ["plank", "stick", "pick"]
    assert recursive.frontier_items(["pick"], {"pick": recipes["pick"], "stick": recipes["stick"]}, depths, 2) == ["pick", "stick", "stone"]
