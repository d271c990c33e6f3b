"""Fresh worlds on demand: new recipes and tasks with the shape of ``textcraft-synth@1``.

Two pure functions, both deterministic in their integer seed::

    generate_world(seed, base_items=50, craftable_items=1402, families=5) -> world document
    generate_tasks(world_doc, seed, train=2522, val=632, per_difficulty=None) -> {"train": [...], "val": [...]}

:func:`world_json_bytes` writes a world as ``recipes.json`` in @1's file layout.  The world document has
format ``textcraft-recipes/1`` (what :class:`tcsynth.game.World` loads), plus a
``generator`` key recording the seed, the options and :data:`GENERATOR_VERSION`, so a card can say how
to rebuild it.  Each task is a source line of ``textcraft-synth@1`` (the dict
:func:`tcsynth.records.check_source_task` accepts), named after the world: world ``textcraft-synth-s7``,
task ids ``textcraft_synth_s7.train.0``.

How a world is built
--------------------
The items form ``families`` separate crafting trees, each grown from its own base items, plus a few
*blend* items at depths 10-12 that join several families.  Depth is exact: a base item has depth 0 and a
crafted item has depth ``1 + max(depth of its ingredients)``.  Each craftable item has one recipe.  The
numbers of items per depth, the ``result_count`` values, the number of ingredients and their amounts all
follow per-depth tables measured on ``textcraft-synth@1`` (:data:`DEPTH_PROFILE` and the tables below it).
Every recipe names one ingredient exactly one level down, so the depth holds; the others reach one or
two levels down, now and then further.

Names are opaque codes that cannot be confused with ``textcraft-synth@1``'s (``a1_i5``, ``raw_t0``): a
family syllable and a serial that says nothing about depth, such as ``vok_217`` (crafted), ``vok_s3``
(base) and ``mix_04`` (blend).

How a task is built
-------------------
A task asks for one item, 1-3 of it at depths 2-6 and 1-2 deeper, as ``textcraft-synth@1`` does.  The
candidates of a difficulty are all ``(item, count)`` pairs in its depth range; they are shuffled, val takes
the first ones and train the rest (train cycles through its share again only when asked for more tasks
than there are pairs).  At the default sizes every pair is used once, like ``textcraft-synth@1``.

The gold trajectory crafts every item the target needs, each once, ordered by depth (then by the order a
breadth-first walk from the target meets them), each as few times as covers what its consumers use.  The
starting inventory holds every base item the trajectory consumes, between two and ten times the amount
used, and up to three base items it does not use (1-5 of each), in random order.  Every task is replayed
through the engine before it is returned; a trajectory that does not earn reward 1.0 raises
:class:`GenerationError`.

Reproducibility
---------------
All randomness comes from :class:`random.Random` instances seeded with integers, drawn only through
``random()``, ``randrange()``, ``shuffle()`` and ``triangular()``, whose sequences are the same on every
CPython 3 since 3.2.  Nothing iterates over a set or depends on ``hash()``, so the output (``json.dumps``
of the documents) is byte-identical under any ``PYTHONHASHSEED`` and on every supported Python.
"""

from __future__ import annotations

import json
import math
import random
from collections import deque
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import game, records
from .errors import UserError

GENERATOR_VERSION = "1"
WORLD_NAME_PREFIX = "textcraft-synth-s"
MAX_DEPTH = records.MAX_DEPTH
MAX_STEPS = 75  # the step budget every textcraft-synth@1 task has

# Items per depth (1..12) in textcraft-synth@1: 125, 125, 120, ... (1,402 in all).
DEPTH_PROFILE = (125, 125, 120, 120, 120, 115, 115, 115, 110, 114, 114, 109)
# Depth groups whose totals are kept while the items per depth vary (±JITTER) inside each group: each
# difficulty's depth range, so that by default its (item, count) pairs are exactly as many as @1's tasks.
DEPTH_GROUPS = ((1, 1),) + tuple(records.DEPTH_RANGES[name] for name in records.DIFFICULTIES)
JITTER = 0.06

