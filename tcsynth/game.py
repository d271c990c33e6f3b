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
reaches zero leaves it.  Scoring is all or nothing: 1.0 for an episode closed by ``finish`` with a non-empty
message once every target's count is up by at least the goal's number over the start, else 0.0.

This module offers, from the inside out: :class:`World` (the recipes), :class:`Game` (one episode's state
and the four tools), :func:`parse_tool_call` and :func:`replay` (run a list of tool calls, as a chat model
or an action log gives them, and return a :class:`Verdict`), then the action log, the ``textcraft``
command and the verifier of a Harbor task.

The ``textcraft`` command
-------------------------
Inside a Harbor task this file sits at ``/app/textcraft/textcraft_game.py`` and the image's ``textcraft``
wrapper runs it as ``python3 -I textcraft_game.py ...``.  Its files live in ``$TEXTCRAFT_DIR`` (when unset:
the directory of this file): ``task.json`` (``textcraft-task/1``), ``recipes.json`` and the log
``actions.jsonl``.  The commands, and the tool each one calls::

    craft ITEM COUNT NAME=N ...       -> craft           also: craft --json '{"ingredients": {...}, "target": [ITEM, COUNT]}'
    info ITEM ...  (or get_info)      -> get_info        also: info --json '[ITEM, ...]'
    inventory  (or view_inventory)    -> view_inventory
    finish WORD ...                   -> finish          the message is the words joined by single spaces
    --help                            prints the usage text

Standard output receives the tool's answer verbatim.  Exit codes: 0 when the tool ran; 1 when the game
turned the call down, that is a craft the rules reject (it is still recorded), any command once the
episode has finished, or a log already at its size or record cap (neither recorded); 2 when the words do
not form a command, or form one whose record would break a cap of the log below (no record); 3 when
``task.json``, ``recipes.json`` or the log is missing or damaged, or ``recipes.json`` does not hash to the
``recipes_sha256`` that ``task.json`` names.  COUNT and every N are written as the log writes integers:
ASCII digits with an optional leading ``-``, no leading zero, no ``-0``, at most 18 digits (so ``" 2"``,
``+2``, ``2_0``, ``02`` and non-ASCII digits are malformed); zero and negative values are handed to the
game, which rejects the craft in its own words.  A ``--json`` argument is held to the same caps before it
is decoded.

The action log
--------------
No other state is saved: each command rebuilds the episode by replaying the log from the starting
inventory.  Every line is one record of compact ASCII JSON terminated by a newline,
``{"seq": n, "tool": TOOL, "args": {...}}``, where ``seq`` is 1 on the first line and rises by one per
line; a craft's record also carries ``"ok": true`` (accepted) or ``"ok": false`` (rejected).  A command
holds an exclusive ``flock`` on the log from the moment it reads it until its own record is appended, so
parallel commands take turns.  The log has to be a regular file, and it is never opened through a
symbolic link.  Each line must be byte for byte what the command writes for its record (keys in the
order seq, tool, args, ok; numbers in their shortest form).  The log is read one line at a time, and
these caps are checked before a line is decoded, so no input reaches a recursion limit or costs memory
beyond the log's own size:

=====================  ===========  ===================================================================
cap                    value        why it never binds honest play
=====================  ===========  ===================================================================
log size               32 MiB       the largest gold log is 61 KiB
records                100,000      the longest gold solution has 550 crafts
bytes in one record    65,536       a shell word is at most 128 KiB; a gold record is under 200 bytes
arrays and objects     32           a record has 3 or 4; more only in nonsense ``--json`` arguments
  in one record                     (the cap bounds nesting depth too)
digits in one number   18           counts beyond 10**18 cannot be held; Python 3.11+ refuses to read
                                    integers of more than 4,300 digits and 3.8 does not
=====================  ===========  ===================================================================

The verifier
------------
``textcraft_game.py verify --task T --recipes R --root ROOT --log RELPATH --out DIR`` is the grader.  T and
R are the grader's own copies; only the log at ``ROOT/RELPATH`` comes from the agent.  DIR is reached
without following any link: from ROOT when it lies below ROOT, else from its parent, each component is
opened relative to the one before with ``O_NOFOLLOW | O_DIRECTORY`` (and created if absent), and every
file below is removed, created and renamed through that directory's descriptor.  A link or non-directory
on the way, or a directory it cannot write, ends the run with exit status 3 before anything is written.
The first thing it does in DIR is delete any ``reward.json``, ``reward.txt`` or ``textcraft-verdict.json``
(a directory of that name is renamed aside to ``.stale-NAME-XXXX``).  Then it writes, each through an
atomic rename, ``reward.json`` (``{"reward": 1.0}`` or ``{"reward": 0.0}``) and
``textcraft-verdict.json`` (environment, task, reward, reason, records, crafts, finished, missing,
log_bytes), and exits 0.  Whatever bytes the log holds, that is what happens: reward 0.0 with the
reason in the verdict.  Reward 1.0 needs a log the game could have produced that ends in ``finish`` with
a non-empty message and shows every target gained.  Anything doubtful scores 0.0: a symbolic link at any
step of RELPATH below ROOT (each step is opened relative to its parent directory with ``O_NOFOLLOW``;
ROOT itself is trusted), a final entry that is not a regular file (a FIFO, say), more than 32 MiB, bytes
outside ASCII, a last line without its newline, a line that is anything but one bare JSON object
(blank, padded, CRLF-terminated), a repeated key, NaN or Infinity (written out or reached by overflow),
missing or extra keys, wrong numbering, an unknown tool or malformed arguments, a line that breaks a
cap above or is not written as the command writes it, any record after ``finish``, or a craft whose
``ok`` contradicts the rules.  A log that does not exist scores 0.0 as well.  If T or R cannot be read,
or R does not hash to T's ``recipes_sha256``, the setup is at fault: exit status 3 and no reward file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
import sys
from collections import namedtuple

