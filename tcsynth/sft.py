"""Task rows as supervised fine-tuning conversations: a careful expert's tool calls, each answered by the engine.

A conversation is ``system`` (the rules, :data:`tcsynth.prompts.SYSTEM_PROMPT`), ``user`` (the goal), then
assistant turns that call tools, each call followed by a ``tool`` message::

    assistant  view_inventory()                       what do I hold?
    assistant  get_info([targets])                    look recipes up, one batched call per level,
    assistant  get_info([ingredients to craft])       from the targets down to the materials held
    ...
    assistant  craft(...), craft(...), ...            craft bottom up, one turn per crafting depth
    ...                                               (or one call per turn: ``parallel=False``)
    assistant  finish(message)

What the assistant looks up next is read from what ``get_info`` printed: the ingredients of the recipes
just shown that the plan crafts (never a name it has not seen).  The crafts are the gold trajectory's, with
the total the craft tool takes (``count``, not ``crafts``), grouped by the crafting depth ``get_info``
printed.  Every tool message is what :class:`tcsynth.game.Game` returned for that call while rendering, and
that play is the conversation's verification: the episode starts fresh, every call goes through
:meth:`tcsynth.game.Game.call` in conversation order, an answer starting with ``Error`` raises
:class:`SftError`, and so does a finished episode that :func:`tcsynth.game.judge` does not score 1.0.
:func:`verify` replays a conversation given as messages (one that was stored or edited) the same way.

Messages follow the shape ``transformers`` chat templates and TRL take: assistant ``{"role", "content",
"tool_calls": [{"id", "type": "function", "function": {"name", "arguments": dict}}]}``, tool ``{"role",
"tool_call_id", "name", "content"}``.  Call ids are ``call_1``, ``call_2``, ... in conversation order, so the
same row always gives the same bytes.

For the build, each message is also written as JSON text while it is made (the same text as ``json.dumps``
of the message, see :func:`encode_row`): the tool-call arguments are serialized once, for the text and for
``num_characters`` alike, and the system message and the tools, the same in every row, once per process.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from tqdm.auto import tqdm

from . import game, prompts, records
from .configs import SFT_TASK_COLUMNS
from .errors import UserError
from .store import Records

Message = Dict[str, Any]
Row = Dict[str, Any]

class SftError(UserError):
    """A task whose conversation cannot be built or does not replay to reward 1.0; names the task."""


# ------------------------------------------------------------------------------------------ the conversation


_dumps = game.dumps  # json.dumps with its defaults, one encoder kept
# What json.dumps does with a str (ensure_ascii, the default), without its dispatch on the type.
_string = json.encoder.encode_basestring_ascii
# JSON text that is the same in every conversation, made once per process (see _Transcript).
_constant_json: Dict[str, str] = {}


def _system_json() -> str:
    text = _constant_json.get("system")
    if text is None:
        text = _constant_json["system"] = _dumps({"role": "system", "content": prompts.SYSTEM_PROMPT})
    return text


def tools_json() -> str:
    """``json.dumps(prompts.tool_schemas())``, serialized once per process."""
    text = _constant_json.get("tools")
    if text is None:
        text = _constant_json["tools"] = _dumps(prompts.tool_schemas())
    return text


class _Transcript:
    """Messages under construction: every call is played on ``game`` and answered with what it returned.

    Beside the messages it keeps their JSON text (``encoded``, each exactly ``json.dumps(message)``) and
    the running :func:`num_characters` count.  Another layout of the same play (``lead``: the transcript
    that plays the calls) numbers its calls alike, so it reuses the lead's text of each call and answer
    and only writes its own assistant turns.  ``keep_messages=False`` skips the message dicts (the build
    needs only the text).
    """

    def __init__(self, name: str, game_: game.Game, goal: str, lead: Optional["_Transcript"] = None, keep_messages: bool = True):
        self.name = name
        self.game = game_
        self.lead = lead
        self.keep_messages = keep_messages
        self.calls = 0
        self.turns = 0
        self.observations: List[str] = []
        # Per call, in call order: its JSON text in the assistant message, its tool message's JSON text,
        # and its characters (name, JSON arguments and answer).
        self.call_texts: List[str] = []
        self.answer_texts: List[str] = []
        self.call_characters: List[int] = []
        user = {"role": "user", "content": prompts.user_prompt(goal)}
        self.messages: List[Message] = [{"role": "system", "content": prompts.SYSTEM_PROMPT}, user] if keep_messages else []
        self.encoded: List[str] = [_system_json(), _dumps(user)]
        self.characters = len(prompts.SYSTEM_PROMPT) + len(user["content"])

    def turn(self, intent: str, calls: Sequence[Tuple[str, Dict[str, Any]]]) -> List[str]:
        """One assistant turn making ``calls`` (tool name, arguments); returns the engine's answers."""
        first = self.calls
        self.calls = last = first + len(calls)
        self.turns += 1
        lead = self.lead
        if lead is None:
            self._play(first, calls)
            lead = self
        answers = lead.observations[first:last]
        self.encoded.append('{"role": "assistant", "content": %s, "tool_calls": [%s]}' % (_string(intent), ", ".join(lead.call_texts[first:last])))
        self.encoded.extend(lead.answer_texts[first:last])
        self.characters += len(intent) + sum(lead.call_characters[first:last])
        if self.keep_messages:
            tool_calls = [
                {"id": "call_%d" % number, "type": "function", "function": {"name": tool, "arguments": arguments}}
                for number, (tool, arguments) in enumerate(calls, first + 1)
            ]
            self.messages.append({"role": "assistant", "content": intent, "tool_calls": tool_calls})
            self.messages.extend(
                {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": answer}
                for call, answer in zip(tool_calls, answers)
            )
        return answers

    def _play(self, first: int, calls: Sequence[Tuple[str, Dict[str, Any]]]) -> None:
        """Play ``calls`` (numbered from ``first + 1``) and keep their texts; an ``Error`` answer raises."""
        play = self.game.call
        for number, (tool, arguments) in enumerate(calls, first + 1):
            answer = play(tool, arguments)
            if answer.startswith("Error"):
                raise SftError("%s: call_%d %s was rejected: %s" % (self.name, number, tool, answer))
            arguments_json = _dumps(arguments)
            name = _string(tool)
            self.call_texts.append('{"id": "call_%d", "type": "function", "function": {"name": %s, "arguments": %s}}' % (number, name, arguments_json))
            self.answer_texts.append('{"role": "tool", "tool_call_id": "call_%d", "name": %s, "content": %s}' % (number, name, _string(answer)))
            self.call_characters.append(len(tool) + len(arguments_json) + len(answer))
            self.observations.append(answer)

    def verdict(self) -> game.Verdict:
        """The engine's verdict on the episode just played (raises :class:`SftError` unless it scores 1.0)."""
        verdict = game.judge(self.game, self.calls, self.observations)
        if not verdict.success:
            raise SftError("%s: the conversation does not reach the goal: %s" % (self.name, verdict.reason))
        return verdict


def _item_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def look_up_recipes(transcript: _Transcript, targets: Sequence[str], crafted: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """The look-up turns: the targets first, then, level by level, the ingredients the plan crafts.

    The next level is read from the ``get_info`` answer just printed, so every name the assistant asks
    about is one it has seen.  Returns ``{item: the get_info entry printed for it}``.
    """
    to_craft = set(crafted)
    printed: Dict[str, Dict[str, Any]] = {}
    level = list(targets)
    intent = "I'll look up the %s of %s." % ("recipe" if len(level) == 1 else "recipes", _item_list(level))
    while level:
        (answer,) = transcript.turn(intent, [("get_info", {"items": level})])
        entries = json.loads(answer)
        for entry in entries:
            printed[entry["item"]] = entry
        following: Dict[str, None] = {}  # ordered set: first mention first
        for entry in entries:
            for recipe in entry["recipes"]:
                for ingredient in recipe["ingredients"]:
                    if ingredient in to_craft and ingredient not in printed:
                        following[ingredient] = None
        level = list(following)
        subject = "That recipe needs" if len(entries) == 1 else "Those recipes need"
        if len(level) == 1:
            intent = "%s %s, which I have to craft; I'll look it up." % (subject, level[0])
        else:
            intent = "%s %d more items I have to craft; I'll look them up." % (subject, len(level))
    return printed


def plan_crafts(row: Mapping[str, Any], printed: Mapping[str, Mapping[str, Any]]) -> List[List[Tuple[str, int, Dict[str, int]]]]:
    """The gold crafts as ``(item, total, ingredients)``, in groups of one crafting depth, shallowest first.

    An item's ingredients are all shallower than it, so the crafts of one depth are independent of each
    other and every group only uses what the groups before it made.
    """
    groups: Dict[int, List[Tuple[str, int, Dict[str, int]]]] = {}
    for item, total, ingredients in records.gold_steps(row):
        if item not in printed:
            raise SftError("%s: the gold trajectory crafts %s, which no recipe looked up needs" % (row["name"], item))
        groups.setdefault(printed[item]["crafting_depth"], []).append((item, total, ingredients))
    return [groups[depth] for depth in sorted(groups)]


def conversation(row: Mapping[str, Any], world: game.World, parallel: bool = True) -> List[Message]:
    """The messages of one task row, every tool message the engine's answer (raises :class:`SftError`).

    ``parallel=True`` makes each crafting depth one assistant turn with several tool calls;
    ``parallel=False`` makes every craft its own turn.
    """
    return _play(row, world, parallel).messages


def _play(row: Mapping[str, Any], world: game.World, parallel: bool) -> _Transcript:
    """Render and play one conversation on a fresh episode; it must win (see the module docstring)."""
    return _play_layouts(row, world, (parallel,))[0]


class _Layouts:
    """Several layouts of one play: the first transcript plays each call, the others reuse its texts."""

    def __init__(self, transcripts: Sequence[_Transcript]):
        self.transcripts = transcripts

    def turn(self, intent: str, calls: Sequence[Tuple[str, Dict[str, Any]]]) -> List[str]:
        answers = self.transcripts[0].turn(intent, calls)
        for transcript in self.transcripts[1:]:
            transcript.turn(intent, calls)
        return answers


def _craft_turns(transcript: _Transcript, parallel: bool, number: int, group: Sequence[Tuple[str, int, Dict[str, int]]], depth: int,
                 calls: Sequence[Tuple[str, Dict[str, Any]]]) -> None:
    """The turns crafting one depth's group: one turn (``parallel``) or one per craft."""
    if parallel:
        lead = "I have every recipe I need, so I'll craft from the bottom up. " if number == 0 else ""
        what = "the %d items" % len(group) if len(group) > 1 else "the item"
        transcript.turn("%sCrafting %s of depth %d." % (lead, what, depth), calls)
        return
    for position, (call, (item, total, _)) in enumerate(zip(calls, group)):
        lead = "I have every recipe I need, so I'll craft from the bottom up. " if number == position == 0 else ""
        transcript.turn("%sCrafting %d %s (depth %d)." % (lead, total, item, depth), [call])


def _play_layouts(row: Mapping[str, Any], world: game.World, layouts: Sequence[bool], keep_messages: bool = True) -> List[_Transcript]:
    """One conversation per layout (``True``: parallel), all from a single play on a fresh episode.

    The layouts make the same tool calls in the same order (the sequential one only gives each craft its
    own turn), so the engine answers them alike: the first layout plays every call and the others take its
    answers.  That one play is the verification of every layout: each answer is checked as it comes and
    the episode must score 1.0 (:meth:`_Transcript.verdict`).
    """
    task = records.engine_task(row)
    lead = _Transcript(row["name"], game.Game.for_task(world, task), row["goal"], keep_messages=keep_messages)
    transcripts = [lead] + [_Transcript(row["name"], lead.game, row["goal"], lead, keep_messages) for _ in layouts[1:]]
    both = _Layouts(transcripts)
    both.turn("First I'll check what I have in my inventory.", [("view_inventory", {})])
    targets = task["target_items"]
    printed = look_up_recipes(both, list(targets), (step["item"] for step in row["gold_trajectory"]))  # type: ignore[arg-type]
    for number, group in enumerate(plan_crafts(row, printed)):
        depth = printed[group[0][0]]["crafting_depth"]
        calls = [("craft", {"ingredients": ingredients, "target": [item, total]}) for item, total, ingredients in group]
        for transcript, parallel in zip(transcripts, layouts):  # the lead first: it plays the calls
            _craft_turns(transcript, parallel, number, group, depth, calls)
    both.turn("Every target is in my inventory now, so I'm done.", [("finish", {"message": records.finish_message(targets)})])
    lead.verdict()
    return transcripts


def tool_calls_of(messages: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Every tool call of a conversation, in order, in the OpenAI form the engine's replay reads."""
    return [call for message in messages if message["role"] == "assistant" for call in message.get("tool_calls", ())]


def verify(row: Mapping[str, Any], world: game.World, messages: Sequence[Mapping[str, Any]]) -> game.Verdict:
    """Replay a conversation's tool calls on a fresh episode; raise :class:`SftError` unless it scores 1.0
    and each tool message is exactly what the engine prints for its call."""
    calls = tool_calls_of(messages)
    verdict = game.replay(world, records.engine_task(row), calls)
    if not verdict.success:
        raise SftError("%s: the conversation does not reach the goal: %s" % (row["name"], verdict.reason))
    answers = [message for message in messages if message["role"] == "tool"]
    if len(answers) != len(calls):
        raise SftError("%s: %d tool calls but %d tool messages" % (row["name"], len(calls), len(answers)))
    for call, answer, printed in zip(calls, answers, verdict.observations):
        if answer["tool_call_id"] != call["id"] or answer["name"] != call["function"]["name"]:
            raise SftError("%s: tool message %s does not answer call %s" % (row["name"], answer["tool_call_id"], call["id"]))
        if answer["content"] != printed:
            raise SftError("%s: the answer to %s is not what the engine prints" % (row["name"], call["id"]))
    return verdict


# ----------------------------------------------------------------------------------------------- sft rows


num_characters = prompts.num_characters  # the size column's definition, shared with sft-recursive


def sft_row(row: Mapping[str, Any], world: game.World, parallel: bool = True) -> Row:
    """The sft row of a task row, messages and tools as Python objects (see :func:`encode_row`)."""
    return _row(row, _play(row, world, parallel), encoded=False)


def _row(row: Mapping[str, Any], transcript: _Transcript, encoded: bool) -> Row:
    """The sft row of a played transcript; ``encoded``: messages and tools as JSON text (:func:`encode_row`)."""
    return dict(
        {column: row[column] for column in SFT_TASK_COLUMNS},
        messages=transcript.encoded if encoded else transcript.messages,
        tools=tools_json() if encoded else prompts.tool_schemas(),
        num_turns=transcript.turns,
        num_tool_calls=transcript.calls,
        num_characters=transcript.characters,
    )


def encode_row(row: Mapping[str, Any]) -> Row:
    """``row`` with each message and the tools as JSON text: how ``datasets.Json`` columns are stored."""
    encoded = dict(row)
    encoded["messages"] = [json.dumps(message) for message in row["messages"]]
    encoded["tools"] = json.dumps(row["tools"])
    return encoded


def build_rows(task_rows: Sequence[Mapping[str, Any]], world: game.World, parallel: bool = True, progress: bool = False) -> List[Row]:
    """Encoded sft rows for ``task_rows``, in their order."""
    return build_layouts(task_rows, world, (parallel,), progress)[0]


def build_layouts(task_rows: Sequence[Mapping[str, Any]], world: game.World, layouts: Sequence[bool] = (True, False), progress: bool = False) -> List[List[Row]]:
    """Encoded sft rows for ``task_rows`` in each layout (``True``: parallel), every task played once."""
    built: List[List[Row]] = [[] for _ in layouts]
    for row in tqdm(task_rows, desc="rendering sft conversations", unit="task", disable=not progress or None):
        for rows, transcript in zip(built, _play_layouts(row, world, layouts, keep_messages=False)):
            rows.append(_row(row, transcript, encoded=True))
    return built


# The last records' rows per (split, parallel): the sft config and its per-difficulty configs share one rendering.
_cache: Dict[str, Any] = {"records": None, "rows": {}}


def clear_cache() -> None:
    """Forget the rendered rows (the next :func:`sft_rows` renders again)."""
    _cache.update(records=None, rows={})


def sft_rows(data: Records, split: str, parallel: bool = True, progress: bool = True) -> List[Row]:
    """The encoded rows of one split of the sft conversations (every difficulty), rendered once per records."""
    if _cache["records"] is not data:
        _cache["records"], _cache["rows"] = data, {}
    key = (split, parallel)
    rows = _cache["rows"].get(key)
    if rows is None:  # both layouts at once: one play each task serves the sft and sft-sequential configs
        layouts = (parallel, not parallel)
        for layout, built in zip(layouts, build_layouts(data.tasks[split], data.world, layouts, progress=progress)):
            _cache["rows"][(split, layout)] = built
        rows = _cache["rows"][key]
    return rows