# Per depth: weighted choices measured on textcraft-synth@1 (weights are percentages).
RESULT_COUNTS = {1: ((2, 40), (3, 33), (4, 27)), 2: ((2, 53), (3, 47))}
RESULT_COUNTS.update({d: ((1, 52), (2, 48)) for d in (3, 4, 5)})
RESULT_COUNTS.update({d: ((1, 100),) for d in range(6, MAX_DEPTH + 1)})
INGREDIENT_NUMBERS = {1: ((1, 100),), 2: ((2, 100),)}
INGREDIENT_NUMBERS.update({d: ((2, 50), (3, 50)) for d in (3, 4, 5)})
INGREDIENT_NUMBERS.update({d: ((2, 36), (3, 30), (4, 34)) for d in (6, 7)})
INGREDIENT_NUMBERS.update({d: ((3, 30), (4, 35), (5, 35)) for d in (8, 9, 10, 11)})
INGREDIENT_NUMBERS[12] = ((4, 35), (5, 35), (6, 30))
# The chance that an ingredient is needed twice per craft rather than once.
DOUBLE_AMOUNT = {1: 0.48, 2: 0.48, 3: 0.5, 4: 0.5}
BLEND_DOUBLE_AMOUNT = 0.4
# How far below the item each further ingredient sits (the first is always one level down): up to depth
# 6 more often two levels, which keeps shallow items' trees as small as @1's.
SHALLOW_GAPS = ((1, 30), (2, 64), (3, 6))
DEEP_GAPS = ((1, 44), (2, 53), (3, 3))
SHALLOW_DEPTH = 6
# Blend items: per depth from 10 on, how many, and how many families each joins.
BLENDS_PER_DEPTH = 4
BLEND_FAMILIES = {10: ((2, 100),), 11: ((3, 100),), 12: ((4, 60), (5, 40))}

FAMILY_SYLLABLES = ("bel", "dun", "fip", "gok", "hes", "jav", "kur", "lin", "nol", "pex",
                    "quo", "rim", "sab", "vok", "wex", "yel", "zan", "zib")
BLEND_PREFIX = "mix"

# Tasks: the target counts per difficulty, @1's task counts, and how a starting inventory is padded.
TARGET_COUNTS = {"easy": (1, 2, 3), "medium": (1, 2, 3), "hard": (1, 2), "extreme": (1, 2)}
DEFAULT_TASKS = {
    "train": {"easy": 588, "medium": 852, "hard": 544, "extreme": 538},
    "val": {"easy": 147, "medium": 213, "hard": 136, "extreme": 136},
}
STOCK_FACTOR = (2.0, 10.0, 4.0)  # triangular(low, high, mode): held / consumed for each base item used
DISTRACTORS = ((0, 6), (1, 38), (2, 35), (3, 21))
DISTRACTOR_AMOUNT = (1, 5)
# Task sampling uses its own stream, apart from the world's, so the two never share draws.
TASK_STREAM = 0x5EED7A5C


class GenerationError(RuntimeError):
    """The generator produced something that breaks its own promise (a bug, never a user mistake)."""


# ----------------------------------------------------------------------------------------------- helpers


def _weighted(rng: random.Random, table: Sequence[Tuple[Any, int]]) -> Any:
    """One value of ``table`` (``(value, weight)`` pairs), chosen in proportion to the weights."""
    pick = rng.randrange(sum(weight for _, weight in table))
    for value, weight in table:
        if pick < weight:
            return value
        pick -= weight
    raise AssertionError("unreachable")


def _pick(rng: random.Random, items: Sequence[Any]) -> Any:
    return items[rng.randrange(len(items))]