try:
    import fcntl  # POSIX; only the textcraft command needs it, the engine does not
except ImportError:  # pragma: no cover
    fcntl = None

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

    __slots__ = ("name", "base_items", "depths", "recipes", "_recipe_json", "_described")

    def __init__(self, document):
        if not (isinstance(document, dict) and document.get("format") == RECIPES_FORMAT):
            raise ValueError("a world must be a JSON object whose format is %r" % RECIPES_FORMAT)
        if document.get("tags"):
            raise ValueError("recipes with tag ingredients are not part of %s" % ENVIRONMENT)
        self.name = document["name"]
        self.base_items = frozenset(document["base_items"])
        self.depths = dict(document["depths"])
        self.recipes = {}
        self._recipe_json = {}
        self._described = {}  # item -> the JSON text of its description around the count held (see describe_json)
        for item, recipes in document["recipes"].items():
            # Through a dict, so a repeated ingredient would behave as the environment's dict does.
            parsed = [(recipe["result_count"], tuple(dict(map(tuple, recipe["ingredients"])).items())) for recipe in recipes]
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

    def describe_json(self, item, held):
        """``json.dumps(self.describe(item, held))``: the text around the count is made once per item of the
        world (``get_info`` answers are most of what the engine encodes)."""
        parts = self._described.get(item)
        if parts is None or type(held) is not int:
            if type(held) is not int or not (item in self.depths or item in self.recipes or item in self.base_items):
                return json.dumps(self.describe(item, held))  # names outside the world are not kept
            entry = self.describe(item, 0)
            head = json.dumps({key: entry[key] for key in ("item", "can_craft", "is_base")})
            tail = json.dumps({key: entry[key] for key in ("crafting_depth", "recipes")})
            parts = self._described[item] = (head[:-1] + ', "in_inventory": ', ", " + tail[1:])
        return parts[0] + str(held) + parts[1]


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
        describe = self.world.describe_json
        return "[" + ", ".join([describe(item, held.get(item, 0)) for item in items]) + "]"

    def view_inventory(self):
        """The ``view_inventory`` tool."""
        if self.finished:
            return EPISODE_OVER
        return dumps(self.inventory)

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
        now, start = self.inventory, self.initial_inventory
        shortfalls = ((item, wanted - (now.get(item, 0) - start.get(item, 0))) for item, wanted in self.target_items.items())
        return {item: short for item, short in shortfalls if short > 0}

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
        if type(items) is not list or any(type(item) is not str for item in items):
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
        except (ValueError, RecursionError) as error:  # RecursionError: nesting deeper than the decoder goes
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


# ----------------------------------------------------------------------------------------------- episode log
#
# A Harbor task runs the game once per command, so nothing survives between two commands except a file
# of call records.  Replaying those records from the task's starting inventory rebuilds the whole state;
# a craft's record also notes whether it was accepted, which lets the grader check each record honestly.
#
# The log is the one input an agent controls, so it is read one line at a time and every line is held to
# caps before it is decoded: a line's length, how many JSON arrays and objects it opens (which also bounds
# how deep they nest, so the decoder's recursion stays shallow on every Python) and how many digits a
# number may have (Python 3.11+ refuses to read integers past 4,300 digits; 3.8 does not).  The command
# refuses to write a record beyond these caps, so every record it writes is one the reader accepts.

LOG_NAME = "actions.jsonl"
LOG_LIMIT = 32 * 1024 * 1024  # bytes in the whole log; no real episode comes near this
RECORD_LIMIT = 100000  # records in the whole log; the longest gold solution has 550
LINE_LIMIT = 64 * 1024  # bytes in one record, newline excluded
CONTAINER_LIMIT = 32  # JSON arrays and objects in one record (a craft's own record has 4)
DIGITS_LIMIT = 18  # digits in one number: counts and seq lie between -(10**18 - 1) and 10**18 - 1
_RECORD_FIELDS = frozenset(("seq", "tool", "args"))
# A run of too many digits outside strings; any float json.dumps writes has at most 17.
_LONG_NUMBER = re.compile("[0-9]{%d}" % (DIGITS_LIMIT + 1))
# How the game writes an integer: ASCII digits, an optional leading minus, no leading zero, no "-0".
_INTEGER_WORD = re.compile("-?(?:0|[1-9][0-9]{0,%d})" % (DIGITS_LIMIT - 1))


class LogFault(ValueError):
    """The action log (or the path to it) shows something the game itself never writes."""


class _StrictDecoder(json.JSONDecoder):
    """A JSON reader for untrusted text.

    Python's own reader quietly keeps the last of two equal member names and accepts ``NaN``,
    ``Infinity`` and numbers so large they become infinite; none of these can come from the game's own
    ``json.dumps``, so this reader fails on each of them with a ``ValueError``.  It decodes recursively:
    call :func:`json_shape_problem` first on text from outside.
    """

    def __init__(self):
        super().__init__(object_pairs_hook=self._build_object, parse_constant=self._refuse_constant, parse_float=self._bounded_float)

    @staticmethod
    def _build_object(members):
        built = dict(members)
        if len(built) != len(members):
            names = [name for name, _ in members]
            repeated = sorted({name for name in names if names.count(name) > 1})
            raise ValueError("repeated member name(s): %s" % ", ".join(map(repr, repeated)))
        return built

    @staticmethod
    def _refuse_constant(word):
        raise ValueError("%s is outside JSON" % word)

    @staticmethod
    def _bounded_float(literal):
        number = float(literal)
        if math.isinf(number):
            raise ValueError("the number %s overflows a double" % literal)
        return number

    def whole_value(self, text):
        """The one JSON value that fills ``text`` exactly: no whitespace or anything else around it."""
        value, end = self.raw_decode(text)
        if end != len(text):
            raise ValueError("unexpected text after the value at character %d" % end)
        return value


