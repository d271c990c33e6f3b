"""The TextCraft-Synth game engine (``textcraft-synth@1``): one file, standard library only, Python 3.8+.

Every product of this repository plays the game through this module: the dataset build checks each gold
trajectory with it, the SFT renderer takes every tool message from it, the evaluation runner and the TRL
reward score with it, and the Harbor exporter copies this very file into each task, where it is the
``textcraft`` command and the verifier.  So it must never import the rest of the package.

The rules
---------
A task gives a starting inventory (an insertion-ordered ``{item: count}``) and target counts.  The world
(``recipes.json``, format ``textcraft-recipes/1``) gives each craftable item its recipes.  Four tools act on
the inventory and return text, character for character as ``textcraft-synth@1`` prints it:

==================  ==============================  =========================================================
tool                arguments                       returns
==================  ==============================  =========================================================
``craft``           ``ingredients``, ``target``     ``Successfully crafted N ITEM(s)`` or ``Error: ...``
``get_info``        ``items`` (list of names)       a JSON list: recipes, depth, base flag, count held
``view_inventory``  (none)                          the inventory as a JSON object
``finish``          ``message``                     the message; the episode is over
==================  ==============================  =========================================================

``target`` is ``[ITEM, TOTAL]``: the total the inventory gains, a multiple of the recipe's ``result_count``.
The ingredients must be exactly the recipe's, each ``recipe_count * TOTAL / result_count``, and held.
A rejected craft changes nothing.  A crafted item new to the inventory goes to its end; an ingredient that
reaches zero leaves it.  The episode succeeds (reward 1.0, no partial credit) when it ends with ``finish``
and a non-empty message, and the inventory then holds, for every target, at least its count more than at
the start.

This module offers, from the inside out: :class:`World` (the recipes), :class:`Game` (one episode's state
and the four tools), :func:`parse_tool_call` and :func:`replay` (run a list of tool calls, as a chat model
or an action log gives them, and return a :class:`Verdict`).
"""

from __future__ import annotations

import json

# ------------------------------------------------------------------------------------------------ constants

ENVIRONMENT = "textcraft-synth@1"
RECIPES_FORMAT = "textcraft-recipes/1"
TASK_FORMAT = "textcraft-task/1"
CRAFTED_PREFIX = "Successfully crafted"
# Each tool's parameters, in the order a call names them.
TOOL_PARAMETERS = {
    "craft": ("ingredients", "target"),
    "get_info": ("items",),
    "view_inventory": (),
    "finish": ("message",),
}
EPISODE_OVER = "Error: the episode is over: finish was already called"


# ---------------------------------------------------------------------------------------------------- world


class World:
    """The world's recipes, read from a ``textcraft-recipes/1`` document.

    ``recipes[item]`` is a tuple of ``(result_count, ((ingredient, count), ...))``, ingredients in recipe
    order.  Items absent from ``depths`` have depth 0; items absent from ``recipes`` cannot be crafted.
    """

    __slots__ = ("name", "base_items", "depths", "recipes", "_recipe_json")

    def __init__(self, document):
        if not isinstance(document, dict) or document.get("format") != RECIPES_FORMAT:
            raise ValueError("not a %s document" % RECIPES_FORMAT)
        if document.get("tags"):
            raise ValueError("recipes with tag ingredients are not part of %s" % ENVIRONMENT)
        self.name = document["name"]
        self.base_items = frozenset(document["base_items"])
        self.depths = dict(document["depths"])
        self.recipes = {}
        self._recipe_json = {}
        for item, recipes in document["recipes"].items():
            parsed = []
            for recipe in recipes:
                # A dict first, so a repeated ingredient would behave as the environment's dict does.
                parts = tuple(dict((name, count) for name, count in recipe["ingredients"]).items())
                parsed.append((recipe["result_count"], parts))
            self.recipes[item] = tuple(parsed)
            self._recipe_json[item] = [
                {"ingredients": dict(parts), "result_count": result_count} for result_count, parts in parsed
            ]

    @classmethod
    def from_file(cls, path):
        """Load ``recipes.json``."""
        with open(path, "rb") as handle:
            return cls(json.loads(handle.read().decode("utf-8")))

    def depth(self, item):
        """The item's crafting depth: 0 for base and unknown items."""
        return self.depths.get(item, 0)

    def is_base(self, item):
        return item in self.base_items

    def can_craft(self, item):
        return item in self.recipes

    def describe(self, item, held):
        """One entry of ``get_info``'s answer, keys in the order the game prints them."""
        return {
            "item": item,
            "can_craft": item in self.recipes,
            "is_base": item in self.base_items,
            "in_inventory": held,
            "crafting_depth": self.depths.get(item, 0),
            "recipes": self._recipe_json.get(item, []),
        }