def _apportion(total: int, weights: Sequence[float]) -> List[int]:
    """Split ``total`` into integers in proportion to ``weights`` (largest remainder, ties by position)."""
    whole = sum(weights)
    shares = [total * weight / whole for weight in weights]
    counts = [math.floor(share) for share in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: (counts[i] - shares[i], i))
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _check_positive_int(name: str, value: Any, minimum: int = 1) -> None:
    if type(value) is not int or value < minimum:
        raise UserError("%s must be an integer >= %d, got %r" % (name, minimum, value))


def world_name(seed: int) -> str:
    """The name of the world of ``seed``, e.g. ``textcraft-synth-s7``."""
    return "%s%d" % (WORLD_NAME_PREFIX, seed)


def task_id_prefix(world_doc: Mapping[str, Any]) -> str:
    """``textcraft_synth_s7`` for world ``textcraft-synth-s7``: the stem of its task ids."""
    return world_doc["name"].replace("-", "_")


# ------------------------------------------------------------------------------------------------- world


def depth_counts(rng: random.Random, craftable_items: int) -> List[int]:
    """Items per depth 1..12: @1's profile scaled to ``craftable_items``, varied inside each depth group."""
    group_totals = _apportion(craftable_items, [sum(DEPTH_PROFILE[lo - 1 : hi]) for lo, hi in DEPTH_GROUPS])
    counts: List[int] = []
    for (lo, hi), total in zip(DEPTH_GROUPS, group_totals):
        weights = [DEPTH_PROFILE[d - 1] * (1.0 + JITTER * (2.0 * rng.random() - 1.0)) for d in range(lo, hi + 1)]
        counts.extend(_apportion(total, weights))
    return counts


def _family_names(rng: random.Random, families: int) -> List[str]:
    pool = list(FAMILY_SYLLABLES)
    rng.shuffle(pool)
    return sorted(pool[:families])


def _serial_names(rng: random.Random, prefix: str, count: int, width: int) -> List[str]:
    """``count`` opaque names ``prefix_NNN``: shuffled serials, so a name says nothing about depth."""
    serials = list(range(count))
    rng.shuffle(serials)
    return ["%s_%0*d" % (prefix, width, serial) for serial in serials]


def _choose_ingredients(rng, depth, pools, number):
    """``number`` distinct ingredients for an item at ``depth``; ``pools[d]`` lists the candidates of depth d.

    The first is one level down, which fixes the item's depth; each further one sits one, two or
    (rarely) three levels down, never below depth 0.
    """
    chosen = [_pick(rng, pools[depth - 1])]
    gaps = SHALLOW_GAPS if depth <= SHALLOW_DEPTH else DEEP_GAPS
    while len(chosen) < number:
        for _attempt in range(8):
            gap = min(_weighted(rng, gaps), depth)
            candidate = _pick(rng, pools[depth - gap])
            if candidate not in chosen:
                chosen.append(candidate)
                break
        else:  # the pools near this depth are nearly used up: take any unused one, or stop short
            spare = [item for d in range(depth) for item in pools[d] if item not in chosen]
            if not spare:
                break
            chosen.append(_pick(rng, spare))
    rng.shuffle(chosen)
    return chosen


def _recipe(rng, depth, ingredients, double_chance):
    amounts = [2 if rng.random() < double_chance else 1 for _ in ingredients]
    return {
        "result_count": _weighted(rng, RESULT_COUNTS[depth]),
        "ingredients": [[name, amount] for name, amount in zip(ingredients, amounts)],
    }


