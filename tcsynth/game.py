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
or an action log gives them, and return a :class:`Verdict`), then the action log, the ``textcraft``
command and the verifier of a Harbor task.

The ``textcraft`` command
-------------------------
In a Harbor task this file is ``/app/textcraft/textcraft_game.py`` and ``textcraft ARGS`` runs
``python3 -I textcraft_game.py ARGS``.  ``$TEXTCRAFT_DIR`` (default: this file's directory) holds
``task.json`` (``textcraft-task/1``), ``recipes.json`` and the action log ``actions.jsonl``::

    textcraft craft ITEM COUNT NAME=N [NAME=N ...]    craft --json '{"ingredients": {...}, "target": [ITEM, COUNT]}'
    textcraft info ITEM [ITEM ...]                     info --json '[ITEM, ...]'      (alias get_info)
    textcraft inventory                                (alias view_inventory)
    textcraft finish MESSAGE                           (the words are joined with spaces)
    textcraft --help

Each prints the tool's answer exactly as above.  Exit status: 0 the tool ran; 1 the game refused (a
rejected craft, which is logged, or any command after ``finish``, which is not); 2 a malformed command
line (nothing runs, nothing is logged); 3 the task cannot be played (a missing or broken ``task.json``,
``recipes.json`` or action log).  A count or amount that is not a whole number is a usage error; one that
is zero or negative goes to the game, which rejects it like any craft.

The action log
--------------
The log is the state: one record a line, compact ASCII JSON, ``{"seq": n, "tool": TOOL, "args": {...}}``
plus ``"ok": true|false`` on crafts (whether the rules accepted it), ``seq`` counting from 1, each line
ending in a newline.  A command holds an exclusive ``flock`` on the log while it replays it from the
task's starting inventory, runs its tool and appends its record, so concurrent commands never interleave
or reorder records.  The log is opened without following a symbolic link and must stay a regular file
of at most 32 MiB.

The verifier
------------
``textcraft_game.py verify --task T --recipes R --root ROOT --log RELPATH --out DIR`` grades the log at
``ROOT/RELPATH`` with trusted copies of the task and the recipes.  It first removes ``reward.json``,
``reward.txt`` and ``textcraft-verdict.json`` from ``DIR`` (nothing planted there counts), then writes
``reward.json`` (``{"reward": 1.0}`` or ``{"reward": 0.0}``) and ``textcraft-verdict.json`` (reward,
reason, records, crafts, finished, missing, task, log_bytes), each whole or not at all, and exits 0.
The reward is 1.0 only for a log the game could have written that ends in ``finish`` with a non-empty
message and every target gained.  The log scores 0.0 when any component of ``RELPATH`` is a symbolic link
(each is opened with ``O_NOFOLLOW`` relative to its parent directory; ``ROOT`` itself is trusted), when it
is not a regular file (a FIFO), when it exceeds 32 MiB, is not UTF-8, lacks the final newline, or when a
line is not exactly one JSON object (no blank line, no surrounding whitespace), repeats a key, holds NaN
or Infinity, has other keys than its tool's, is misnumbered, names an unknown tool or malformed
arguments, comes after ``finish``, or is a craft whose ``ok`` differs from what the rules give.  No log at all scores 0.0 too.  A broken trusted file is a setup
fault: exit 3 and no reward.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys

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
        given = ingredients.get
        held = inventory.get
        # The first recipe that passes every check is applied.  The checks are pure, so a quick pass/fail
        # test finds it.  A craft it accepts names only recipe ingredients with exact positive int amounts,
        # so the per-ingredient checks would have passed; they and the error text run only on failure.
        for recipe in recipes or ():
            result_count, parts = recipe
            crafts = count // result_count
            if crafts * result_count != count or len(ingredients) != len(parts):
                continue
            for name, per_craft in parts:
                need = per_craft * crafts
                amount = given(name)
                if amount != need or type(amount) is not int or held(name, 0) < need:
                    break
            else:
                break
        else:
            recipe = _first_passing_recipe(recipes, item, ingredients, count, inventory)
            if type(recipe) is str:
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
        inventory[item] = held(item, 0) + made
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
        if tool == "craft" and type(arguments) is dict and len(arguments) == 2 and "target" in arguments:
            # The common case, checked cheaply: both craft arguments and nothing else.
            if "ingredients" in arguments:
                return self.craft(arguments["ingredients"], arguments["target"])
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



