"""The world generator: @1's shape, new content, byte-identical output anywhere, every task solvable."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcsynth import game, generate, records

REPO = Path(__file__).resolve().parent.parent
PYTHON_312 = Path("/root/.pyenv/versions/3.12.1/bin/python")
# The name patterns of textcraft-synth@1's items: raw_a0, c3_ore, a1_i5, t2_i7_7_22, x12_all.
AT1_NAME = re.compile(r"^(raw_[aot]\d|[cm]\d_ore|[acmot]\d_i\d+(_\d+)*|x\d+_[a-z]+)$")


def crafted_depths(doc):
    return Counter(doc["depths"].values())


def distribution(values):
    counts = Counter(values)
    total = sum(counts.values())
    return {value: n / total for value, n in counts.items()}


def total_variation(p, q):
    return sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q)) / 2


@pytest.fixture(scope="module")
def at1(repo):
    return json.loads((repo / "data" / records.RECIPES_FILE).read_text())


@pytest.fixture(scope="module")
def world7():
    return generate.generate_world(7)


@pytest.fixture(scope="module")
def tasks7(world7):
    return generate.generate_tasks(world7, 7)


# ----------------------------------------------------------------------------------------------- shape


def test_world_has_at1s_size_and_loads_in_the_engine(world7):
    assert world7["format"] == "textcraft-recipes/1"
    assert world7["name"] == "textcraft-synth-s7"
    assert len(world7["base_items"]) == 50 and world7["base_items"] == sorted(world7["base_items"])
    assert len(world7["recipes"]) == 1402
    assert sorted(set(world7["depths"].values())) == list(range(1, 13))
    assert world7["generator"] == {
        "version": generate.GENERATOR_VERSION,
        "seed": 7,
        "options": {"base_items": 50, "craftable_items": 1402, "families": 5},
    }
    world = game.World(world7)
    assert len(world.recipes) == 1402 and world.name == "textcraft-synth-s7"


def test_depth_is_one_more_than_the_deepest_ingredient(world7):
    depths = world7["depths"]
    for item, recipes in world7["recipes"].items():
        assert len(recipes) == 1
        deepest = max(depths.get(name, 0) for name, _ in recipes[0]["ingredients"])
        assert depths[item] == deepest + 1, item
    assert not set(world7["base_items"]) & set(world7["recipes"])


def test_items_per_depth_within_20_percent_of_at1(world7, at1):
    ours, theirs = crafted_depths(world7), crafted_depths(at1)
    for depth in range(1, 13):
        assert abs(ours[depth] - theirs[depth]) <= 0.2 * theirs[depth], depth


@pytest.mark.parametrize(
    "measure",
    [
        lambda recipe: recipe["result_count"],
        lambda recipe: len(recipe["ingredients"]),
    ],
    ids=["result_count", "ingredients_per_recipe"],
)
def test_recipe_distributions_match_at1(world7, at1, measure):
    ours = distribution(measure(r[0]) for r in world7["recipes"].values())
    theirs = distribution(measure(r[0]) for r in at1["recipes"].values())
    assert set(ours) == set(theirs)
    assert total_variation(ours, theirs) < 0.03


def test_ingredient_amounts_match_at1(world7, at1):
    ours = distribution(n for r in world7["recipes"].values() for _, n in r[0]["ingredients"])
    theirs = distribution(n for r in at1["recipes"].values() for _, n in r[0]["ingredients"])
    assert total_variation(ours, theirs) < 0.03


def test_default_task_counts_are_at1s(tasks7, data):
    for split in records.SPLITS:
        ours = Counter(task["misc"]["difficulty"] for task in tasks7[split])
        theirs = Counter(row["difficulty"] for row in data.tasks[split])
        assert ours == theirs


@pytest.mark.parametrize("seed", [7, 8])
def test_mean_gold_crafts_per_difficulty_within_15_percent_of_at1(seed, world7, tasks7, data):
    tasks = tasks7 if seed == 7 else generate.generate_tasks(generate.generate_world(seed), seed)
    for split in records.SPLITS:
        for difficulty in records.DIFFICULTIES:
            ours = statistics.mean(len(t["misc"]["gold_trajectory"]) for t in tasks[split] if t["misc"]["difficulty"] == difficulty)
            theirs = statistics.mean(r["num_craft_steps"] for r in data.tasks[split] if r["difficulty"] == difficulty)
            assert abs(ours - theirs) <= 0.15 * theirs, (split, difficulty, ours, theirs)


# ------------------------------------------------------------------------------------------------ tasks


def test_every_task_is_a_source_line_whose_row_replays_to_reward_1(world7, tasks7):
    world = game.World(world7)
    for split in records.SPLITS:
        for index, task in enumerate(tasks7[split]):
            records.check_source_task(task, "%s %d" % (split, index))
        for row in records.rows_from_source_lines(split, tasks7[split]):
            verdict = game.replay(world, records.engine_task(row), records.gold_tool_calls(row))
            assert verdict.reward == 1.0, (row["source_task_id"], verdict.reason)


def test_task_fields_follow_at1s_conventions(world7, tasks7):
    depths = world7["depths"]
    for split in records.SPLITS:
        for index, task in enumerate(tasks7[split]):
            misc = task["misc"]
            assert task["id"] == "textcraft_synth_s7.%s.%d" % (split, index)
            assert task["max_steps"] == 75
            ((target, count),) = misc["target_items"].items()
            assert task["goal"] == "Craft the following items: %dx %s" % (count, target)
            assert misc["max_depth"] == depths[target]
            lo, hi = records.DEPTH_RANGES[misc["difficulty"]]
            assert lo <= depths[target] <= hi
            assert count in ((1, 2, 3) if hi <= 6 else (1, 2))
            assert misc["num_craft_steps"] == len(misc["gold_trajectory"])
            steps = misc["gold_trajectory"]
            assert [depths[s["target"][0]] for s in steps] == sorted(depths[s["target"][0]] for s in steps)
            assert steps[-1]["target"][0] == target
            assert all(name in world7["base_items"] for name in misc["initial_inventory"])


def test_inventory_covers_what_the_gold_run_consumes_plus_a_few_unused_items(tasks7):
    unused_per_task = Counter()
    for task in tasks7["val"]:
        misc = task["misc"]
        made, used = Counter(), Counter()
        for step in misc["gold_trajectory"]:
            made[step["target"][0]] += step["result_count"]
            used.update(step["ingredients"])
        held = misc["initial_inventory"]
        for name, amount in used.items():
            if name not in made:
                assert 2 * amount <= held[name] <= 10 * amount, (task["id"], name)
        unused = [name for name in held if name not in used]
        assert all(1 <= held[name] <= 5 for name in unused)
        unused_per_task[len(unused)] += 1
    assert set(unused_per_task) <= {0, 1, 2, 3} and len(unused_per_task) >= 3


def test_train_and_val_share_no_target_at_default_size(tasks7):
    def pairs(split):
        return [tuple(t["misc"]["target_items"].items())[0] for t in tasks7[split]]

    train, val = pairs("train"), pairs("val")
    assert len(set(val)) == len(val) and len(set(train)) == len(train)
    assert not set(train) & set(val)


def test_tasks_serialize_to_source_lines_and_back(tasks7):
    lines = b"".join(records.source_line(task) for task in tasks7["val"][:50])
    assert records.parse_source_file(lines, "val.jsonl") == tasks7["val"][:50]


def test_a_broken_plan_is_caught_at_generation_time(monkeypatch):
    world = generate.generate_world(3, base_items=10, craftable_items=200, families=2)
    original = generate.Planner.plan

    def drop_first_step(self, target, count):
        steps, consumed = original(self, target, count)
        return (steps[1:] if len(steps) > 1 else steps), consumed

    monkeypatch.setattr(generate.Planner, "plan", drop_first_step)
    with pytest.raises(generate.GenerationError, match="refused"):
        generate.generate_tasks(world, 3, train=20, val=5)


# -------------------------------------------------------------------------------------------- novelty


def test_fewer_than_5_percent_of_recipes_equal_at1s(world7, at1):
    same = sum(at1["recipes"].get(item) == recipes for item, recipes in world7["recipes"].items())
    assert same < 0.05 * len(world7["recipes"])


def test_names_cannot_be_mistaken_for_at1s(world7, at1):
    ours = list(world7["recipes"]) + world7["base_items"]
    assert not set(ours) & (set(at1["recipes"]) | set(at1["base_items"]))
    assert not [name for name in ours if AT1_NAME.match(name)]
    assert all(AT1_NAME.match(name) for name in list(at1["recipes"]) + at1["base_items"])  # the pattern is right
    assert all(re.fullmatch(r"[a-z0-9_]+", name) for name in ours)  # safe as textcraft command words


def test_two_seeds_give_different_worlds(world7):
    world8 = generate.generate_world(8)
    shared = sum(world8["recipes"].get(item) == recipes for item, recipes in world7["recipes"].items())
    assert shared < 0.05 * len(world7["recipes"])
    assert world8["name"] == "textcraft-synth-s8"


# -------------------------------------------------------------------------------------- reproducibility


def test_world_json_bytes_reproduce_at1s_file_and_round_trip(repo, world7):
    original = (repo / "data" / records.RECIPES_FILE).read_bytes()
    assert generate.world_json_bytes(json.loads(original)) == original
    written = generate.world_json_bytes(world7)
    assert json.loads(written) == world7
    # "{", six key lines up to "recipes":{, a line per recipe, "},", and the generator line closing the object
    assert written.count(b"\n") == 1 + 6 + len(world7["recipes"]) + 2
    game.World(json.loads(written))


def test_same_seed_same_documents(world7, tasks7):
    again = generate.generate_world(7)
    assert json.dumps(again) == json.dumps(world7)
    assert json.dumps(generate.generate_tasks(again, 7)) == json.dumps(tasks7)


FINGERPRINT = """
import hashlib, json, sys
from tcsynth import generate
world = generate.generate_world(11)
tasks = generate.generate_tasks(world, 11, train=300, val=80)
small = generate.generate_world(5, base_items=12, craftable_items=300, families=3)
text = json.dumps(world) + json.dumps(tasks) + json.dumps(small)
print(hashlib.sha256(text.encode()).hexdigest())
"""


def fingerprint(python, hashseed):
    env = dict(os.environ, PYTHONHASHSEED=hashseed, PYTHONPATH=str(REPO))
    done = subprocess.run([str(python), "-c", FINGERPRINT], env=env, cwd=str(REPO), capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_byte_identical_under_any_hash_seed_and_on_python_3_12():
    runs = {("this python", seed): fingerprint(sys.executable, seed) for seed in ("0", "1", "4242")}
    if PYTHON_312.exists():
        runs[("3.12", "77")] = fingerprint(PYTHON_312, "77")
    else:  # pragma: no cover
        pytest.skip("Python 3.12 is not at %s" % PYTHON_312)
    assert len(set(runs.values())) == 1, runs


# ---------------------------------------------------------------------------------------------- options


def test_other_world_sizes():
    doc = generate.generate_world(1, base_items=12, craftable_items=300, families=3)
    assert len(doc["base_items"]) == 12 and len(doc["recipes"]) == 300
    assert sorted(set(doc["depths"].values())) == list(range(1, 13))
    assert len({name.split("_")[0] for name in doc["base_items"]}) == 3
    game.World(doc)


def test_other_task_counts_keep_at1s_proportions():
    doc = generate.generate_world(2, craftable_items=600)
    tasks = generate.generate_tasks(doc, 2, train=100, val=25)
    assert Counter(t["misc"]["difficulty"] for t in tasks["train"]) == {"easy": 23, "medium": 34, "hard": 22, "extreme": 21}
    assert Counter(t["misc"]["difficulty"] for t in tasks["val"]) == {"easy": 6, "medium": 9, "hard": 5, "extreme": 5}


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**40),
    families=st.integers(1, 6),
    extra_base=st.integers(0, 20),
    extra_items=st.integers(0, 400),
)
def test_any_small_world_gives_solvable_tasks(seed, families, extra_base, extra_items):
    smallest = 36 * families + (12 if families > 1 else 0)
    doc = generate.generate_world(seed, base_items=families + extra_base, craftable_items=smallest + extra_items, families=families)
    generate.check_world(doc)
    tasks = generate.generate_tasks(doc, seed, train=40, val=12)  # raises if a gold run fails its replay
    assert [len(tasks[split]) for split in records.SPLITS] == [40, 12]
    world = game.World(doc)
    for row in records.rows_from_source_lines("val", tasks["val"]):
        assert game.replay(world, records.engine_task(row), records.gold_tool_calls(row)).reward == 1.0


def test_per_difficulty_counts_and_train_reuse_when_asked_for_more_than_the_pairs():
    doc = generate.generate_world(4, base_items=10, craftable_items=200, families=2)
    pairs = sum(1 for item, d in doc["depths"].items() if 2 <= d <= 3) * 3
    wanted = {"train": {"easy": pairs + 5, "medium": 0, "hard": 0, "extreme": 0},
              "val": {"easy": 4, "medium": 1, "hard": 1, "extreme": 1}}
    tasks = generate.generate_tasks(doc, 4, per_difficulty=wanted)
    assert len(tasks["train"]) == pairs + 5 and len(tasks["val"]) == 7
    val_targets = {tuple(t["misc"]["target_items"].items()) for t in tasks["val"]}
    assert not val_targets & {tuple(t["misc"]["target_items"].items()) for t in tasks["train"]}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: generate.generate_world(-1), "seed must be an integer >= 0"),
        (lambda: generate.generate_world(1, craftable_items=10), "craftable_items must be an integer >= "),
        (lambda: generate.generate_world(1, families=4, base_items=3), "base_items must be an integer >= 4"),
        (lambda: generate.generate_world(1, families=99), "families must be at most"),
        (lambda: generate.generate_world(1, base_items=2.5), "base_items must be an integer"),
        (lambda: generate.generate_tasks(generate.generate_world(1, craftable_items=200), 1, val=10_000), "too few"),
        (lambda: generate.generate_tasks({}, 1, per_difficulty={"test": {}}), "unknown split"),
        (lambda: generate.generate_tasks({}, 1, per_difficulty={"val": {"easy": 1}}), "a count for each of"),
        (lambda: generate.generate_tasks({}, 1, train=-3), "train must be an integer >= 0"),
    ],
)
def test_user_mistakes_raise_one_line_value_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_world_name_and_task_id_stem():
    assert generate.world_name(12) == "textcraft-synth-s12"
    assert generate.task_id_prefix({"name": "textcraft-synth-s12"}) == "textcraft_synth_s12"

