"""One golden test per message of SPEC §2, on a small hand-made world; expected text written from the spec."""

from __future__ import annotations

import copy
import json

import pytest

from tcsynth.game import EPISODE_OVER, Game, World

MINI = {
    "format": "textcraft-recipes/1",
    "name": "mini",
    "base_items": ["ore", "wood"],
    "depths": {"plank": 1, "duo": 1, "stick": 2, "tool": 3},
    "tags": {},
    "recipes": {
        "plank": [{"result_count": 4, "ingredients": [["wood", 1]]}],
        "stick": [{"result_count": 2, "ingredients": [["plank", 2]]}],
        "tool": [{"result_count": 1, "ingredients": [["stick", 2], ["ore", 3]]}],
        "duo": [
            {"result_count": 2, "ingredients": [["ore", 1]]},
            {"result_count": 1, "ingredients": [["wood", 2]]},
        ],
    },
}


@pytest.fixture
def game():
    return Game(World(MINI), {"tool": 1}, {"wood": 3, "ore": 1, "gem": 2})


def test_success_message_counts_the_total_made(game):
    assert game.craft({"wood": 2}, ["plank", 8]) == "Successfully crafted 8 plank(s)"
    assert game.inventory == {"wood": 1, "ore": 1, "gem": 2, "plank": 8}


def test_an_emptied_ingredient_leaves_and_a_new_item_goes_last(game):
    game.craft({"wood": 3}, ("plank", 12))  # a tuple target is accepted too
    assert game.view_inventory() == '{"ore": 1, "gem": 2, "plank": 12}'
    game.craft({"plank": 4}, ["stick", 4])
    assert game.view_inventory() == '{"ore": 1, "gem": 2, "plank": 8, "stick": 4}'


def test_crafting_more_of_a_held_item_keeps_its_place():
    game = Game(World(MINI), {}, {"plank": 1, "wood": 2, "ore": 1})
    game.craft({"wood": 1}, ["plank", 4])
    assert list(game.inventory) == ["plank", "wood", "ore"]
    assert game.inventory["plank"] == 5


@pytest.mark.parametrize(
    "ingredients, target, expected",
    [
        ([], ["plank", 4], "Error: ingredients must be a dict, got list"),
        (None, ["plank", 4], "Error: ingredients must be a dict, got NoneType"),
        ({"wood": 1}, "plank", "Error: target must be a tuple of (item_name, count)"),
        ({"wood": 1}, ["plank"], "Error: target must be a tuple of (item_name, count)"),
        ({"wood": 1}, ["plank", 4, 1], "Error: target must be a tuple of (item_name, count)"),
        ({"wood": 1}, [7, 4], "Error: target item must be a string, got int"),
        ({"wood": 1}, ["plank", 4.0], "Error: target count must be an int, got float"),
        ({"wood": 1}, ["plank", "4"], "Error: target count must be an int, got str"),
        ({"wood": 1}, ["plank", 0], "Error: target count must be positive, got 0"),
        ({"wood": 1}, ["plank", -8], "Error: target count must be positive, got -8"),
        ({"wood": 1, 3: 1}, ["plank", 4], "Error: ingredient name must be a string, got int"),
        ({"wood": "1"}, ["plank", 4], "Error: ingredient count for wood must be an int, got str"),
        ({"wood": 0}, ["plank", 4], "Error: ingredient count for wood must be positive, got 0"),
        ({"wood": 1}, ["wood", 4], "Error: No recipe found for wood"),
        ({"wood": 1}, ["unobtainium", 4], "Error: No recipe found for unobtainium"),
    ],
)
def test_argument_errors_in_the_specified_order(game, ingredients, target, expected):
    before = copy.deepcopy(game.inventory)
    assert game.craft(ingredients, target) == expected
    assert game.inventory == before


def test_ingredient_checks_run_before_the_recipe_lookup(game):
    assert game.craft({"wood": -1}, ["unobtainium", 4]) == "Error: ingredient count for wood must be positive, got -1"


ONE_RECIPE_FAILED = "Error: All 1 recipe(s) failed for %s. Errors:\nRecipe 1: %s"