_STRICT = _StrictDecoder()
# The log reader's decoder: the strict one's refusals, but objects built in C.  A repeated member name
# cannot slip through it: the rebuilt dict loses a member, so the line is not what format_record writes.
_LOG_DECODER = json.JSONDecoder(parse_constant=_StrictDecoder._refuse_constant, parse_float=_StrictDecoder._bounded_float)


def _kept_encoder(item_separator, key_separator, allow_nan):
    """``value -> str``: ``json.dumps(value, separators=(item_separator, key_separator), allow_nan=allow_nan)``
    (ASCII, keys in insertion order, no check for cycles: for values this package made).

    ``json.dumps`` builds a new C encoder on every call, which costs more than encoding a small value; the
    log reader re-encodes every record and the SFT renderer every tool call, so each keeps one.
    ``c_make_encoder`` is CPython's own, with the same arguments on 3.8 to 3.13; the plain encoder stands
    in wherever it is absent or differs.
    """
    plain = json.JSONEncoder(ensure_ascii=True, allow_nan=allow_nan, separators=(item_separator, key_separator))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            encode = make(None, plain.default, json.encoder.encode_basestring_ascii, None, key_separator, item_separator, False, False, allow_nan)
            sample = {"a": [1, -2.5, "\u00e9\ud83d", True, None, {}], "b": ""}
            if "".join(encode(sample, 0)) == plain.encode(sample):
                return lambda value: "".join(encode(value, 0))
        except Exception:  # pragma: no cover - an interpreter whose private encoder differs
            pass
    return plain.encode  # pragma: no cover


_compact_json = _kept_encoder(",", ":", False)
# json.dumps(value) with its default settings (", " and ": "), for the engine's answers and the SFT texts.
dumps = _kept_encoder(", ", ": ", True)


def loads_strict(text):
    """Parse JSON text (surrounding whitespace allowed) with :class:`_StrictDecoder`'s refusals.

    Only for trusted text, or text that :func:`json_shape_problem` has passed: the decoder recurses.
    """
    return _STRICT.decode(text)


def json_shape_problem(text):
    """Why JSON ``text`` breaks :data:`CONTAINER_LIMIT` or :data:`DIGITS_LIMIT` (a phrase), or None.

    Found without decoding, in a few linear passes that run in C: escaped backslashes and quotes are
    dropped, so the remaining quotes delimit strings, and only the text between strings is counted.  For
    valid JSON the count is exact; for anything else it is at least the depth the decoder can reach before
    it fails, so a text passed here cannot drive the decoder deeper than the cap.
    """
    if (text.count("[") + text.count("{") <= CONTAINER_LIMIT) and _LONG_NUMBER.search(text) is None:
        return None  # strings included, so this count is an upper bound
    between = text.replace("\\\\", "").replace('\\"', "").split('"')[0::2]
    containers = 0
    for part in between:
        containers += part.count("[") + part.count("{")
        if _LONG_NUMBER.search(part):
            return "has a number of more than %d digits" % DIGITS_LIMIT
    if containers > CONTAINER_LIMIT:
        return "opens %d JSON arrays and objects (at most %d)" % (containers, CONTAINER_LIMIT)
    return None


def format_record(seq, tool, arguments, accepted=None):
    """The bytes of one log line: compact ASCII JSON, newline-terminated; crafts carry ``ok``."""
    fields = {"seq": seq, "tool": tool, "args": arguments}
    if tool == "craft":
        fields["ok"] = accepted is True
    return (_compact_json(fields) + "\n").encode("ascii")


# One checked record; ``ok`` is None except on crafts.
LoggedCall = namedtuple("LoggedCall", ("tool", "args", "ok"))


_CRAFT_FIELDS = _RECORD_FIELDS | {"ok"}


