"""Record what the reference environment answers to a fixed set of tool calls: the engine's exact-output fixture.

    TEXTCRAFT_REFERENCE=/path/to/unpacked/platoon-textcraft-0.3.0 \\
        /path/to/python3.12 scripts/record_engine_fixture.py [--out tests/fixtures/engine-observations.jsonl.gz]

Opt-in maintainer tool: it needs the reference, ``platoon-textcraft`` 0.3.0 unpacked (the wheel's
contents), which the tests never do.  ``tests/test_engine_fixture.py`` then plays the same calls through
``tcsynth.game`` in every test run and expects the recorded answers character for character.

Which reference answers
-----------------------
``textcraft-synth@1`` is the OpenReward environment ``platoon_textcraft.env.TextCraftSynthEnvironment``;
it needs Python 3.12 or later with ``openreward`` and ``pydantic`` installed (``pip install openreward``).
Every call goes through the environment's own tool dispatch (``Environment._call_tool``, the path its
server takes for an agent's call, schema validation included), one environment per task.  The package
also ships a stand-alone mirror of the game for its Harbor tasks (``platoon_textcraft/harbor/game.py``);
each answer is asked of it too, and any disagreement between the two stops the recording.  With
``--engine harbor`` the mirror alone answers (no ``openreward`` needed, any Python 3.8+); the header says
which engine answered.  The reference is only called: nothing of it is copied here.

Which calls
-----------
One episode per task of both splits, in source order, with the task's own starting inventory.  Its calls
are the gold crafts (``target = [ITEM, TOTAL]``, see :func:`tcsynth.records.gold_steps`) in order, with
fuzzed calls slipped in between (:func:`fuzzed_call`: every error branch of the ``craft`` tool, crafts
that succeed by another road, ``get_info`` on known, base, unknown and repeated items, ``view_inventory``),
and last a ``finish``: mostly :data:`FINISH_MESSAGE` after the gold crafts, sometimes an early or an
empty one.  Fuzzed calls are drawn from ``random.Random("SEED:TASK NAME")``, so each task's calls depend
only on the seed and the task.  Only calls with well-formed argument sets are made (the exact parameter
names, ``items`` a list of strings, ``message`` a string): to any other call our engine answers in words
of its own (its stand-in for the environment's schema check), which are not part of the contract.

The fixture
-----------
Gzipped JSON lines (compact, ASCII, gzip ``mtime`` 0, so the same inputs give the same bytes).  Line 1
is the header: format tag, environment, which engine answered, seed, the SHA-256 of the source files and
of ``recipes.json``, counts.  Then one line per task, ``{"task": NAME, "reward": R, "steps": [...]}``, with
one step per call in call order: a gold craft is stored as its answer alone (a string: the call itself
is the next gold step of the task, which the test rebuilds from ``data/``); any other call as
``[TOOL, ARGUMENTS, ANSWER, KIND]``, KIND naming what the generator meant to exercise.  JSON object keys
are strings, so an ingredients dict with a non-string key is stored as ``{"__pairs__": [[KEY, VALUE], ...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import importlib.util
import io
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import records  # noqa: E402  (pure Python: no pyarrow needed here)

FORMAT = "tcsynth-engine-fixture/1"
DEFAULT_OUT = REPO / "tests" / "fixtures" / "engine-observations.jsonl.gz"
SEED = 20261130
FINISH_MESSAGE = "Crafted every target item."
PAIRS_KEY = "__pairs__"
# Chance of a fuzzed call before each gold craft, and of an episode that finishes before its gold is done.
FUZZ_RATE = 0.025
EARLY_FINISH_RATE = 0.03
EMPTY_FINISH_RATE = 0.02
UNKNOWN_ITEMS = ("unknown_item", "diamond_pickaxe", "a1_i5 ", "", "caf\u00e9_\u00fcber")


# ------------------------------------------------------------------------------------------ argument codec


def encode(value: Any) -> Any:
    """``value`` as JSON can hold it: a dict with a non-string key becomes ``{"__pairs__": [[k, v], ...]}``."""
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value) and PAIRS_KEY not in value:
            return {key: encode(item) for key, item in value.items()}
        return {PAIRS_KEY: [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    return value


# ------------------------------------------------------------------------------------------------ the world


class Recipes:
    """What the call generator needs of ``recipes.json``: each item's recipe and the item lists."""

    def __init__(self, document: Mapping[str, Any]):
        self.recipes = {
            item: [(recipe["result_count"], [tuple(part) for part in recipe["ingredients"]]) for recipe in options]
            for item, options in document["recipes"].items()
        }
        self.craftable = sorted(self.recipes)
        self.base = list(document["base_items"])

    def first(self, item: str) -> Tuple[int, List[Tuple[str, int]]]:
        return self.recipes[item][0]


