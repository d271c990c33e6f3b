"""What an agent is told: the system prompt, the first user message and the four tools' JSON schemas.

One source for every product that talks to a model: the SFT conversations, the evaluation environment and
its chat agents.  Argument names are the environment's (``ingredients``, ``target``, ``items``,
``message``), so a call a model makes here is a call the engine, and the Harbor ``textcraft`` command, take.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping

from .game import dumps

SYSTEM_PROMPT = """\
You are playing TextCraft, a crafting game. You start with an inventory of materials and must craft the \
target items named in the goal.

How crafting works:
- Every craftable item has a recipe: a list of ingredients with amounts, and a result_count (how many items \
one use of the recipe makes).
- To craft, call craft with target = [item, total], where total is how many you want to make. total must be \
a multiple of the recipe's result_count.
- ingredients must name exactly the recipe's ingredients, no more and no fewer, each with amount \
(recipe amount) * total / result_count, and your inventory must hold that much of each. A rejected craft \
changes nothing.
- Ingredients are used up; crafted items are added to your inventory.

Item names are arbitrary codes and say nothing about recipes, so look recipes up with get_info (it takes \
several items at once) before crafting, and work down from the targets to the materials you hold; then \
craft from the bottom up. view_inventory shows what you hold.

You succeed when your inventory has gained at least the goal's count of every target item compared with \
the start. When you are done, call finish with a short message saying what you crafted; finish ends the \
game, and nothing can be done after it."""


def user_prompt(goal: str) -> str:
    """The first user message: the task's goal, e.g. ``Craft the following items: 3x a1_i5``."""
    return goal


_COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}

TOOLS: List[Dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "craft",
            "description": "Craft a total number of an item from exactly its recipe's ingredients, scaled to that total.",
            "parameters": {
                "type": "object",
                "properties": {
                    "ingredients": dict(
                        _COUNTS,
                        description="Every ingredient of the recipe mapped to the amount to use: recipe amount * total / result_count.",
                    ),
                    "target": {
                        "type": "array",
                        "description": "[item name, total to craft]; the total must be a multiple of the recipe's result_count.",
                        "prefixItems": [{"type": "string"}, {"type": "integer", "minimum": 1}],
                        "minItems": 2,
                        "maxItems": 2,
                    },
                },
                "required": ["ingredients", "target"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_info",
            "description": "Look up items: their recipes, crafting depth, whether they are base materials, and how many you hold.",
            "parameters": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": {"type": "string"}, "description": "Item names to look up."}
                },
                "required": ["items"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "view_inventory",
            "description": "Show your inventory as a JSON object of item name to count.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "finish",
            "description": "End the game with a short message saying what you crafted. Nothing can be done after it.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string", "description": "What you achieved."}},
                "required": ["message"],
            },
        },
    },
]


_TOOLS_JSON = json.dumps(TOOLS)


def tool_schemas() -> List[Dict[str, Any]]:
    """A fresh copy of :data:`TOOLS` (callers may mutate theirs); decoding its JSON text is ~10x faster
    than ``copy.deepcopy``, which the evaluation pays once per episode."""
    return json.loads(_TOOLS_JSON)


def num_characters(messages: Iterable[Mapping[str, Any]]) -> int:
    """The characters of a conversation: every message's content plus every tool call's name and JSON
    arguments (the ``num_characters`` column of the sft configs)."""
    total = 0
    for message in messages:
        total += len(message["content"])
        for call in message.get("tool_calls", ()):
            total += len(call["function"]["name"]) + len(dumps(call["function"]["arguments"]))
    return total