# ------------------------------------------------------------------------------------------------ action log
#
# In a Harbor task the game runs as a command, once per action, so the state lives in a file: the action
# log.  Each record names the call and, for a craft, whether the rules accepted it.  Nothing else is kept:
# the inventory is whatever replaying the log from the task's starting inventory gives.

LOG_NAME = "actions.jsonl"
LOG_LIMIT = 32 * 1024 * 1024  # bytes; a longer log is not one an episode writes
# The exact keys of a record, per tool.
RECORD_KEYS = {
    "craft": frozenset(("seq", "tool", "args", "ok")),
    "get_info": frozenset(("seq", "tool", "args")),
    "view_inventory": frozenset(("seq", "tool", "args")),
    "finish": frozenset(("seq", "tool", "args")),
}


class LogError(ValueError):
    """An action log the game could not have written (the message says which record and why)."""


def log_record(seq, tool, arguments, ok=None):
    """One line of the action log: compact ASCII JSON and a newline; ``ok`` only on crafts."""
    record = {"seq": seq, "tool": tool, "args": arguments}
    if tool == "craft":
        record["ok"] = bool(ok)
    return json.dumps(record, separators=(",", ":"), ensure_ascii=True, allow_nan=False) + "\n"


def _unique_keys(pairs):
    """``object_pairs_hook`` that refuses a repeated key (plain ``json`` keeps the last one silently)."""
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError("duplicate key %r" % (key,))
        result[key] = value
    return result


def _no_constant(name):
    raise ValueError("%s is not a JSON number" % name)


def _finite_float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("%s is too large for a number" % text)
    return value


def strict_json(text):
    """``json.loads`` without duplicate keys and without ``NaN``/``Infinity`` (also none by overflow, like
    ``1e400``); raises ``ValueError``."""
    return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite_float)


def parse_log(data):
    """The records of an action log's bytes, checked: a list of ``(tool, arguments, ok)``.

    Raises :class:`LogError` unless the bytes are UTF-8 lines, each ending in a newline, each a JSON object
    (no repeated keys, no NaN/Infinity) with exactly the record keys of its tool, ``seq`` counting 1, 2, ...,
    well-formed arguments and, on crafts, a boolean ``ok``.  Whether ``ok`` is right is for the replay.
    """
    if len(data) > LOG_LIMIT:
        raise LogError("the log is larger than %d bytes" % LOG_LIMIT)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError("the log is not UTF-8 text")
    if not text:
        return []
    if not text.endswith("\n"):
        raise LogError("the last record does not end with a newline")
    parsed = []
    for seq, line in enumerate(text[:-1].split("\n"), 1):
        if not (line.startswith("{") and line.endswith("}")):
            raise LogError("record %d is not one JSON object on its own line" % seq)
        try:
            record = strict_json(line)
        except ValueError as error:
            raise LogError("record %d is not valid JSON: %s" % (seq, error))
        if not isinstance(record, dict):
            raise LogError("record %d is not a JSON object" % seq)
        tool = record.get("tool")
        if not isinstance(tool, str) or tool not in RECORD_KEYS:
            raise LogError("record %d names no known tool" % seq)
        if set(record) != RECORD_KEYS[tool]:
            raise LogError("record %d must have exactly the keys %s" % (seq, ", ".join(sorted(RECORD_KEYS[tool]))))
        if type(record["seq"]) is not int or record["seq"] != seq:
            raise LogError("record %d is numbered %s" % (seq, json.dumps(record["seq"])))
        problem = argument_problem(tool, record["args"])
        if problem is not None:
            raise LogError("record %d: %s" % (seq, problem))
        ok = record.get("ok")
        if tool == "craft" and type(ok) is not bool:
            raise LogError("record %d: ok must be true or false" % seq)
        parsed.append((tool, record["args"], ok))
    return parsed