# -------------------------------------------------------------------------------------------- fuzzed calls

Call = Tuple[str, Dict[str, Any]]
Step = Tuple[str, int, Dict[str, int]]  # (item, total, ingredients) of a gold craft


def _scaled(step: Step, factor: int) -> Call:
    item, total, ingredients = step
    return "craft", {"ingredients": {k: v * factor for k, v in ingredients.items()}, "target": [item, total * factor]}


_GOLD = object()  # "as the gold call has it" (None is one of the values tried)


def _with(step: Step, ingredients: Any = _GOLD, target: Any = _GOLD) -> Call:
    item, total, given = step
    return "craft", {
        "ingredients": dict(given) if ingredients is _GOLD else ingredients,
        "target": [item, total] if target is _GOLD else target,
    }


def _insert(rng: random.Random, mapping: Dict[Any, Any], key: Any, value: Any) -> Dict[Any, Any]:
    pairs = list(mapping.items())
    pairs.insert(rng.randint(0, len(pairs)), (key, value))
    return dict(pairs)


def _bad_number(rng: random.Random, n: int) -> Any:
    return rng.choice([float(n), str(n), None, [n], {"n": n}, n + 0.5, "many"])


def _some_item(rng: random.Random, world: Recipes) -> str:
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(world.craftable)
    if roll < 0.85:
        return rng.choice(world.base)
    return rng.choice(UNKNOWN_ITEMS)


