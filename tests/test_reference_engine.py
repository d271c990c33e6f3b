"""Opt-in: our engine prints what the reference engine prints, for gold and for fuzzed calls.

Runs only when TEXTCRAFT_REFERENCE points at the unpacked platoon-textcraft 0.3.0 wheel (the reference is a
black box here: we call it and compare what it returns).  The always-on check is ``test_engine_fixture.py``;
here, besides a live comparison with calls of its own, the reference answers the fixture's calls again, so
a fixture that no longer matches its recording script (or the reference) is caught.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import json
import os
import random
from pathlib import Path

import pytest

from tcsynth import game, records

REFERENCE = os.environ.get("TEXTCRAFT_REFERENCE")
REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not REFERENCE, reason="set TEXTCRAFT_REFERENCE to the unpacked platoon-textcraft wheel")


@pytest.fixture(scope="module")
def reference():
    path = Path(REFERENCE) / "platoon_textcraft" / "harbor" / "game.py"
    spec = importlib.util.spec_from_file_location("reference_game", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mutations(rng, items, ingredients, target):
    """A few ways a model gets a craft wrong (or right by another road)."""
    ingredients, target = dict(ingredients), list(target)
    roll = rng.random()
    if roll < 0.1 and ingredients:
        ingredients[rng.choice(list(ingredients))] += rng.choice([-1, 1, 100])
    elif roll < 0.15:
        ingredients[rng.choice(items)] = rng.randint(1, 3)
    elif roll < 0.2 and ingredients:
        del ingredients[rng.choice(list(ingredients))]
    elif roll < 0.25:
        target[1] += rng.choice([1, -target[1], 1000])
    elif roll < 0.3:
        target[1] = rng.choice([True, 1.0, "2", None, -5])
    elif roll < 0.33:
        ingredients = {k: rng.choice([True, 0, -1, 2.0, "x"]) for k in ingredients}
    elif roll < 0.35:
        target = [rng.choice(items), rng.randint(1, 20)]
    elif roll < 0.37:
        target = rng.choice([[1, 2], "x", [1], (target[0], target[1])])
    elif roll < 0.4:
        ingredients = {k: v * 3 for k, v in ingredients.items()}
        target[1] *= 3
    return ingredients, target


def test_same_observations_as_the_reference(reference, data, world):
    book = reference.RecipeBook(json.loads(data.recipes_bytes))
    rng = random.Random(20261130)
    items = sorted(world.recipes)[:300] + sorted(world.base_items)[:5] + ["unknown_item"]
    compared = 0
    for split in records.SPLITS:
        for row in data.tasks[split][::4]:
            task = records.engine_task(row)
            theirs, ours = reference.Game(book, task), game.Game.for_task(world, task)
            for item, total, ingredients in records.gold_steps(row):
                ingredients, target = _mutations(rng, items, ingredients, [item, total])
                arguments = {"ingredients": ingredients, "target": target}
                assert ours.call("craft", arguments) == theirs.call("craft", arguments)
                if rng.random() < 0.05:
                    asked = {"items": rng.sample(items, 3)}
                    assert ours.call("get_info", asked) == theirs.call("get_info", asked)
                    assert ours.call("view_inventory", {}) == theirs.call("view_inventory", {})
                compared += 1
            assert ours.call("finish", {"message": "done"}) == theirs.call("finish", {"message": "done"})
            assert (1.0 if ours.succeeded() else 0.0) == theirs.evaluate("done")[0]
    assert compared > 40000


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_fixture_is_what_the_reference_answers():
    script = _load_script("record_engine_fixture")
    with gzip.open(script.DEFAULT_OUT, "rt", encoding="ascii") as handle:
        header, *committed = [json.loads(line) for line in handle]
    root = Path(REFERENCE)
    sources, rows, recipes_bytes = script.load_inputs(root)
    document = json.loads(recipes_bytes)
    # The Harbor mirror runs on any Python; the recording also asked the environment, which needs 3.12+.
    engines = [script.HarborMirror(root, document)]
    episodes, _, _ = asyncio.run(script.record(engines, sources, rows, script.Recipes(document), header["seed"], lambda line: None))
    assert len(episodes) == len(committed)
    for fresh, stored in zip(episodes, committed):
        # Compared as JSON text: 1 == True and 1 == 1.0 in Python, not in the fixture.
        assert json.dumps(fresh) == json.dumps(stored), "episode %s differs from the committed fixture: re-record it" % stored["task"]