def task_state(task):
    """``(target_items, initial_inventory)`` of a task given as a ``task.json`` document or a source line.

    Source lines keep them under ``misc``; ``task.json`` at the top level.  Both are ``{item: count}``.
    """
    fields = task.get("misc", task)
    return dict(fields["target_items"]), dict(fields["initial_inventory"])


# ----------------------------------------------------------------------------------------------------- game


def _type_name(value):
    return type(value).__name__


class Game:
    """One episode: the inventory and the four tools.

    Each tool method returns the observation text.  ``crafts`` counts accepted crafts; ``finished`` turns
    true at ``finish``, after which every tool answers :data:`EPISODE_OVER` and changes nothing.
    """

    __slots__ = ("world", "target_items", "initial_inventory", "inventory", "crafts", "finished", "message", "_recipes")

    def __init__(self, world, target_items, initial_inventory):
        self.world = world
        self._recipes = world.recipes
        self.target_items = dict(target_items)
        self.initial_inventory = dict(initial_inventory)
        self.inventory = dict(initial_inventory)
        self.crafts = 0
        self.finished = False
        self.message = None

    @classmethod
    def for_task(cls, world, task):
        """A fresh episode of a ``task.json`` document or a source task line."""
        targets, inventory = task_state(task)
        return cls(world, targets, inventory)

    # The tools -------------------------------------------------------------------------------------------

    def craft(self, ingredients, target):
        """The ``craft`` tool: checks in the environment's order, the first failure is the answer."""
        if self.finished:
            return EPISODE_OVER
        if not isinstance(ingredients, dict):
            return "Error: ingredients must be a dict, got %s" % _type_name(ingredients)
        if not isinstance(target, (list, tuple)) or len(target) != 2:
            return "Error: target must be a tuple of (item_name, count)"
        item, count = target
        if not isinstance(item, str):
            return "Error: target item must be a string, got %s" % _type_name(item)
        if not isinstance(count, int):
            return "Error: target count must be an int, got %s" % _type_name(count)
        if count <= 0:
            return "Error: target count must be positive, got %s" % (count,)
        recipes = self._recipes.get(item)
        inventory = self.inventory
        # The first recipe that passes every check is applied.  The checks are pure, so a quick pass/fail
        # test finds it.  A craft it accepts names only recipe ingredients with exact positive int amounts,
        # so the per-ingredient checks would have passed; they and the error text run only on failure.
        for recipe in recipes or ():
            crafts = count // recipe[0]
            if crafts * recipe[0] != count or len(ingredients) != len(recipe[1]):
                continue
            for name, per_craft in recipe[1]:
                need = per_craft * crafts
                given = ingredients.get(name)
                if given != need or given.__class__ is not int or inventory.get(name, 0) < need:
                    break
            else:
                break
        else:
            recipe = _first_passing_recipe(recipes, item, ingredients, count, inventory)
            if isinstance(recipe, str):
                return recipe
        result_count, parts = recipe
        crafts = count // result_count
        for name, per_craft in parts:
            left = inventory[name] - per_craft * crafts
            if left:
                inventory[name] = left
            else:
                del inventory[name]
        made = result_count * crafts
        inventory[item] = inventory.get(item, 0) + made
        self.crafts += 1
        return f"Successfully crafted {made} {item}(s)"

    def get_info(self, items):
        """The ``get_info`` tool: one description per requested item, in request order."""
        if self.finished:
            return EPISODE_OVER
        held = self.inventory
        describe = self.world.describe
        return json.dumps([describe(item, held.get(item, 0)) for item in items])

    def view_inventory(self):
        """The ``view_inventory`` tool."""
        if self.finished:
            return EPISODE_OVER
        return json.dumps(self.inventory)

    def finish(self, message):
        """The ``finish`` tool: ends the episode and echoes the message."""
        if self.finished:
            return EPISODE_OVER
        self.finished = True
        self.message = message
        return message

    # Dispatch and scoring ----------------------------------------------------------------------------------

    def call(self, tool, arguments):
        """Run one tool call given by name and an argument dict; malformed calls get an ``Error:`` answer.

        The argument checks stand in for the environment's schema validation (the exact parameter set,
        ``items`` a list of strings, ``message`` a string); ``craft`` checks its own arguments.
        """
        if tool == "craft" and type(arguments) is dict and len(arguments) == 2:
            # The common case, checked cheaply: both craft arguments and nothing else.
            ingredients = arguments.get("ingredients", arguments)
            target = arguments.get("target", arguments)
            if ingredients is not arguments and target is not arguments:
                return self.craft(ingredients, target)
        problem = argument_problem(tool, arguments)
        if problem is not None:
            return "Error: " + problem
        if tool == "craft":
            return self.craft(arguments["ingredients"], arguments["target"])
        if tool == "get_info":
            return self.get_info(arguments["items"])
        if tool == "view_inventory":
            return self.view_inventory()
        return self.finish(arguments["message"])

    def missing_items(self):
        """``{item: shortfall}`` for every target the inventory has not yet gained in full."""
        missing = {}
        for item, count in self.target_items.items():
            gained = self.inventory.get(item, 0) - self.initial_inventory.get(item, 0)
            if gained < count:
                missing[item] = count - gained
        return missing

    def succeeded(self):
        """The success rule: finished with a non-empty message and every target gained."""
        return bool(self.finished and self.message and not self.missing_items())