def generate_world(seed: int, base_items: int = 50, craftable_items: int = 1402, families: int = 5) -> Dict[str, Any]:
    """A new world (a ``textcraft-recipes/1`` document) with the shape of ``textcraft-synth@1``.

    Args:
        seed (`int`): the seed; the same seed and options give the same document, byte for byte.
        base_items (`int`, defaults to 50): how many base items, shared out among the families.
        craftable_items (`int`, defaults to 1402): how many craftable items (one recipe each), spread
            over depths 1-12 like @1's.
        families (`int`, defaults to 5): how many separate crafting trees the items form.

    Returns:
        `dict`: keys ``format``, ``name``, ``base_items`` (sorted), ``depths``, ``tags`` (empty),
        ``recipes`` (sorted by item) and ``generator`` (``{"version", "seed", "options"}``).

    >>> doc = generate_world(7)
    >>> doc["name"], len(doc["base_items"]), len(doc["recipes"]), max(doc["depths"].values())
    ('textcraft-synth-s7', 50, 1402, 12)
    """
    _check_positive_int("seed", seed, 0)
    _check_positive_int("families", families)
    if families > len(FAMILY_SYLLABLES):
        raise UserError("families must be at most %d, got %d" % (len(FAMILY_SYLLABLES), families))
    _check_positive_int("base_items", base_items, families)
    blends = BLENDS_PER_DEPTH * len(BLEND_FAMILIES) if families > 1 else 0
    smallest = MAX_DEPTH * families * 3 + blends
    _check_positive_int("craftable_items", craftable_items, smallest)

    rng = random.Random(seed)
    per_depth = depth_counts(rng, craftable_items)
    names = _family_names(rng, families)
    base_share = _apportion(base_items, [1.0] * families)

    # How many items each family has at each depth (blends taken out first), then their names.
    family_counts = {name: [0] * (MAX_DEPTH + 1) for name in names}
    blend_counts = {depth: (BLENDS_PER_DEPTH if blends else 0) for depth in BLEND_FAMILIES}
    for depth in range(1, MAX_DEPTH + 1):
        order = list(names)
        rng.shuffle(order)  # who gets the remainder varies from depth to depth
        shares = _apportion(per_depth[depth - 1] - blend_counts.get(depth, 0), [1.0] * families)
        for name, share in zip(order, shares):
            family_counts[name][depth] = share

    pools: Dict[str, List[List[str]]] = {}
    for name, share in zip(names, base_share):
        crafted = sum(family_counts[name])
        serials = _serial_names(rng, name, crafted, len(str(max(crafted - 1, 1))) if crafted > 999 else 3)
        levels = [["%s_s%d" % (name, j) for j in range(share)]]
        for depth in range(1, MAX_DEPTH + 1):
            levels.append(serials[: family_counts[name][depth]])
            serials = serials[family_counts[name][depth] :]
        pools[name] = levels

    recipes: Dict[str, List[Dict[str, Any]]] = {}
    depths: Dict[str, int] = {}
    for depth in range(1, MAX_DEPTH + 1):
        double_chance = DOUBLE_AMOUNT.get(depth, 0.0)
        for name in names:
            for item in pools[name][depth]:
                number = _weighted(rng, INGREDIENT_NUMBERS[depth])
                recipes[item] = [_recipe(rng, depth, _choose_ingredients(rng, depth, pools[name], number), double_chance)]
                depths[item] = depth

    blend_names = _serial_names(rng, BLEND_PREFIX, sum(blend_counts.values()), 2)
    for depth in sorted(blend_counts):
        for _ in range(blend_counts[depth]):
            item = blend_names.pop()
            joined = list(names)
            rng.shuffle(joined)
            joined = joined[: min(_weighted(rng, BLEND_FAMILIES[depth]), families)]
            # One ingredient per family; the first one level down, the others one or two.
            parts = [_pick(rng, pools[joined[0]][depth - 1])]
            parts += [_pick(rng, pools[family][depth - 1 - rng.randrange(2)]) for family in joined[1:]]
            rng.shuffle(parts)
            recipes[item] = [_recipe(rng, depth, parts, BLEND_DOUBLE_AMOUNT)]
            depths[item] = depth

    document = {
        "format": game.RECIPES_FORMAT,
        "name": world_name(seed),
        "base_items": sorted(item for name in names for item in pools[name][0]),
        "depths": {item: depths[item] for item in sorted(depths)},
        "tags": {},
        "recipes": {item: recipes[item] for item in sorted(recipes)},
        "generator": {
            "version": GENERATOR_VERSION,
            "seed": seed,
            "options": {"base_items": base_items, "craftable_items": craftable_items, "families": families},
        },
    }
    check_world(document)
    return document