def _check_line(number, line):
    """The :class:`LoggedCall` on line ``number`` (counted from 1; ``line`` is bytes without its newline).

    Raises :class:`LogFault` unless the line is exactly the bytes :func:`format_record` writes for it.
    """
    if len(line) > LINE_LIMIT:
        raise LogFault("line %d is longer than %d bytes" % (number, LINE_LIMIT))
    if not line.isascii():
        raise LogFault("line %d holds bytes outside ASCII" % number)
    text = line.decode("ascii")
    shape = json_shape_problem(text)
    if shape is not None:
        raise LogFault("line %d %s" % (number, shape))
    try:
        record, end = _LOG_DECODER.raw_decode(text)
    except ValueError as error:
        raise LogFault("line %d is not a single JSON value (%s)" % (number, error))
    if end != len(text):
        raise LogFault("line %d is not a single JSON value (unexpected text after the value at character %d)" % (number, end))
    if type(record) is not dict:
        raise LogFault("line %d holds a JSON %s where an object belongs" % (number, _type_name(record)))
    tool = record.get("tool")
    if type(tool) is not str or tool not in TOOL_PARAMETERS:
        raise LogFault("line %d: %s is not a tool of the game" % (number, json.dumps(tool)))
    wanted = _CRAFT_FIELDS if tool == "craft" else _RECORD_FIELDS
    if record.keys() != wanted:
        unexpected = sorted(set(record) - wanted)
        absent = sorted(wanted - set(record))
        raise LogFault(
            "line %d: a %s record has the fields %s (unexpected: %s; absent: %s)"
            % (number, tool, "/".join(sorted(wanted)), ", ".join(unexpected) or "-", ", ".join(absent) or "-")
        )
    seq = record["seq"]
    if type(seq) is not int or seq != number:
        raise LogFault("line %d: seq should be %d but reads %s" % (number, number, json.dumps(seq)))
    arguments = record["args"]
    complaint = argument_problem(tool, arguments)
    if complaint is not None:
        raise LogFault("line %d: %s" % (number, complaint))
    accepted = record.get("ok")
    if tool == "craft" and type(accepted) is not bool:
        raise LogFault("line %d: a craft's ok flag has to be a JSON boolean" % number)
    if format_record(seq, tool, arguments, accepted)[:-1] != line:
        try:
            _STRICT.whole_value(text)  # names a repeated member, if that is the difference
        except ValueError as error:
            raise LogFault("line %d is not a single JSON value (%s)" % (number, error))
        raise LogFault(
            "line %d is not written as the game writes it (compact ASCII JSON, fields in the order seq, tool, "
            "args, ok, numbers in their shortest form)" % number
        )
    return LoggedCall(tool, arguments, accepted)


def iter_log(data):
    """Check the bytes of an action log line by line, yielding each :class:`LoggedCall` in turn.

    Only the form is checked here (size, line endings, each record's bytes, fields and numbering);
    whether the recorded outcomes are true is settled on replay.  Lines are cut and decoded one at a
    time, so memory stays near the size of ``data`` whatever its shape.
    """
    if len(data) > LOG_LIMIT:
        raise LogFault("the log exceeds the 32 MiB limit (%d bytes allowed)" % LOG_LIMIT)
    if data and not data.endswith(b"\n"):
        raise LogFault("the log's final line is missing its newline")
    start, end, number = 0, len(data), 0
    find = data.find
    while start < end:
        stop = find(b"\n", start)
        number += 1
        if number > RECORD_LIMIT:
            raise LogFault("the log holds more than %d records" % RECORD_LIMIT)
        if stop - start > LINE_LIMIT:
            raise LogFault("line %d is longer than %d bytes" % (number, LINE_LIMIT))
        yield _check_line(number, data[start:stop])
        start = stop + 1


def read_log(data):
    """The :class:`LoggedCall` list of an action log's bytes (see :func:`iter_log`), or :class:`LogFault`."""
    return list(iter_log(data))


def craft_succeeded(answer):
    """True when a ``craft`` answer reports success."""
    return answer.startswith(CRAFTED_PREFIX)


def _apply_record(game, number, call):
    """Play record ``number`` on ``game`` as a replay must; :class:`LogFault` if the game would not have written it.

    Returns the craft's answer, or None for the other tools: ``get_info`` and ``view_inventory`` change
    nothing, so a replay need not compute what they printed.
    """
    if game.finished:
        raise LogFault("line %d follows the finish call" % number)
    tool = call.tool
    if tool == "craft":
        arguments = call.args
        answer = game.craft(arguments["ingredients"], arguments["target"])
        if craft_succeeded(answer) != call.ok:
            truth = "accept" if craft_succeeded(answer) else "reject"
            raise LogFault("line %d: ok is %s, yet the rules %s this craft" % (number, json.dumps(call.ok), truth))
        return answer
    if tool == "finish":
        game.finish(call.args["message"])
    return None


def replay_log(game, calls):
    """Run checked records on ``game``, yielding each answer in turn.

    Raises :class:`LogFault` at the first record the game would not have produced: anything recorded
    once the episode had finished, or a craft whose ``ok`` flag disagrees with the rules.
    """
    for number, call in enumerate(calls, 1):
        if call.tool == "craft" or game.finished:
            yield _apply_record(game, number, call)
        else:
            yield game.call(call.tool, call.args)


_INVALID_LOG = "invalid action log: "


def _replay_bytes(game, data):
    """Check and replay the log ``data`` on ``game``, one line at a time; returns the number of records.

    Raises :class:`LogFault` (its ``records`` attribute: the records replayed before the fault).
    """
    done = 0
    try:
        for number, call in enumerate(iter_log(data), 1):
            _apply_record(game, number, call)
            done = number
    except LogFault as fault:
        fault.records = done
        raise
    return done


def score_log(world, task, data):
    """The :class:`Verdict` on the bytes of an action log for ``task`` (no observations are kept)."""
    game = Game.for_task(world, task)
    try:
        records = _replay_bytes(game, data)
    except LogFault as fault:
        return judge(game, fault.records, [], _INVALID_LOG + str(fault))
    return judge(game, records, [])


# ------------------------------------------------------------------------------------------ textcraft command
#
# One process per command: lock the log, rebuild the episode from it, run the one tool asked for, append
# that call's record, unlock, print the answer.

GAME_DIR_VARIABLE = "TEXTCRAFT_DIR"
TASK_FILE = "task.json"
RECIPES_FILE = "recipes.json"

EXIT_OK = 0
EXIT_REFUSED = 1  # a craft the rules turned down (it is still logged), or a command once finished (not logged)
EXIT_USAGE = 2  # the words do not form a command: the game never saw them
EXIT_UNPLAYABLE = 3  # a missing or damaged task.json, recipes.json or action log