def crafted(observation):
    """Whether a craft's answer says the rules accepted it."""
    return observation.startswith(CRAFTED_PREFIX)


def replay_records(game, records, observations):
    """Play checked log records on ``game``, appending each answer to ``observations``; raise
    :class:`LogError` at the first record the game would not have written: one after ``finish``, or a craft
    whose ``ok`` is not what the rules give.
    """
    for seq, (tool, arguments, ok) in enumerate(records, 1):
        if game.finished:
            raise LogError("record %d comes after finish" % seq)
        observation = game.call(tool, arguments)
        if tool == "craft" and crafted(observation) is not ok:
            raise LogError("record %d says ok=%s but the rules %s that craft" % (seq, json.dumps(ok), "accept" if not ok else "reject"))
        observations.append(observation)


def grade_log(world, task, data):
    """The :class:`Verdict` on an action log's bytes: reward 1.0 only for a log the game could have written
    that ends in ``finish`` with a message and every target gained."""
    game = Game.for_task(world, task)
    observations = []
    try:
        replay_records(game, parse_log(data), observations)
    except LogError as error:
        return judge(game, len(observations), observations, "the action log is not one the game wrote: %s" % error)
    return judge(game, len(observations), observations)


# ------------------------------------------------------------------------------------------- the command line
#
# ``python3 -I textcraft_game.py COMMAND ...`` is the ``textcraft`` command of a Harbor task.  Each run takes
# an exclusive lock on the action log, replays it, runs one tool, appends its record and prints the answer.

GAME_DIR_VARIABLE = "TEXTCRAFT_DIR"
TASK_FILE = "task.json"
RECIPES_FILE = "recipes.json"
EXIT_DONE = 0  # the tool ran (a craft the rules accepted, or any other tool)
EXIT_GAME_ERROR = 1  # the game said no: a rejected craft (logged), or the episode is already over (not logged)
EXIT_USAGE = 2  # the command line is not a command; nothing ran, nothing was logged
EXIT_UNPLAYABLE = 3  # the task, the recipes or the action log cannot be read; nothing ran
COMMAND_ALIASES = {
    "craft": "craft",
    "info": "get_info",
    "get_info": "get_info",
    "inventory": "view_inventory",
    "view_inventory": "view_inventory",
    "finish": "finish",
}
USAGE = """\
usage: textcraft COMMAND [ARGUMENTS]

Plays one TextCraft-Synth episode; the files are in $TEXTCRAFT_DIR (by default the directory of the game
file).  Every command is recorded in the action log, which the grader replays.

commands:
  craft ITEM COUNT NAME=N [NAME=N ...]
        Make COUNT of ITEM (the total you gain) using exactly the recipe's ingredients.  COUNT must be
        a multiple of the recipe's result_count; each ingredient's N is its recipe amount times
        COUNT / result_count.  For a recipe {"b1_i1": 2, "raw_b2": 1} with result_count 3,
        textcraft craft b3_i2 6 b1_i1=4 raw_b2=2 makes 6 b3_i2.
  info ITEM [ITEM ...]
        Each item's recipes, crafting depth, base flag and the count you hold, as a JSON list.
  inventory
        What you hold now, as a JSON object {item: count}.
  finish MESSAGE
        End the episode with a message saying what you did.  It succeeds when your inventory has
        gained every target item; no command runs after it.

  craft --json '{"ingredients": {NAME: N, ...}, "target": [ITEM, COUNT]}' and info --json '[ITEM, ...]'
  take their arguments as one JSON value.  get_info and view_inventory name info and inventory too.

exit status: 0 done, 1 the game refused (a rejected craft, or the episode is over),
2 a malformed command (nothing is recorded), 3 the task cannot be played.
"""