def _first_passing_recipe(recipes, item, ingredients, count, inventory):
    """The craft checks in full, in the environment's order: the first recipe that passes, or the error text.

    :meth:`Game.craft` calls this only when its quick test found no recipe, so it is off the hot path.
    """
    for name, amount in ingredients.items():
        if not isinstance(name, str):
            return "Error: ingredient name must be a string, got %s" % _type_name(name)
        if not isinstance(amount, int):
            return "Error: ingredient count for %s must be an int, got %s" % (name, _type_name(amount))
        if amount <= 0:
            return "Error: ingredient count for %s must be positive, got %s" % (name, amount)
    if not recipes:
        return "Error: No recipe found for %s" % item
    errors = []
    for number, recipe in enumerate(recipes, 1):
        problem = _recipe_problem(recipe[0], recipe[1], ingredients, count, inventory)
        if problem is None:
            return recipe
        errors.append("Recipe %d: %s" % (number, problem))
    return "Error: All %d recipe(s) failed for %s. Errors:\n%s" % (len(recipes), item, "\n".join(errors))


def _recipe_problem(result_count, parts, ingredients, count, inventory):
    """Why one recipe cannot make ``count`` from ``ingredients`` (text after ``Recipe k: ``), or None."""
    if count % result_count != 0:
        return "Target count %s is not divisible by recipe result count %d" % (count, result_count)
    crafts = count // result_count
    for name, per_craft in parts:
        given = ingredients.get(name)
        if given is None:
            return "Missing required ingredient %s" % name
        if given != per_craft * crafts:
            return "Wrong amount of %s. Need %d, provided %s" % (name, per_craft * crafts, given)
    if len(ingredients) != len(parts):
        used = dict(parts)
        extra = [name for name in ingredients if name not in used]
        return "Extra ingredients not required: " + ", ".join(extra)
    short = [
        "%s: need %d, have %d" % (name, per_craft * crafts, inventory.get(name, 0))
        for name, per_craft in parts
        if inventory.get(name, 0) < per_craft * crafts
    ]
    if short:
        return "Insufficient ingredients in inventory: " + ", ".join(short)
    return None


def argument_problem(tool, arguments):
    """What is wrong with a call's tool name or argument dict (a sentence), or None when it is well formed."""
    if tool not in TOOL_PARAMETERS:
        return "unknown tool %r; the tools are %s" % (tool, ", ".join(TOOL_PARAMETERS))
    if not isinstance(arguments, dict):
        return "the arguments of %s must be a JSON object, got %s" % (tool, _type_name(arguments))
    expected = TOOL_PARAMETERS[tool]
    if set(arguments) != set(expected):
        wanted = ", ".join(expected) if expected else "no arguments"
        return "%s takes %s; got %s" % (tool, wanted, ", ".join(sorted(map(str, arguments))) or "none")
    if tool == "get_info":
        items = arguments["items"]
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            return "items must be a list of item names"
    elif tool == "finish" and not isinstance(arguments["message"], str):
        return "message must be a string"
    return None