HELP_WORDS = ("--help", "-h", "help")

USAGE = """\
textcraft - play this task's crafting game, one command per call

  textcraft craft ITEM COUNT NAME=N [NAME=N ...]
      Craft ITEM so that you end up with COUNT more of it.  List every ingredient of the
      recipe, no more and no fewer.  A recipe makes result_count items per use, so COUNT has
      to be a multiple of result_count, and an ingredient listed as {"x": k} in the recipe is
      given as x=(k * COUNT / result_count).  Example: with the recipe
      {"ingredients": {"raw_c1": 3, "c2_i4": 1}, "result_count": 2},
          textcraft craft c3_i1 4 raw_c1=6 c2_i4=2
      uses the recipe twice and gives you 4 c3_i1.
  textcraft info ITEM [ITEM ...]
      Looks ITEMs up: each one's recipes and crafting depth, whether it is a raw material, and
      your count of it, printed as a JSON list.
  textcraft inventory
      What you hold right now, as a JSON object of item counts.
  textcraft finish MESSAGE
      Stop playing; MESSAGE says what you did.  You succeed if, by then, you have gained every
      target item.  Commands after finish are refused.

  Alternative spellings: get_info for info, view_inventory for inventory, and JSON arguments:
      textcraft craft --json '{"ingredients": {"NAME": N}, "target": ["ITEM", COUNT]}'
      textcraft info --json '["ITEM", ...]'

  Files: $TEXTCRAFT_DIR (default: the directory of this game file) holds task.json,
  recipes.json and actions.jsonl, the record of every command, which is what gets graded.

  Exit codes: 0 = done; 1 = the game refused (rejected craft, or the game is over);
  2 = malformed command, nothing recorded; 3 = the game files are missing or damaged.
"""


class BadCommand(Exception):
    """The words on the command line do not form a command; nothing is run or recorded."""


class CannotPlay(Exception):
    """The episode's files cannot be used, so the command cannot run."""


def read_integer(word):
    """The int a command-line word spells, or None unless it is written as the log writes numbers.

    That is ASCII digits with an optional leading ``-``, no leading zero, no ``-0`` and at most
    :data:`DIGITS_LIMIT` digits: ``" 2"``, ``"+2"``, ``"2_0"``, ``"02"`` and non-ASCII digits are refused.
    """
    if _INTEGER_WORD.fullmatch(word) is None or word == "-0":
        return None
    return int(word)


def _integer(word, label):
    number = read_integer(word)
    if number is None:
        raise BadCommand(
            "%s should be an integer in ASCII digits (optional leading -, no leading zeros, at most %d digits), not %s"
            % (label, DIGITS_LIMIT, _shown(word))
        )
    return number


def _shown(word, width=40):
    """``repr`` of a command-line word, cut short so an error stays one readable line."""
    return repr(word) if len(word) <= width else repr(word[:width]) + "..."


def _option_value(words, name):
    """The JSON value given as the only word after ``NAME --json``."""
    if len(words) != 1:
        raise BadCommand("%s --json expects a single argument, got %d" % (name, len(words)))
    text = words[0]
    if len(text) > LINE_LIMIT:
        raise BadCommand("%s --json: the JSON is longer than %d characters" % (name, LINE_LIMIT))
    shape = json_shape_problem(text)
    if shape is not None:
        raise BadCommand("%s --json: the JSON %s" % (name, shape))
    try:
        return loads_strict(text)
    except ValueError as error:
        raise BadCommand("%s --json: cannot parse the JSON: %s" % (name, error))


def _craft_arguments(name, words):
    if words[:1] == ["--json"]:
        value = _option_value(words[1:], name)
        if type(value) is not dict or value.keys() != {"ingredients", "target"}:
            raise BadCommand('%s --json expects an object with exactly "ingredients" and "target"' % name)
        return value
    if len(words) < 2:
        raise BadCommand("%s needs ITEM and COUNT, then one NAME=N per ingredient" % name)
    item, count_word, pairs = words[0], words[1], words[2:]
    count = _integer(count_word, "COUNT")
    ingredients = {}
    for pair in pairs:
        cut = pair.rfind("=")
        if cut <= 0:
            raise BadCommand("ingredients are written NAME=N; %r is not" % pair)
        ingredient = pair[:cut]
        if ingredient in ingredients:
            raise BadCommand("%s= appears more than once" % ingredient)
        ingredients[ingredient] = _integer(pair[cut + 1:], "N in %s" % _shown(pair))
    return {"ingredients": ingredients, "target": [item, count]}


def _info_arguments(name, words):
    if words[:1] == ["--json"]:
        value = _option_value(words[1:], name)
        if type(value) is not list or any(type(entry) is not str for entry in value):
            raise BadCommand("%s --json expects a JSON array of strings" % name)
        return {"items": value}
    return {"items": list(words)}


def _inventory_arguments(name, words):
    if words:
        raise BadCommand("%s does not accept arguments" % name)
    return {}


def _finish_arguments(name, words):
    if not words:
        raise BadCommand("%s needs a message" % name)
    return {"message": " ".join(words)}


# command word -> (tool, reader of the remaining words)
_COMMANDS = {
    "craft": ("craft", _craft_arguments),
    "info": ("get_info", _info_arguments),
    "get_info": ("get_info", _info_arguments),
    "inventory": ("view_inventory", _inventory_arguments),
    "view_inventory": ("view_inventory", _inventory_arguments),
    "finish": ("finish", _finish_arguments),
}