def fuzzed_call(rng: random.Random, step: Step, world: Recipes, held: Sequence[str]) -> Tuple[Call, str]:
    """One call near gold step ``step`` and the name of what it exercises; ``held`` are items the task starts with."""
    item, total, ingredients = step
    result_count, parts = world.first(item)
    names = list(ingredients)
    kind = rng.choices(KINDS, WEIGHTS)[0]
    if kind == "ingredients_not_dict":
        call = _with(step, ingredients=rng.choice([list(ingredients.items()), names, "x", None, total, True]))
    elif kind == "target_shape":
        call = _with(step, target=rng.choice([item, [item], [item, total, 1], None, {item: total}, total, [], [[item, total]]]))
    elif kind == "target_item_type":
        call = _with(step, target=[rng.choice([total, None, [item], {"item": item}, 2.5, True]), total])
    elif kind == "target_count_type":
        call = _with(step, target=[item, _bad_number(rng, total)])
    elif kind == "target_count_nonpositive":
        call = _with(step, target=[item, rng.choice([0, -1, -total, False, -(10**12)])])
    elif kind == "ingredient_name_type":
        call = _with(step, ingredients=_insert(rng, dict(ingredients), rng.choice([1, 0, None, True, 2.5]), 1))
    elif kind == "ingredient_count_type":
        changed = dict(ingredients)
        name = rng.choice(names)
        changed[name] = _bad_number(rng, changed[name])
        call = _with(step, ingredients=changed)
    elif kind == "ingredient_count_nonpositive":
        changed = dict(ingredients)
        name = rng.choice(names)
        changed[name] = rng.choice([0, -1, -changed[name], False])
        call = _with(step, ingredients=changed)
    elif kind == "no_recipe":
        other = rng.choice(UNKNOWN_ITEMS) if rng.random() < 0.5 else rng.choice(world.base)
        call = _with(step, target=[other, rng.randint(1, 8)])
    elif kind == "not_divisible":
        if result_count > 1:
            wrong = total + rng.randint(1, result_count - 1)
        else:  # every count divides by 1: make the recipe's own yield the problem elsewhere
            other = rng.choice([name for name in world.craftable if world.first(name)[0] > 1])
            item, wrong = other, world.first(other)[0] + 1
        call = _with(step, target=[item, wrong])
    elif kind == "missing_ingredient":
        changed = dict(ingredients)
        del changed[rng.choice(names)]
        call = _with(step, ingredients=changed)
    elif kind == "wrong_amount":
        changed = dict(ingredients)
        name = rng.choice(names)
        changed[name] = max(1, changed[name] + rng.choice([-1, 1, 7, changed[name], 10**6]))
        if changed[name] == ingredients[name]:
            changed[name] += 1
        call = _with(step, ingredients=changed)
    elif kind == "extra_ingredient":
        changed = dict(ingredients)
        for _ in range(rng.choice([1, 1, 2, 3])):
            changed = _insert(rng, changed, _some_item(rng, world), rng.randint(1, 5))
        call = _with(step, ingredients=changed)
    elif kind == "insufficient":
        call = _scaled(step, rng.choice([2, 3, 10, 1000, 10**9]))
    elif kind == "other_item":
        # Another item's exact recipe: mostly not held, sometimes enough of it is.
        other = rng.choice(world.craftable)
        count, recipe = world.first(other)
        crafts = rng.choice([1, 1, 2, 5])
        call = "craft", {"ingredients": {name: n * crafts for name, n in recipe}, "target": [other, count * crafts]}
    elif kind == "reordered":
        shuffled = list(ingredients.items())
        rng.shuffle(shuffled)
        call = _with(step, ingredients=dict(shuffled))
    elif kind == "bool_count":
        # ``True`` is an int to the environment: a count of 1 where the recipe makes 1 a craft.
        target_count = True if result_count == 1 else total
        crafts = 1 if result_count == 1 else total // result_count
        call = _with(step, ingredients={name: n * crafts for name, n in parts}, target=[item, target_count])
    elif kind == "bool_amount":
        changed = {name: (True if n == 1 else n) for name, n in ingredients.items()}
        if changed == ingredients:
            changed[rng.choice(names)] = True
        call = _with(step, ingredients=changed)
    elif kind == "partial":
        crafts = total // result_count
        part = max(1, crafts // 2)
        call = _with(step, ingredients={name: n * part for name, n in parts}, target=[item, result_count * part])
    elif kind == "get_info":
        pool = [item] + names + [rng.choice(world.base), rng.choice(world.craftable), rng.choice(UNKNOWN_ITEMS)]
        pool += list(held)[:3]
        asked = [rng.choice(pool) for _ in range(rng.choice([0, 1, 1, 2, 3, 4]))]
        if asked and rng.random() < 0.2:
            asked.append(asked[0])  # a repeated item is described twice
        call = "get_info", {"items": asked}
    else:
        call = "view_inventory", {}
    return call, kind


# The kinds of fuzzed call and how often each is drawn (relative weights).
KIND_WEIGHTS = {
    "ingredients_not_dict": 3,
    "target_shape": 3,
    "target_item_type": 3,
    "target_count_type": 4,
    "target_count_nonpositive": 4,
    "ingredient_name_type": 3,
    "ingredient_count_type": 4,
    "ingredient_count_nonpositive": 4,
    "no_recipe": 4,
    "not_divisible": 5,
    "missing_ingredient": 6,
    "wrong_amount": 6,
    "extra_ingredient": 6,
    "insufficient": 6,
    "other_item": 5,
    "reordered": 3,
    "bool_count": 2,
    "bool_amount": 2,
    "partial": 2,
    "get_info": 10,
    "view_inventory": 8,
}
KINDS = list(KIND_WEIGHTS)
WEIGHTS = [KIND_WEIGHTS[kind] for kind in KINDS]


def episode_calls(row: Mapping[str, Any], world: Recipes, seed: int) -> List[Tuple[Optional[Call], str]]:
    """The calls of one task's episode: ``(None, "gold")`` for the next gold craft, else ``(call, kind)``."""
    rng = random.Random("%d:%s" % (seed, row["name"]))
    steps = list(records.gold_steps(row))
    held = [entry["item"] for entry in row["initial_inventory"]]
    stop = rng.randrange(len(steps)) if rng.random() < EARLY_FINISH_RATE else len(steps)
    calls: List[Tuple[Optional[Call], str]] = []
    for number, step in enumerate(steps[:stop]):
        while rng.random() < FUZZ_RATE:
            calls.append(fuzzed_call(rng, step, world, held))
        calls.append((None, "gold"))
    for _ in range(rng.choice([0, 0, 1, 2])):
        calls.append(fuzzed_call(rng, steps[min(stop, len(steps) - 1)], world, held))
    if stop < len(steps):
        calls.append((("finish", {"message": rng.choice(["Done early.", "I give up", "done"])}), "finish_early"))
    elif rng.random() < EMPTY_FINISH_RATE:
        calls.append((("finish", {"message": ""}), "finish_empty"))
    else:
        calls.append((("finish", {"message": FINISH_MESSAGE}), "finish"))
    return calls


# ------------------------------------------------------------------------------------------ the references


def _reference_root() -> Path:
    root = os.environ.get("TEXTCRAFT_REFERENCE")
    if not root:
        raise SystemExit("error: set TEXTCRAFT_REFERENCE to the unpacked platoon-textcraft 0.3.0 wheel")
    root_path = Path(root)
    if not (root_path / "platoon_textcraft" / "harbor" / "game.py").is_file():
        raise SystemExit("error: %s does not hold platoon_textcraft/harbor/game.py" % root_path)
    return root_path


class HarborMirror:
    """The reference's stand-alone Harbor game: ``Game(RecipeBook(recipes), task).call(tool, args)``."""

    name = "platoon_textcraft/harbor/game.py"

    def __init__(self, root: Path, recipes_document: Mapping[str, Any]):
        spec = importlib.util.spec_from_file_location("reference_harbor_game", root / "platoon_textcraft" / "harbor" / "game.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.module = module
        self.book = module.RecipeBook(recipes_document)

    def start(self, source: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        self.game = self.module.Game(self.book, records.engine_task(row))

    async def call(self, tool: str, arguments: Dict[str, Any]) -> Tuple[str, Optional[float]]:
        text = self.game.call(tool, arguments)
        reward = self.game.evaluate(arguments["message"])[0] if tool == "finish" else None
        return text, reward


class Environment:
    """``platoon_textcraft.env.TextCraftSynthEnvironment``, one per task, called through its tool dispatch."""

    name = "platoon_textcraft.env.TextCraftSynthEnvironment"

    def __init__(self, root: Path):
        sys.path.insert(0, str(root))
        # openreward logs every tool call (to standard output); 200,000 such lines are noise here.
        os.environ["OPENREWARD_LOG_LEVEL"] = "ERROR"
        try:
            from platoon_textcraft import env  # noqa: PLC0415
        except ImportError as error:
            raise SystemExit(
                "error: cannot import platoon_textcraft.env (%s); it needs Python 3.12+ with openreward and "
                "pydantic installed, or use --engine harbor" % error
            )
        self.cls = env.TextCraftSynthEnvironment

    def start(self, source: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        self.env = self.cls(task_spec=source)

    async def call(self, tool: str, arguments: Dict[str, Any]) -> Tuple[str, Optional[float]]:
        result = (await self.env._call_tool(tool, arguments)).root
        if not result.ok:
            raise RuntimeError("the environment refused %s %r: %s" % (tool, arguments, result.error))
        blocks = result.output.blocks
        if len(blocks) != 1:
            raise RuntimeError("%s %r answered %d blocks, expected one" % (tool, arguments, len(blocks)))
        return blocks[0].text, result.output.reward


# ---------------------------------------------------------------------------------------------- recording


def load_inputs(root: Path) -> Tuple[Dict[str, List[Dict[str, Any]]], Dict[str, List[records.Row]], bytes]:
    """The source tasks (from the reference's own data folder) and their rows, and ``recipes.json``.

    Every file is checked against :data:`tcsynth.records.SOURCE_SHA256`, so the tasks are the very ones
    ``data/`` holds.
    """
    recipes_bytes = (REPO / "data" / records.RECIPES_FILE).read_bytes()
    _check_sha(records.RECIPES_FILE, recipes_bytes)
    sources, rows = {}, {}
    for split in records.SPLITS:
        filename = records.SOURCE_FILES[split]
        data = (root / "platoon_textcraft" / "data" / filename).read_bytes()
        _check_sha(filename, data)
        sources[split] = records.parse_source_file(data, filename)
        rows[split] = records.rows_from_source_lines(split, sources[split])
    return sources, rows, recipes_bytes


def _check_sha(filename: str, data: bytes) -> None:
    if records.sha256_hex(data) != records.SOURCE_SHA256[filename]:
        raise SystemExit("error: %s is not the textcraft-synth@1 file (SHA-256 differs)" % filename)


async def record(engines: Sequence[Any], sources, rows, world: Recipes, seed: int, log: Callable[[str], None]):
    """Play every episode through every engine; the first engine's answers are kept, the rest must agree."""
    episodes, kinds, gold_calls = [], {}, 0
    for split in records.SPLITS:
        for source, row in zip(sources[split], rows[split]):
            for engine in engines:
                engine.start(source, row)
            steps: List[Any] = []
            gold = records.gold_steps(row)
            reward = None
            for call, kind in episode_calls(row, world, seed):
                if call is None:
                    item, total, ingredients = next(gold)
                    call = "craft", {"ingredients": ingredients, "target": [item, total]}
                tool, arguments = call
                answers = [await engine.call(tool, arguments) for engine in engines]
                for engine, answer in zip(engines[1:], answers[1:]):
                    if answer != answers[0]:
                        raise SystemExit(
                            "error: %s call %d (%s %r): %s answered %r, %s answered %r"
                            % (row["name"], len(steps) + 1, tool, arguments, engines[0].name, answers[0], engine.name, answer)
                        )
                text, step_reward = answers[0]
                if kind == "gold":
                    steps.append(text)
                    gold_calls += 1
                else:
                    steps.append([tool, encode(arguments), text, kind])
                    kinds[kind] = kinds.get(kind, 0) + 1
                if tool == "finish":
                    reward = step_reward
            episodes.append({"task": row["name"], "reward": reward, "steps": steps})
        log("%s: %d episodes" % (split, len(rows[split])))
    return episodes, kinds, gold_calls


def fixture_bytes(header: Mapping[str, Any], episodes: Sequence[Mapping[str, Any]]) -> bytes:
    """The gzipped JSON lines, byte for byte the same for the same header and episodes."""
    lines = [json.dumps(item, separators=(",", ":"), ensure_ascii=True) + "\n" for item in [header, *episodes]]
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as handle:
        handle.write("".join(lines).encode("ascii"))
    return buffer.getvalue()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixture path (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED, help="fuzzing seed (default: %(default)s)")
    parser.add_argument(
        "--engine",
        choices=("env", "harbor"),
        default="env",
        help="env: the OpenReward environment answers, the Harbor mirror must agree (default); harbor: the mirror alone",
    )
    args = parser.parse_args(argv)
    root = _reference_root()
    started = time.perf_counter()
    sources, rows, recipes_bytes = load_inputs(root)
    document = json.loads(recipes_bytes)
    mirror = HarborMirror(root, document)
    engines = [Environment(root), mirror] if args.engine == "env" else [mirror]
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    episodes, kinds, gold_calls = asyncio.run(record(engines, sources, rows, Recipes(document), args.seed, log))
    header = {
        "format": FORMAT,
        "environment": "textcraft-synth@1",
        "reference": "platoon-textcraft 0.3.0",
        "answered_by": engines[0].name,
        "checked_against": [engine.name for engine in engines[1:]],
        "seed": args.seed,
        "sha256": dict(records.SOURCE_SHA256),
        "finish_message": FINISH_MESSAGE,
        "episodes": len(episodes),
        "gold_calls": gold_calls,
        "other_calls": sum(kinds.values()),  # the fuzzed calls and the finishes
        "other_kinds": dict(sorted(kinds.items())),
    }
    data = fixture_bytes(header, episodes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    log(
        "wrote %s: %d bytes, %d episodes, %d gold crafts, %d other calls, in %.1f s"
        % (args.out, len(data), len(episodes), gold_calls, header["other_calls"], time.perf_counter() - started)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