class UsageError(Exception):
    """A command line that names no valid command; nothing is run or logged."""


class Unplayable(Exception):
    """The task, the recipes or the action log cannot be read, so no command can run."""


def _json_argument(words, command, kind):
    if len(words) != 1:
        raise UsageError("%s --json takes exactly one JSON %s" % (command, kind))
    try:
        return strict_json(words[0])
    except ValueError as error:
        raise UsageError("%s --json: not valid JSON (%s)" % (command, error))


def _whole_number(text, what):
    try:
        return int(text)
    except ValueError:
        raise UsageError("%s must be a whole number, got %r" % (what, text))


def parse_command(words):
    """``(tool, arguments)`` of a ``textcraft`` command line (without the program name).

    Raises :class:`UsageError` for anything that is not a command.  What the game itself judges (a wrong
    ingredient, a count that is zero or negative) is left to the game, so it is logged like any craft.
    """
    if not words:
        raise UsageError("no command given")
    command, rest = words[0], list(words[1:])
    tool = COMMAND_ALIASES.get(command)
    if tool is None:
        raise UsageError("unknown command %r" % command)
    if tool == "craft":
        if rest[:1] == ["--json"]:
            arguments = _json_argument(rest[1:], command, "object")
            if not isinstance(arguments, dict) or set(arguments) != {"ingredients", "target"}:
                raise UsageError('craft --json takes {"ingredients": {...}, "target": [ITEM, COUNT]}')
            return tool, arguments
        if len(rest) < 2:
            raise UsageError("craft takes ITEM COUNT NAME=N ...")
        count = _whole_number(rest[1], "COUNT")
        ingredients = {}
        for word in rest[2:]:
            name, equals, amount = word.rpartition("=")
            if not equals or not name:
                raise UsageError("an ingredient is NAME=N, got %r" % word)
            if name in ingredients:
                raise UsageError("ingredient %r is given twice" % name)
            ingredients[name] = _whole_number(amount, "the amount of %s" % name)
        return tool, {"ingredients": ingredients, "target": [rest[0], count]}
    if tool == "get_info":
        if rest[:1] == ["--json"]:
            items = _json_argument(rest[1:], command, "list")
            if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
                raise UsageError("info --json takes a JSON list of item names")
            return tool, {"items": items}
        return tool, {"items": rest}
    if tool == "view_inventory":
        if rest:
            raise UsageError("inventory takes no arguments")
        return tool, {}
    if not rest:
        raise UsageError("finish takes a MESSAGE")
    return tool, {"message": " ".join(rest)}


def game_directory():
    """Where the task, the recipes and the log are: ``$TEXTCRAFT_DIR``, else the game file's directory."""
    return os.environ.get(GAME_DIR_VARIABLE) or os.path.dirname(os.path.abspath(__file__))


def load_task(path):
    """A ``task.json`` document (raises ``ValueError`` or ``OSError``)."""
    with open(path, "rb") as handle:
        task = strict_json(handle.read().decode("utf-8"))
    if not isinstance(task, dict) or task.get("format") != TASK_FORMAT:
        raise ValueError("%s is not a %s document" % (path, TASK_FORMAT))
    task_state(task)  # both count maps must be there
    return task


def load_episode(directory):
    """``(world, task)`` of the game directory, or :class:`Unplayable`."""
    try:
        return World.from_file(os.path.join(directory, RECIPES_FILE)), load_task(os.path.join(directory, TASK_FILE))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise Unplayable("cannot load the task from %s: %s" % (directory, error))