def world_json_bytes(document: Mapping[str, Any]) -> bytes:
    """``recipes.json`` bytes in the layout of ``textcraft-synth@1``'s file: compact ASCII JSON, one line
    per top-level key and one per recipe.  For @1's own document this gives its file byte for byte.
    """

    def compact(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    parts = []
    for key, value in document.items():
        if key == "recipes":
            lines = ",\n".join("%s:%s" % (compact(item), compact(recipes)) for item, recipes in value.items())
            parts.append('"recipes":{\n%s\n}' % lines)
        else:
            parts.append("%s:%s" % (compact(key), compact(value)))
    return ("{\n" + ",\n".join(parts) + "}\n").encode("ascii")


def check_world(document: Mapping[str, Any]) -> None:
    """Raise :class:`GenerationError` unless every recipe's ingredients exist and every depth is exact."""
    base = set(document["base_items"])
    depths = document["depths"]
    for item, recipes in document["recipes"].items():
        if len(recipes) != 1 or item in base:
            raise GenerationError("%s: a crafted item needs exactly one recipe and must not be a base item" % item)
        parts = recipes[0]["ingredients"]
        known = all(name in base or name in document["recipes"] for name, _ in parts)
        if not parts or not known or len({name for name, _ in parts}) != len(parts):
            raise GenerationError("%s: ingredients must be known and distinct" % item)
        if depths.get(item) != 1 + max(depths.get(name, 0) for name, _ in parts):
            raise GenerationError("%s: depth %r is not 1 + its deepest ingredient's" % (item, depths.get(item)))
    game.World(document)  # the engine must load it


# ------------------------------------------------------------------------------------------------- tasks


class Planner:
    """Gold trajectories in one world: which items a target needs, in what order, and how many of each.

    Every needed item is crafted in one step, after all its ingredients, as few times as covers what its
    consumers use.  Steps go by depth, then by the order a breadth-first walk from the target meets them.
    """

    def __init__(self, world_doc: Mapping[str, Any]):
        self.depths = world_doc["depths"]
        self.recipes = {
            item: (recipes[0]["result_count"], tuple((name, amount) for name, amount in recipes[0]["ingredients"]))
            for item, recipes in world_doc["recipes"].items()
        }
        self._orders: Dict[str, List[str]] = {}

    def order(self, target: str) -> List[str]:
        """Every craftable item ``target`` needs, itself included, in crafting order."""
        if target not in self._orders:
            recipes = self.recipes
            seen = {target: 0}
            queue = deque([target])
            while queue:
                for name, _ in recipes[queue.popleft()][1]:
                    if name in recipes and name not in seen:
                        seen[name] = len(seen)
                        queue.append(name)
            depths = self.depths
            self._orders[target] = sorted(seen, key=lambda item: (depths[item], seen[item]))
        return self._orders[target]

    def plan(self, target: str, count: int) -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
        """The gold steps (source-line form) that make ``count`` of ``target``, and the base items consumed."""
        recipes = self.recipes
        order = self.order(target)
        need = {target: count}
        crafts = {}
        consumed: Dict[str, int] = {}
        for item in reversed(order):  # deepest first: every consumer of an item is counted before it
            result_count, parts = recipes[item]
            runs = crafts[item] = -(-need[item] // result_count)
            for name, amount in parts:
                need[name] = need.get(name, 0) + amount * runs
                if name not in recipes:
                    consumed[name] = consumed.get(name, 0) + amount * runs
        steps = []
        for item in order:
            result_count, parts = recipes[item]
            runs = crafts[item]
            steps.append(
                {
                    "action": "craft",
                    "target": [item, runs],
                    "ingredients": {name: amount * runs for name, amount in parts},
                    "result_count": result_count * runs,
                }
            )
        return steps, consumed


def _starting_inventory(rng, consumed: Mapping[str, int], base_items: Sequence[str]) -> Dict[str, int]:
    low, high, mode = STOCK_FACTOR
    held = [(name, max(amount, int(amount * rng.triangular(low, high, mode)))) for name, amount in consumed.items()]
    unused = [name for name in base_items if name not in consumed]
    rng.shuffle(unused)
    held += [(name, rng.randrange(DISTRACTOR_AMOUNT[0], DISTRACTOR_AMOUNT[1] + 1))
             for name in unused[: _weighted(rng, DISTRACTORS)]]
    rng.shuffle(held)
    return dict(held)


def make_task(
    world_doc: Mapping[str, Any], planner: Planner, task_id: str, difficulty: str, target: str, count: int, rng: random.Random
) -> Dict[str, Any]:
    """One source-line task asking for ``count`` of ``target`` (``planner`` is built on ``world_doc``)."""
    steps, consumed = planner.plan(target, count)
    return {
        "goal": records.goal_text({target: count}),
        "id": task_id,
        "max_steps": MAX_STEPS,
        "misc": {
            "target_items": {target: count},
            "initial_inventory": _starting_inventory(rng, consumed, world_doc["base_items"]),
            "gold_trajectory": steps,
            "difficulty": difficulty,
            "max_depth": world_doc["depths"][target],
            "num_craft_steps": len(steps),
        },
    }


def task_counts(train: int = 2522, val: int = 632, per_difficulty=None) -> Dict[str, Dict[str, int]]:
    """``{split: {difficulty: n}}``: ``per_difficulty`` as given, else ``train``/``val`` in @1's proportions.

    ``per_difficulty`` may give either split or both, e.g. ``{"val": {"easy": 10, "medium": 0, ...}}``;
    a split it leaves out is apportioned from its total as usual.
    """
    counts = {}
    for split, total in (("train", train), ("val", val)):
        _check_positive_int(split, total, 0)
        given = (per_difficulty or {}).get(split)
        if given is None:
            shares = _apportion(total, [DEFAULT_TASKS[split][d] for d in records.DIFFICULTIES])
            counts[split] = dict(zip(records.DIFFICULTIES, shares))
            continue
        if not isinstance(given, Mapping) or sorted(given) != sorted(records.DIFFICULTIES):
            raise UserError("per_difficulty[%r] must give a count for each of %s" % (split, ", ".join(records.DIFFICULTIES)))
        for difficulty in records.DIFFICULTIES:
            _check_positive_int("per_difficulty[%r][%r]" % (split, difficulty), given[difficulty], 0)
        counts[split] = {d: given[d] for d in records.DIFFICULTIES}
    unknown = sorted(set(per_difficulty or {}) - set(records.SPLITS))
    if unknown:
        raise UserError("per_difficulty names unknown split %r (expected train, val)" % unknown[0])
    return counts


def _draw_targets(rng, candidates: List[Tuple[str, int]], n_val: int, n_train: int, difficulty: str):
    """``(val pairs, train pairs)``: val takes distinct pairs first; train cycles over the rest if need be."""
    rng.shuffle(candidates)
    if n_val > len(candidates) or (n_train and n_val == len(candidates)):
        raise UserError(
            "the world has only %d %s (item, count) pairs, too few for %d val tasks and %d train tasks"
            % (len(candidates), difficulty, n_val, n_train)
        )
    val, rest = candidates[:n_val], candidates[n_val:]
    train: List[Tuple[str, int]] = []
    while len(train) < n_train:
        batch = list(rest)
        rng.shuffle(batch)
        train.extend(batch[: n_train - len(train)])
    return val, train


def verify_tasks(world_doc: Mapping[str, Any], split: str, tasks: List[Dict[str, Any]]) -> None:
    """Check every task's shape and play its gold trajectory in the engine; raise :class:`GenerationError`
    unless each one is a well-formed source line whose trajectory earns reward 1.0.

    The calls are those :func:`tcsynth.records.gold_tool_calls` makes of the task's row (craft with the
    total made, then finish), built straight from the source line to skip the row conversion.
    """
    world = game.World(world_doc)
    for index, task in enumerate(tasks):
        where = "%s task %d" % (split, index)
        try:
            records.check_source_task(task, where)
        except records.SourceError as error:
            raise GenerationError(str(error))
        episode = game.Game.for_task(world, task)
        for step in task["misc"]["gold_trajectory"]:
            answer = episode.craft(step["ingredients"], [step["target"][0], step["result_count"]])
            if not answer.startswith(game.CRAFTED_PREFIX):
                raise GenerationError("%s (%s): gold craft of %s refused: %s" % (where, task["id"], step["target"][0], answer))
        episode.finish("Crafted every target item.")
        if not episode.succeeded():
            raise GenerationError("%s (%s): the gold trajectory leaves %r missing" % (where, task["id"], episode.missing_items()))


def generate_tasks(
    world_doc: Mapping[str, Any],
    seed: int,
    train: int = 2522,
    val: int = 632,
    per_difficulty: Optional[Mapping[str, Mapping[str, int]]] = None,
) -> Dict[str, List[Dict[str, Any]]]:
    """Tasks for a world, as source lines of ``textcraft-synth@1``, each checked by replaying its gold run.

    Args:
        world_doc (`dict`): a world document, e.g. from :func:`generate_world` (any ``textcraft-recipes/1``
            world with one recipe per item and exact depths works).
        seed (`int`): the seed; the same world, seed and sizes give the same tasks, byte for byte.
        train (`int`, defaults to 2522), val (`int`, defaults to 632): tasks per split, shared among the
            difficulties in @1's proportions (at the defaults: exactly @1's counts).
        per_difficulty (`dict`, *optional*): ``{split: {difficulty: n}}`` to set the counts directly; it
            overrides ``train``/``val`` for the splits it names.

    Returns:
        `dict`: ``{"train": [task, ...], "val": [task, ...]}``, difficulties mixed in random order, ids
        ``<world stem>.<split>.<index>``.

    Raises:
        `ValueError`: a size is not a non-negative integer, or the world has too few candidate targets.
        `GenerationError`: a generated task fails its own replay (a bug).
    """
    _check_positive_int("seed", seed, 0)
    counts = task_counts(train, val, per_difficulty)
    recipes, depths = world_doc["recipes"], world_doc["depths"]
    by_depth: Dict[int, List[str]] = {}
    for item in sorted(recipes):
        by_depth.setdefault(depths[item], []).append(item)

    rng = random.Random(TASK_STREAM + seed)
    chosen: Dict[str, List[Tuple[str, str, int]]] = {split: [] for split in records.SPLITS}
    for difficulty in records.DIFFICULTIES:
        lo, hi = records.DEPTH_RANGES[difficulty]
        candidates = [(item, n) for d in range(lo, hi + 1) for item in by_depth.get(d, []) for n in TARGET_COUNTS[difficulty]]
        n_val, n_train = counts["val"][difficulty], counts["train"][difficulty]
        val_pairs, train_pairs = _draw_targets(rng, candidates, n_val, n_train, difficulty)
        chosen["val"] += [(difficulty, item, n) for item, n in val_pairs]
        chosen["train"] += [(difficulty, item, n) for item, n in train_pairs]

    stem = task_id_prefix(world_doc)
    planner = Planner(world_doc)
    result = {}
    for split in records.SPLITS:
        picks = chosen[split]
        rng.shuffle(picks)
        tasks = [
            make_task(world_doc, planner, "%s.%s.%d" % (stem, split, index), difficulty, item, n, rng)
            for index, (difficulty, item, n) in enumerate(picks)
        ]
        verify_tasks(world_doc, split, tasks)
        result[split] = tasks
    return result