# A seq no log under LOG_LIMIT reaches: a record that fits the caps with it fits them with its real seq.
_SEQ_PROBE = 10 ** 8 - 1


def record_problem(tool, arguments):
    """Why the log could not hold a record of this call (a phrase), or None; :func:`_check_line` decides."""
    line = format_record(_SEQ_PROBE, tool, arguments, False)[:-1]
    try:
        _check_line(_SEQ_PROBE, line)
    except LogFault as fault:
        return str(fault).replace("line %d" % _SEQ_PROBE, "its record", 1)
    return None


def read_command(words):
    """The ``(tool, arguments)`` a command line asks for, or :class:`BadCommand`.

    Only the shape of the command is judged here; whether a craft makes sense (including a count of zero
    or below) is the game's question, so such a craft is played and recorded.  A call whose record the
    log's reader would refuse (past a cap) is refused here, so the command never writes such a record.
    """
    if not words:
        raise BadCommand("missing command")
    entry = _COMMANDS.get(words[0])
    if entry is None:
        raise BadCommand("%r is not a textcraft command" % words[0])
    tool, reader = entry
    arguments = reader(words[0], list(words[1:]))
    problem = record_problem(tool, arguments)
    if problem is not None:
        raise BadCommand("%s cannot be recorded: %s" % (words[0], problem))
    return tool, arguments


def _game_dir():
    configured = os.environ.get(GAME_DIR_VARIABLE)
    return configured or os.path.split(os.path.realpath(__file__))[0]


def read_task_file(path):
    """A ``task.json`` document; ``ValueError`` (or ``OSError``) when it is not one."""
    with open(path, "rb") as stream:
        document = loads_strict(stream.read().decode("utf-8"))
    kind = document.get("format") if isinstance(document, dict) else None
    if kind != TASK_FORMAT:
        raise ValueError("%s: format %s, expected %s" % (path, json.dumps(kind), TASK_FORMAT))
    task_state(document)  # raises when either count map is absent or malformed
    if type(document.get("recipes_sha256")) is not str:
        raise ValueError("%s: recipes_sha256 is missing" % path)
    return document


# RecursionError: trusted files are decoded without the caps, so a deeply nested one must still be a fault.
_SETUP_ERRORS = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)


def _world_and_task(recipes_path, task_path):
    """``(World, task)``, the recipes checked against the task's ``recipes_sha256``; else :class:`CannotPlay`."""
    try:
        task = read_task_file(task_path)
        with open(recipes_path, "rb") as stream:
            recipes = stream.read()
        digest = hashlib.sha256(recipes).hexdigest()
        if digest != task["recipes_sha256"]:
            raise ValueError("%s has sha256 %s, but task.json names %s" % (recipes_path, digest, task["recipes_sha256"]))
        return World(json.loads(recipes.decode("utf-8"))), task
    except _SETUP_ERRORS as error:
        raise CannotPlay("unusable game files (%s, %s): %s" % (recipes_path, task_path, error))


def _read_capped(fd, cap):
    """Everything from ``fd``'s offset on, but never more than ``cap + 1`` bytes (enough to see excess)."""
    with open(fd, "rb", closefd=False) as stream:
        return stream.read(cap + 1)