def _read_all(fd, limit):
    """Up to ``limit + 1`` bytes from ``fd``'s current offset (one more than allowed tells it is too long)."""
    chunks = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def run_command(directory, tool, arguments):
    """Run one tool on the episode logged in ``directory``: ``(answer, exit status)``.

    The log is opened without following a link, locked exclusively for the whole read-replay-append, so
    concurrent commands run one after another and each appends exactly one record in its turn.
    """
    import fcntl  # POSIX only; the engine itself does not need it

    world, task = load_episode(directory)
    path = os.path.join(directory, LOG_NAME)
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as error:
        raise Unplayable("cannot open the action log %s: %s" % (path, error.strerror or error))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unplayable("the action log %s is not a regular file" % path)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.lseek(fd, 0, os.SEEK_SET)
        data = _read_all(fd, LOG_LIMIT)
        game = Game.for_task(world, task)
        try:
            records = parse_log(data)
            replay_records(game, records, [])
        except LogError as error:
            raise Unplayable("the action log %s does not replay (%s); the episode cannot go on" % (path, error))
        if game.finished:
            return EPISODE_OVER, EXIT_GAME_ERROR
        answer = game.call(tool, arguments)
        ok = crafted(answer) if tool == "craft" else None
        line = log_record(len(records) + 1, tool, arguments, ok).encode("ascii")
        if len(data) + len(line) > LOG_LIMIT:
            return "Error: the action log is full (%d bytes); finish the episode" % LOG_LIMIT, EXIT_GAME_ERROR
        _write_all(fd, line)
        return answer, EXIT_GAME_ERROR if ok is False else EXIT_DONE
    finally:
        os.close(fd)  # releases the lock


def _usage_error(message):
    sys.stderr.write("textcraft: %s\n\n%s" % (message, USAGE))
    return EXIT_USAGE


def main(argv=None):
    """The ``textcraft`` command (and ``verify``): returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] in (["--help"], ["-h"], ["help"]):
        sys.stdout.write(USAGE)
        return EXIT_DONE
    if words[:1] == ["verify"]:
        return verify_main(words[1:])
    try:
        tool, arguments = parse_command(words)
    except UsageError as error:
        return _usage_error(str(error))
    try:
        answer, status = run_command(game_directory(), tool, arguments)
    except Unplayable as error:
        sys.stderr.write("textcraft: %s\n" % error)
        return EXIT_UNPLAYABLE
    if answer:
        # Bytes, so a name that is not valid UTF-8 (from the command line) cannot fail the print.
        sys.stdout.flush()
        sys.stdout.buffer.write((answer + "\n").encode("utf-8", "backslashreplace"))
        sys.stdout.flush()
    return status


# -------------------------------------------------------------------------------------------------- verifier
#
# ``textcraft_game.py verify`` is the grader ``tests/test.sh`` runs with its own trusted copies of the game,
# the recipes and the task.  Only the action log comes from the agent, so it is read with suspicion: reached
# without following any link below ROOT, a regular file (not a FIFO that would block), at most LOG_LIMIT
# bytes, then parsed strictly and replayed by the rules.

REWARD_FILE = "reward.json"
VERDICT_FILE = "textcraft-verdict.json"
# Files a grader may read from the output directory: whatever was there before grading is removed first.
PLANTABLE_FILES = (REWARD_FILE, "reward.txt", VERDICT_FILE)


def open_below(root, relative):
    """A read-only descriptor of the file at ``root/relative``; no component below ``root`` may be a link.

    ``root`` is trusted (it is the sandbox's root); each component below it is opened relative to its
    parent's descriptor with ``O_NOFOLLOW``.  Raises ``OSError`` (``ENOENT`` when the file is absent) or
    :class:`LogError` for a path that names a link or something that is not a regular file.
    """
    parts = relative.split("/")
    if relative.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise LogError("the log path %r must be relative, without '.' or '..'" % relative)
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for number, part in enumerate(parts):
            last = number == len(parts) - 1
            try:
                if last:
                    fd = os.open(part, os.O_RDONLY | os.O_NONBLOCK | nofollow, dir_fd=directory)
                else:
                    fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=directory)
            except OSError as error:
                if error.errno != errno.ENOENT and _is_link(part, directory):
                    raise LogError("%s is a symbolic link" % "/".join(parts[: number + 1]))
                raise
            os.close(directory)
            directory = fd
        if not stat.S_ISREG(os.fstat(directory).st_mode):
            raise LogError("%s is not a regular file" % relative)
        fd, directory = directory, None
        return fd
    finally:
        if directory is not None:
            os.close(directory)


def _is_link(name, directory):
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_agent_log(root, relative):
    """``(bytes or None, problem or None)``: the log's bytes, ``(None, None)`` when there is no log."""
    try:
        fd = open_below(root, relative)
    except LogError as error:
        return None, str(error)
    except OSError as error:
        if error.errno == errno.ENOENT:
            return None, None
        return None, "cannot open %s: %s" % (relative, error.strerror or error)
    try:
        if os.fstat(fd).st_size > LOG_LIMIT:
            return None, "the log is larger than %d bytes" % LOG_LIMIT
        data = _read_all(fd, LOG_LIMIT)
    finally:
        os.close(fd)
    if len(data) > LOG_LIMIT:
        return None, "the log is larger than %d bytes" % LOG_LIMIT
    return data, None


def clear_outputs(out):
    """Remove every file a grader could take a reward from, whatever the agent planted there."""
    import shutil

    os.makedirs(out, exist_ok=True)
    for name in PLANTABLE_FILES:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)