@pytest.mark.parametrize(
    "ingredients, target, problem",
    [
        ({"wood": 1}, ["plank", 6], "Target count 6 is not divisible by recipe result count 4"),
        ({}, ["plank", 4], "Missing required ingredient wood"),
        ({"wood": 3}, ["plank", 8], "Wrong amount of wood. Need 2, provided 3"),
        ({"wood": 2, "ore": 1, "gem": 2}, ["plank", 8], "Extra ingredients not required: ore, gem"),
        ({"wood": 5}, ["plank", 20], "Insufficient ingredients in inventory: wood: need 5, have 3"),
    ],
)
def test_recipe_errors(game, ingredients, target, problem):
    before = copy.deepcopy(game.inventory)
    assert game.craft(ingredients, target) == ONE_RECIPE_FAILED % (target[0], problem)
    assert game.inventory == before


def test_first_wrong_amount_stops_the_recipe_check():
    game = Game(World(MINI), {}, {})
    text = game.craft({"stick": 1, "ore": 1}, ["tool", 1])
    assert text == ONE_RECIPE_FAILED % ("tool", "Wrong amount of stick. Need 2, provided 1")


def test_every_short_ingredient_is_listed_in_recipe_order():
    game = Game(World(MINI), {}, {"ore": 1})
    text = game.craft({"ore": 3, "stick": 2}, ["tool", 1])
    expected = "Insufficient ingredients in inventory: stick: need 2, have 0, ore: need 3, have 1"
    assert text == ONE_RECIPE_FAILED % ("tool", expected)


def test_all_recipes_failing_lists_each_on_its_own_line():
    game = Game(World(MINI), {}, {"wood": 2})
    assert game.craft({"wood": 6}, ["duo", 3]) == (
        "Error: All 2 recipe(s) failed for duo. Errors:\n"
        "Recipe 1: Target count 3 is not divisible by recipe result count 2\n"
        "Recipe 2: Insufficient ingredients in inventory: wood: need 6, have 2"
    )


def test_a_later_recipe_applies_when_an_earlier_one_fails():
    game = Game(World(MINI), {}, {"wood": 4})
    assert game.craft({"wood": 4}, ["duo", 2]) == "Successfully crafted 2 duo(s)"
    assert game.inventory == {"duo": 2}


def test_a_boolean_count_is_an_int_as_in_python():
    game = Game(World(MINI), {}, {"wood": 1})
    assert game.craft({"wood": True}, ["plank", 4]) == "Successfully crafted 4 plank(s)"
    assert game.craft({"wood": 1}, ["plank", True]) == ONE_RECIPE_FAILED % (
        "plank",
        "Target count True is not divisible by recipe result count 4",
    )


def test_get_info_known_base_and_unknown_items_in_request_order(game):
    text = game.get_info(["stick", "wood", "mystery"])
    assert text == (
        '[{"item": "stick", "can_craft": true, "is_base": false, "in_inventory": 0, "crafting_depth": 2, '
        '"recipes": [{"ingredients": {"plank": 2}, "result_count": 2}]}, '
        '{"item": "wood", "can_craft": false, "is_base": true, "in_inventory": 3, "crafting_depth": 0, "recipes": []}, '
        '{"item": "mystery", "can_craft": false, "is_base": false, "in_inventory": 0, "crafting_depth": 0, "recipes": []}]'
    )


def test_get_info_lists_every_recipe_and_held_unknown_items(game):
    info = json.loads(game.get_info(["duo", "gem"]))
    assert info[0]["recipes"] == [
        {"ingredients": {"ore": 1}, "result_count": 2},
        {"ingredients": {"wood": 2}, "result_count": 1},
    ]
    assert info[1] == {"item": "gem", "can_craft": False, "is_base": False, "in_inventory": 2, "crafting_depth": 0, "recipes": []}
    assert game.get_info([]) == "[]"


def test_view_inventory_is_json_in_insertion_order(game):
    assert game.view_inventory() == '{"wood": 3, "ore": 1, "gem": 2}'