# --------------------------------------------------------------------------------------- tool calls, replay


class ToolCallError(ValueError):
    """A tool call that cannot be read: not an object, no name, or arguments that are not JSON."""


def parse_tool_call(call):
    """``(name, arguments)`` of one tool call.

    Accepts ``{"name", "arguments"}``, the OpenAI form ``{"function": {"name", "arguments"}}`` (with or
    without ``id``/``type``) and an action-log record ``{"tool", "args"}``; ``arguments`` may be a dict or a
    JSON string, and may be absent for no arguments.
    """
    if not isinstance(call, dict):
        raise ToolCallError("a tool call must be an object, got %s" % _type_name(call))
    body = call.get("function", call)
    if not isinstance(body, dict):
        raise ToolCallError("a tool call's function must be an object, got %s" % _type_name(body))
    if "tool" in body and "name" not in body:
        body = {"name": body["tool"], "arguments": body.get("args", {})}
    name = body.get("name")
    if not isinstance(name, str):
        raise ToolCallError("a tool call needs a name")
    arguments = body.get("arguments", {})
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except ValueError as error:
            raise ToolCallError("the arguments of %s are not valid JSON: %s" % (name, error))
    return name, arguments


class Verdict:
    """The outcome of replaying a list of tool calls.

    ``reward`` is 1.0 or 0.0; ``reason`` says why in one sentence; ``crafts`` counts accepted crafts;
    ``calls`` counts the calls run; ``finished`` tells whether ``finish`` was called; ``missing`` maps each
    target not yet gained to its shortfall; ``observations`` holds what each call printed.
    """

    __slots__ = ("reward", "reason", "crafts", "calls", "finished", "missing", "observations")

    def __init__(self, reward, reason, crafts, calls, finished, missing, observations):
        self.reward = reward
        self.reason = reason
        self.crafts = crafts
        self.calls = calls
        self.finished = finished
        self.missing = missing
        self.observations = observations

    @property
    def success(self):
        return self.reward == 1.0

    def as_dict(self):
        """The verdict as plain data (observations left out)."""
        return {
            "reward": self.reward,
            "reason": self.reason,
            "crafts": self.crafts,
            "calls": self.calls,
            "finished": self.finished,
            "missing": dict(self.missing),
        }

    def __repr__(self):
        return "Verdict(reward=%r, reason=%r, crafts=%d, calls=%d)" % (self.reward, self.reason, self.crafts, self.calls)


def judge(game, calls_run, observations, problem=None):
    """The verdict on an episode as it stands; ``problem`` names a call that invalidates the episode."""
    missing = game.missing_items()
    if problem is not None:
        reason = problem
    elif not game.finished:
        reason = "the episode did not end with finish"
    elif not game.message:
        reason = "finish was called with an empty message"
    elif missing:
        reason = "finished without the targets: " + ", ".join("%s short by %d" % kv for kv in missing.items())
    else:
        reason = "finished with every target crafted"
    reward = 1.0 if problem is None and game.succeeded() else 0.0
    return Verdict(reward, reason, game.crafts, calls_run, game.finished, missing, observations)


def replay(world, task, calls):
    """Play ``calls`` (tool calls in any form :func:`parse_tool_call` reads) on a fresh episode of ``task``.

    A call that cannot be read, names an unknown tool or comes after ``finish`` makes the reward 0 and
    stops the replay; a call the game rejects (``Error: ...``) is part of play and changes nothing.
    """
    game = Game.for_task(world, task)
    observations = []
    for number, call in enumerate(calls, 1):
        if game.finished:
            return judge(game, number - 1, observations, "call %d comes after finish" % number)
        try:
            tool, arguments = parse_tool_call(call)
        except ToolCallError as error:
            return judge(game, number - 1, observations, "call %d: %s" % (number, error))
        problem = argument_problem(tool, arguments)
        if problem is not None:
            return judge(game, number - 1, observations, "call %d: %s" % (number, problem))
        observations.append(game.call(tool, arguments))
    return judge(game, len(observations), observations)