def _write_file(directory, name, text):
    """Write ``directory/name`` whole or not at all (a temporary file renamed into place)."""
    import tempfile

    handle, temporary = tempfile.mkstemp(prefix="." + name, dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


def verify(task_path, recipes_path, root, relative, out):
    """Grade the action log at ``root/relative`` and write ``reward.json`` and the verdict to ``out``.

    Returns the verdict as a dict.  The task and recipes are trusted; a broken one raises
    :class:`Unplayable` (a setup fault, not an agent's failure) after the old outputs are cleared.
    """
    clear_outputs(out)
    try:
        world, task = World.from_file(recipes_path), load_task(task_path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise Unplayable("cannot read the trusted task or recipes: %s" % error)
    data, problem = read_agent_log(root, relative)
    if problem is not None:
        verdict = judge(Game.for_task(world, task), 0, [], "the action log is not one the game wrote: %s" % problem)
    elif data is None:
        verdict = judge(Game.for_task(world, task), 0, [], "there is no action log: no textcraft command ran")
    else:
        verdict = grade_log(world, task, data)
    report = verdict.as_dict()
    report.update(environment=ENVIRONMENT, task=task.get("name"), log_bytes=None if data is None else len(data))
    report["records"] = report.pop("calls")
    _write_file(out, VERDICT_FILE, json.dumps(report, indent=1, sort_keys=True) + "\n")
    _write_file(out, REWARD_FILE, json.dumps({"reward": verdict.reward}) + "\n")
    return report


def verify_main(words):
    """``verify --task T --recipes R --root ROOT --log RELPATH --out DIR``: exit 0 once graded."""
    import argparse

    parser = argparse.ArgumentParser(prog="textcraft_game.py verify", description="Grade an action log.")
    parser.add_argument("--task", required=True, help="the trusted task.json")
    parser.add_argument("--recipes", required=True, help="the trusted recipes.json")
    parser.add_argument("--root", required=True, help="the sandbox root (trusted); the log is below it")
    parser.add_argument("--log", required=True, help="the log's path below ROOT, e.g. app/textcraft/actions.jsonl")
    parser.add_argument("--out", required=True, help="where reward.json and %s go" % VERDICT_FILE)
    args = parser.parse_args(words)
    try:
        report = verify(args.task, args.recipes, args.root, args.log, args.out)
    except Unplayable as error:
        sys.stderr.write("textcraft verify: %s\n" % error)
        return EXIT_UNPLAYABLE
    sys.stdout.write("reward %s: %s (%d records, %d crafts)\n" % (report["reward"], report["reason"], report["records"], report["crafts"]))
    return EXIT_DONE


if __name__ == "__main__":
    sys.exit(main())