def test_finish_echoes_the_message_and_ends_the_episode(game):
    assert game.finish("all done") == "all done"
    assert game.finished
    for answer in (game.craft({"wood": 1}, ["plank", 4]), game.get_info(["wood"]), game.view_inventory(), game.finish("x")):
        assert answer == EPISODE_OVER


def _win(game):
    game.craft({"wood": 2}, ["plank", 8])
    game.craft({"plank": 4}, ["stick", 4])
    game.craft({"stick": 2, "ore": 3}, ["tool", 1])


def test_success_needs_finish_a_message_and_the_targets():
    world = World(MINI)
    winner = Game(world, {"tool": 1}, {"wood": 2, "ore": 3})
    _win(winner)
    assert not winner.succeeded()  # not finished yet
    winner.finish("made a tool")
    assert winner.succeeded() and winner.missing_items() == {}

    silent = Game(world, {"tool": 1}, {"wood": 2, "ore": 3})
    _win(silent)
    silent.finish("")
    assert not silent.succeeded()

    idle = Game(world, {"tool": 1, "plank": 2}, {"wood": 2, "ore": 3})
    idle.finish("gave up")
    assert not idle.succeeded() and idle.missing_items() == {"tool": 1, "plank": 2}


def test_targets_count_what_was_gained_not_what_is_held():
    game = Game(World(MINI), {"plank": 4}, {"plank": 5, "wood": 1})
    game.finish("I already had planks")
    assert game.missing_items() == {"plank": 4}
    game = Game(World(MINI), {"plank": 4}, {"plank": 5, "wood": 1})
    game.craft({"wood": 1}, ["plank", 4])
    game.finish("crafted 4 planks")
    assert game.succeeded()


@pytest.mark.parametrize(
    "tool, arguments, complaint",
    [
        ("smelt", {}, "unknown tool 'smelt'"),
        ("get_info", {"items": "wood"}, "items must be a list of item names"),
        ("get_info", {}, "get_info takes items"),
        ("finish", {"message": 3}, "message must be a string"),
        ("view_inventory", {"all": True}, "view_inventory takes no arguments"),
        ("craft", [], "must be a JSON object"),
    ],
)
def test_call_answers_malformed_calls_with_an_error_and_changes_nothing(game, tool, arguments, complaint):
    before = copy.deepcopy(game.inventory)
    answer = game.call(tool, arguments)
    assert answer.startswith("Error: ") and complaint in answer
    assert game.inventory == before and not game.finished


def test_call_dispatches_to_the_tools(game):
    assert game.call("craft", {"ingredients": {"wood": 1}, "target": ["plank", 4]}) == "Successfully crafted 4 plank(s)"
    assert game.call("view_inventory", {}) == game.view_inventory()
    assert game.call("get_info", {"items": ["plank"]}) == game.get_info(["plank"])
    assert game.call("finish", {"message": "ok"}) == "ok"


def test_worlds_with_tag_ingredients_are_refused():
    document = dict(MINI, tags={"tag:wood": ["wood"]})
    with pytest.raises(ValueError, match="tag"):
        World(document)


# ---------------------------------------------- the quick recipe test in Game.craft and the full checks agree
#
# Game.craft finds the recipe to apply with a quick pass/fail test and runs the full checks
# (_first_passing_recipe, which also writes the error text) only when that test finds none.  Both must pick
# the same recipe for every call; this compares them on many generated calls.


def _random_world(rng):
    """A world where most items have two or three recipes over overlapping ingredients."""
    base = ["b%d" % n for n in range(6)]
    recipes = {}
    for n in range(12):
        options = []
        for _ in range(rng.choice((1, 2, 3))):
            parts = rng.sample(base + sorted(recipes), rng.randint(1, 3))
            options.append({"result_count": rng.choice((1, 1, 2, 3, 4)), "ingredients": [[p, rng.randint(1, 3)] for p in parts]})
        recipes["c%d" % n] = options
    return World({"format": "textcraft-recipes/1", "name": "random", "base_items": base, "depths": {}, "tags": {}, "recipes": recipes})


ODD_AMOUNTS = [0, -1, True, 1.0, "1", None, [1]]