def _open_log(path):
    """The log's descriptor for reading and appending, created if absent, never through a link."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:
        raise CannotPlay("%s cannot be opened: %s" % (path, error.strerror or error))
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    raise CannotPlay("%s exists but is not a regular file" % path)


def play_command(directory, tool, arguments):
    """Run one tool call against the episode recorded in ``directory``; returns ``(answer, exit code)``.

    Everything from reading the log to appending the new record happens under an exclusive ``flock``,
    so concurrent commands are serialised and the log never holds a torn or out-of-order record.
    """
    if fcntl is None:
        raise CannotPlay("this platform has no fcntl, so the action log cannot be locked")
    world, task = _world_and_task(os.path.join(directory, RECIPES_FILE), os.path.join(directory, TASK_FILE))
    path = os.path.join(directory, LOG_NAME)
    fd = _open_log(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            history = _read_capped(fd, LOG_LIMIT)
        except OSError as error:
            raise CannotPlay("%s cannot be read: %s" % (path, error.strerror or error))
        game = Game.for_task(world, task)
        try:
            recorded = _replay_bytes(game, history)
        except LogFault as fault:
            raise CannotPlay("%s cannot be replayed, so play cannot continue: %s" % (path, fault))
        if game.finished:
            return EPISODE_OVER, EXIT_REFUSED
        answer = game.call(tool, arguments)
        accepted = craft_succeeded(answer) if tool == "craft" else None
        record = format_record(recorded + 1, tool, arguments, accepted)
        if recorded >= RECORD_LIMIT:
            return "Error: the action log already holds %d records, its limit; nothing was recorded" % RECORD_LIMIT, EXIT_REFUSED
        if len(history) + len(record) > LOG_LIMIT:
            return "Error: no room is left in the %d-byte action log; nothing was recorded" % LOG_LIMIT, EXIT_REFUSED
        try:
            with open(fd, "ab", closefd=False) as stream:
                stream.write(record)
        except OSError as error:
            raise CannotPlay("%s cannot be appended to: %s" % (path, error.strerror or error))
        return answer, EXIT_REFUSED if accepted is False else EXIT_OK
    finally:
        os.close(fd)  # closing drops the lock too


def _print_answer(answer):
    # Written as bytes: words from the command line may carry undecodable bytes (surrogate escapes).
    sys.stdout.flush()
    sys.stdout.buffer.write(answer.encode("utf-8", "backslashreplace") + b"\n")
    sys.stdout.flush()


def main(argv=None):
    """Entry point of ``textcraft`` (and of ``verify``); returns the process exit code."""
    words = list(argv) if argv is not None else sys.argv[1:]
    first = words[0] if words else None
    if first in HELP_WORDS:
        sys.stdout.write(USAGE)
        return EXIT_OK
    if first == "verify":
        return verify_command(words[1:])
    try:
        tool, arguments = read_command(words)
    except BadCommand as problem:
        sys.stderr.write("textcraft: %s\n(the commands are listed below)\n\n%s" % (problem, USAGE))
        return EXIT_USAGE
    try:
        answer, code = play_command(_game_dir(), tool, arguments)
    except CannotPlay as problem:
        sys.stderr.write("textcraft: %s\n" % problem)
        return EXIT_UNPLAYABLE
    if answer:
        _print_answer(answer)
    return code


# ---------------------------------------------------------------------------------------------------- grader
#
# ``tests/test.sh`` calls ``textcraft_game.py verify`` from the tests directory, where the game, task and
# recipes are the grader's own.  The one untrusted input is the action log, so it is approached with care:
# every path component below ROOT is checked and opened without following links, only a regular file of
# bounded size is read, and its contents are parsed strictly before being replayed.

REWARD_FILE = "reward.json"
VERDICT_FILE = "textcraft-verdict.json"
# Whatever sits in the output directory under these names before grading is deleted, so it cannot count.
_STALE_OUTPUTS = (REWARD_FILE, "reward.txt", VERDICT_FILE)
_NO_LOG = "the agent never ran a textcraft command (the action log does not exist)"


def _log_components(relpath):
    parts = relpath.split("/")
    if relpath.startswith("/") or "" in parts or "." in parts or ".." in parts:
        raise LogFault("%r is not a plain relative path below the root" % relpath)
    return parts


def _walk_to_log(root, relpath):
    """An open read-only descriptor of ``root/relpath``, reached without following any link below ``root``.

    Returns None when the log (or a directory on its way) does not exist.  Raises :class:`LogFault` for
    a symbolic link anywhere on the path or a final component that is not a regular file.
    """
    parts = _log_components(relpath)
    cloexec = getattr(os, "O_CLOEXEC", 0)
    current = os.open(root, os.O_RDONLY | os.O_DIRECTORY | cloexec)  # the root itself is trusted
    try:
        for depth, part in enumerate(parts, 1):
            shown = "/".join(parts[:depth])
            final = depth == len(parts)
            try:
                info = os.stat(part, dir_fd=current, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if stat.S_ISLNK(info.st_mode):
                raise LogFault("%s is a symbolic link" % shown)
            if final and not stat.S_ISREG(info.st_mode):
                raise LogFault("%s is not a regular file" % shown)
            mode = os.O_RDONLY | os.O_NOFOLLOW | cloexec | (os.O_NONBLOCK if final else os.O_DIRECTORY)
            try:
                opened = os.open(part, mode, dir_fd=current)
            except FileNotFoundError:
                return None
            except OSError as error:
                if error.errno == errno.ELOOP:  # replaced by a link between the check and the open
                    raise LogFault("%s is a symbolic link" % shown)
                raise
            os.close(current)
            current = opened
        if not stat.S_ISREG(os.fstat(current).st_mode):
            raise LogFault("%s is not a regular file" % relpath)
        found, current = current, -1
        return found
    finally:
        if current >= 0:
            os.close(current)


def fetch_log(root, relpath):
    """The bytes of the agent's log, None if there is none; :class:`LogFault` when it cannot be trusted."""
    try:
        fd = _walk_to_log(root, relpath)
    except OSError as error:
        raise LogFault("%s cannot be opened: %s" % (relpath, error.strerror or error))
    if fd is None:
        return None
    try:
        too_big = os.fstat(fd).st_size > LOG_LIMIT
        data = b"" if too_big else _read_capped(fd, LOG_LIMIT)
    finally:
        os.close(fd)
    if too_big or len(data) > LOG_LIMIT:
        raise LogFault("the log exceeds the 32 MiB limit (%d bytes allowed)" % LOG_LIMIT)
    return data


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_out_dir(root, out):
    """A descriptor of the output directory ``out``, every step to it taken without following a link.

    The walk starts from a directory the caller vouches for: ROOT when ``out`` lies below it (as
    ``tests/test.sh`` puts it), else ``out``'s parent.  Each later component is opened relative to the
    previous one with ``O_NOFOLLOW | O_DIRECTORY`` and created (mode 0755) if absent.  A link, or
    anything but a directory, on the way raises :class:`CannotPlay` before anything is written.
    """
    root_abs, out_abs = os.path.abspath(root), os.path.abspath(out)
    try:
        below_root = out_abs != root_abs and os.path.commonpath([root_abs, out_abs]) == root_abs
    except ValueError:
        below_root = False
    start, rest = (root_abs, os.path.relpath(out_abs, root_abs)) if below_root else os.path.split(out_abs)
    if not rest:
        raise CannotPlay("%s cannot be the output directory" % out)
    try:
        current = os.open(start, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise CannotPlay("the output directory's parent %s cannot be opened: %s" % (start, error.strerror or error))
    try:
        for part in rest.split(os.sep):
            try:
                os.mkdir(part, 0o755, dir_fd=current)
            except FileExistsError:
                pass
            except OSError as error:
                raise CannotPlay("%s cannot be created in %s: %s" % (part, start, error.strerror or error))
            try:
                opened = os.open(part, _NOFOLLOW_DIR, dir_fd=current)
            except OSError as error:
                try:
                    linked = stat.S_ISLNK(os.stat(part, dir_fd=current, follow_symlinks=False).st_mode)
                except OSError:
                    linked = False
                kind = "a symbolic link" if linked or error.errno == errno.ELOOP else "not a usable directory"
                raise CannotPlay("%s is %s (output directory %s); nothing was written" % (part, kind, out))
            os.close(current)
            current = opened
        found, current = current, -1
        return found
    finally:
        if current >= 0:
            os.close(current)


def _remove_stale_outputs(out_fd):
    """Clear the output names in the directory ``out_fd`` without following links.

    A file or link is unlinked; a directory is renamed aside (``.stale-NAME-XXXX``), which frees the
    name without walking a tree the agent may have built.
    """
    for name in _STALE_OUTPUTS:
        try:
            mode = os.stat(name, dir_fd=out_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(mode):
            aside = ".stale-%s-%s" % (name, os.urandom(6).hex())
            os.rename(name, aside, src_dir_fd=out_fd, dst_dir_fd=out_fd)
        else:
            os.unlink(name, dir_fd=out_fd)


def _publish(out_fd, name, text):
    """Put ``text`` at ``name`` in the directory ``out_fd`` atomically: a private temporary file, then a rename."""
    staging = ".%s.%s.partial" % (name, os.urandom(6).hex())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(staging, flags, 0o600, dir_fd=out_fd)
    try:
        with open(fd, "wb") as stream:
            stream.write(text.encode("utf-8"))
            stream.flush()
            os.fchmod(stream.fileno(), 0o644)
        os.replace(staging, name, src_dir_fd=out_fd, dst_dir_fd=out_fd)
    except BaseException:
        try:
            os.unlink(staging, dir_fd=out_fd)
        except OSError:
            pass
        raise


_UNEXPECTED = "the verifier failed on this log, so it cannot count: "


def _grade(world, task, root, relpath):
    """``(Verdict, log size or None)`` for the agent's log; never raises for anything the agent wrote."""
    data = None
    try:
        data = fetch_log(root, relpath)
        if data is None:
            return judge(Game.for_task(world, task), 0, [], _NO_LOG), None
        return score_log(world, task, data), len(data)
    except LogFault as fault:
        return judge(Game.for_task(world, task), 0, [], _INVALID_LOG + str(fault)), None
    except (Exception, RecursionError) as error:  # a last resort: the caps should make this unreachable
        size = len(data) if data is not None else None
        return judge(Game.for_task(world, task), 0, [], _UNEXPECTED + "%s: %s" % (_type_name(error), error)), size


def verify(task_path, recipes_path, root, relpath, out):
    """Grade the agent's log at ``root/relpath`` and write the reward and the verdict into ``out``.

    The output directory is opened first, without following links (:func:`_open_out_dir`), and old
    outputs are removed from it.  The task and recipes are the grader's trusted copies: if they cannot
    be read or disagree (``recipes_sha256``), the fault is the setup's.  Every setup fault, and an output
    directory that cannot be used safely, raises :class:`CannotPlay` with no reward written.  Returns the
    verdict document.
    """
    out_fd = _open_out_dir(root, out)
    try:
        try:
            _remove_stale_outputs(out_fd)
        except OSError as error:
            raise CannotPlay("old outputs in %s cannot be removed: %s" % (out, error.strerror or error))
        world, task = _world_and_task(recipes_path, task_path)
        verdict, size = _grade(world, task, root, relpath)
        document = {
            "environment": ENVIRONMENT,
            "task": task.get("name"),
            "reward": verdict.reward,
            "reason": verdict.reason,
            "records": verdict.calls,
            "crafts": verdict.crafts,
            "finished": verdict.finished,
            "missing": dict(verdict.missing),
            "log_bytes": size,
        }
        # The verdict first: a reward file never appears without its reasons.
        try:
            for name, content in ((VERDICT_FILE, document), (REWARD_FILE, {"reward": verdict.reward})):
                _publish(out_fd, name, json.dumps(content, indent=1 if content is document else None, sort_keys=True) + "\n")
        except OSError as error:
            raise CannotPlay("the reward cannot be written to %s: %s" % (out, error.strerror or error))
        return document
    finally:
        os.close(out_fd)


def verify_command(words):
    """``verify --task T --recipes R --root ROOT --log RELPATH --out DIR``; 0 once a reward is written."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="textcraft verify",
        description="Replay an agent's action log with trusted game files and write the reward.",
    )
    parser.add_argument("--task", required=True, metavar="T", help="task.json as the grader ships it")
    parser.add_argument("--recipes", required=True, metavar="R", help="recipes.json as the grader ships it")
    parser.add_argument("--root", required=True, help="directory the log path is resolved from; links above it are allowed")
    parser.add_argument("--log", required=True, metavar="RELPATH", help="location of actions.jsonl relative to --root; no link may appear on it")
    parser.add_argument("--out", required=True, metavar="DIR", help="directory that receives %s and %s" % (REWARD_FILE, VERDICT_FILE))
    options = parser.parse_args(words)
    try:
        document = verify(
            task_path=options.task, recipes_path=options.recipes, root=options.root, relpath=options.log, out=options.out
        )
    except CannotPlay as problem:
        sys.stderr.write("textcraft verify: %s\n" % problem)
        return EXIT_UNPLAYABLE
    sys.stdout.write("textcraft verify: reward=%s; %s\n" % (document["reward"], document["reason"]))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