def _generated_call(rng, world):
    """(inventory, ingredients, item, count) near a recipe of a random item, often slightly wrong."""
    item = rng.choice(sorted(world.recipes)) if rng.random() < 0.95 else rng.choice(["b0", "nothing"])
    options = world.recipes.get(item) or ((1, (("b0", 1),)),)
    result_count, parts = rng.choice(options)
    crafts = rng.randint(1, 3)
    count = result_count * crafts + (rng.choice((-1, 1)) if rng.random() < 0.1 else 0)
    if count <= 0 or rng.random() < 0.02:
        count = True if rng.random() < 0.5 else 1
    ingredients = {name: per * crafts for name, per in parts}
    roll = rng.random()
    names = list(ingredients)
    if roll < 0.1 and names:
        del ingredients[rng.choice(names)]
    elif roll < 0.2:
        ingredients[rng.choice(["b0", "b5", "c1", "zz"])] = rng.randint(1, 4)
    elif roll < 0.3 and names:
        ingredients[rng.choice(names)] += rng.choice((-1, 1))
    elif roll < 0.4 and names:
        ingredients[rng.choice(names)] = rng.choice(ODD_AMOUNTS)
    elif roll < 0.45:
        ingredients = dict(reversed(list(ingredients.items())))
    inventory = {}
    for name, per in parts:
        if rng.random() < 0.9:
            held = per * crafts + rng.choice((0, 0, 0, 1, -1, 5))
            if held > 0:
                inventory[name] = held
    if rng.random() < 0.3:
        inventory[item] = rng.randint(1, 3)
    rng.shuffle(names)
    return inventory, ingredients, item, count


def _expected_by_full_checks(world, inventory, ingredients, item, count):
    """(answer, inventory after) when the recipe comes from the full checks alone."""
    from tcsynth.game import _first_passing_recipe

    after = dict(inventory)
    picked = _first_passing_recipe(world.recipes.get(item), item, ingredients, count, after)
    if isinstance(picked, str):
        return picked, after
    result_count, parts = picked
    crafts = count // result_count
    for name, per in parts:
        after[name] -= per * crafts
        if after[name] == 0:
            del after[name]
    after[item] = after.get(item, 0) + result_count * crafts
    return "Successfully crafted %d %s(s)" % (result_count * crafts, item), after


@pytest.mark.parametrize("which", ["mini", "random", "textcraft-synth"])
def test_the_quick_recipe_test_and_the_full_checks_agree(which, world):
    import random

    rng = random.Random(14)
    chosen = {"mini": World(MINI), "random": _random_world(rng), "textcraft-synth": world}[which]
    outcomes = {"accepted": 0, "rejected": 0}
    for _ in range(20000):
        inventory, ingredients, item, count = _generated_call(rng, chosen)
        game = Game(chosen, {}, inventory)
        answer = game.craft(ingredients, [item, count])
        expected, after = _expected_by_full_checks(chosen, inventory, ingredients, item, count)
        assert (answer, list(game.inventory.items())) == (expected, list(after.items())), (inventory, ingredients, item, count)
        outcomes["accepted" if answer.startswith("Successfully") else "rejected"] += 1
    assert min(outcomes.values()) > 2000, outcomes  # both branches well exercised


def test_the_cached_description_text_is_json_dumps_of_the_description(world):
    """get_info joins texts made once per item; they must be what json.dumps prints, for every item of
    the published world, any count held, and names outside the world (never cached)."""
    names = sorted(set(world.depths) | set(world.recipes) | set(world.base_items)) + ["nothing", "", "é\u2603"]
    for item in names:
        for held in (0, 1, 7, 10**12, -3):
            assert world.describe_json(item, held) == json.dumps(world.describe(item, held)), (item, held)
    assert world.describe_json("tool-x", True) == json.dumps(world.describe("tool-x", True))
    assert world.describe_json(names[0], True) == json.dumps(world.describe(names[0], True))  # a bool is not a count
    assert not any(name in world._described for name in ("nothing", "", "é\u2603"))
    played = Game(world, {}, {names[0]: 2})
    assert played.get_info(names[:3] + ["nothing"]) == json.dumps([world.describe(n, played.inventory.get(n, 0)) for n in names[:3] + ["nothing"]])
    assert played.get_info([]) == "[]"
