"""Tool calls read back from what a model writes, in the format of each chat-template family.

A chat template turns an assistant message's ``tool_calls`` into text, and a model trained on that template
writes its calls the same way.  :func:`text_tool_calls` reads every call of a text, in the order written,
whatever family wrote it.  Each format below was read off a gold conversation rendered with the family's
real template (TRL 1.16's ``trl/chat_templates/*.jinja``; ``tests/test_toolcalls.py`` renders them again):

==========================  ==========================================================================
family (template)           one call as the template renders it
==========================  ==========================================================================
Hermes: Qwen2.5, Qwen3,     ``<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>``
Qwen3-2507
XML: Qwen3.5/3.6/3.8,       ``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>``
Nemotron 3                  (a string VALUE raw, anything else as JSON)
GLM-4-MoE                   ``<tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n</tool_call>``
Llama 3.1 / 3.2             ``{"name": NAME, "parameters": {...}}`` (bare JSON, one call per turn)
gpt-oss (harmony)           ``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>``
DeepSeek-V3                 ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```<｜tool▁call▁end｜>``
Gemma 4                     ``<|tool_call>call:NAME{key:value,...}<tool_call|>`` (bare keys, strings in ``<|"|>``)
==========================  ==========================================================================

Each call comes back as ``{"name", "arguments"}``, the form :func:`tcsynth.game.parse_tool_call` reads.  A
block that is clearly meant as a call but cannot be read (JSON that does not parse, say) comes back as its
raw text, so that a replay reports it as a bad call instead of silently skipping it.  Malformed text never
raises: whatever cannot be read is either such a raw block or nothing.

Given a tokenizer that carries a ``response_template`` (transformers >= 5.13; TRL's
``add_response_schema`` sets one for the known templates), :func:`text_tool_calls` uses transformers' own
``tokenizer.parse_response`` on each assistant turn of the text instead, and falls back on the readers
here for a turn it cannot parse.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import prompts

Found = Tuple[int, int, Any]  # (start, end, call or raw text) of one call in a text

# -------------------------------------------------------------------------------------------- the formats

_HERMES_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_XML_FUNCTION = re.compile(r"^<function=([^>\n]+)>(.*?)(?:</function>|$)", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
_GLM_ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_GLM_NAME = re.compile(r"^([^\s<]+)")
_HARMONY = re.compile(
    r"to=functions\.([^\s<]+)((?:(?!<\|message\|>|<\|start\|>).)*)<\|message\|>(.*?)(?:<\|call\|>|<\|end\|>|<\|return\|>|$)",
    re.DOTALL,
)
_DEEPSEEK = re.compile(
    "<｜tool▁call▁begin｜>([^<]*?)<｜tool▁sep｜>([^\n]+)\n```(?:json)?\n(.*?)\n```\\s*(?:<｜tool▁call▁end｜>|$)",
    re.DOTALL,
)
_GEMMA = re.compile(r"<\|tool_call>call:([\w.\-]+)(\{.*?\})<tool_call\|>", re.DOTALL)
_GEMMA_STRING = '<|"|>'
_GEMMA_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][\w.\-]*)\s*:")
_JSON_START = re.compile(r'\{\s*"name"\s*:')


def _string_parameters(tools: Iterable[Mapping[str, Any]]) -> Dict[str, set]:
    """``{tool name: {parameter names typed string}}`` of JSON tool schemas."""
    strings: Dict[str, set] = {}
    for tool in tools:
        function = tool.get("function", tool) if isinstance(tool, Mapping) else {}
        properties = (function.get("parameters") or {}).get("properties") or {}
        strings[function.get("name")] = {
            key for key, schema in properties.items() if isinstance(schema, Mapping) and schema.get("type") == "string"
        }
    return strings


_OUR_STRING_PARAMETERS = _string_parameters(prompts.TOOLS)


def _xml_value(tool: str, key: str, text: str, strings: Mapping[str, set]) -> Any:
    """One XML-rendered argument: raw text for a string parameter, else JSON (raw text when it is not JSON).

    Templates write a string value as it is and anything else with ``tojson``, so only the schema can tell
    ``"3"`` from ``3``.
    """
    if key in strings.get(tool, ()):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_call(text: str) -> Any:
    """A Hermes block's ``{"name", "arguments"}`` object, or the raw text when it is not a JSON object."""
    try:
        call = json.loads(text)
    except ValueError:
        return text
    if isinstance(call, dict) and "parameters" in call and "arguments" not in call:
        call = dict(call, arguments=call["parameters"])
        del call["parameters"]
    return call


def _named_call(name: str, arguments: str) -> Dict[str, Any]:
    """A call whose arguments were written as JSON text: parsed when it is JSON, else left as text (which
    :func:`tcsynth.game.parse_tool_call` then reports)."""
    arguments = arguments.strip()
    try:
        parsed: Any = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    return {"name": name.strip(), "arguments": parsed}


def _tool_call_block(body: str, strings: Mapping[str, set]) -> Any:
    """The call inside ``<tool_call>...</tool_call>``: Hermes JSON, Qwen/Nemotron XML or GLM-4 key/values."""
    if body.startswith("{"):
        return _json_call(body)
    function = _XML_FUNCTION.match(body)
    if function:
        name = function.group(1).strip()
        arguments = {key.strip(): _xml_value(name, key.strip(), value, strings) for key, value in _XML_PARAMETER.findall(function.group(2))}
        return {"name": name, "arguments": arguments}
    name = _GLM_NAME.match(body)
    if name:
        arguments = {key.strip(): _xml_value(name.group(1), key.strip(), value, strings) for key, value in _GLM_ARGUMENT.findall(body)}
        return {"name": name.group(1), "arguments": arguments}
    return body


def _gemma_arguments(text: str) -> Any:
    """Gemma 4's argument object (bare keys, strings between ``<|"|>``) as JSON, or the raw text."""
    pieces = text.split(_GEMMA_STRING)
    if len(pieces) % 2 == 0:  # an unclosed string
        return text
    out = []
    for number, piece in enumerate(pieces):
        out.append(json.dumps(piece) if number % 2 else _GEMMA_BARE_KEY.sub(r'\1"\2":', piece))
    try:
        return json.loads("".join(out))
    except ValueError:
        return text


def _found_blocks(text: str, strings: Mapping[str, set]) -> List[Found]:
    """Every call written between markers (all formats but Llama's bare JSON), with its span."""
    found: List[Found] = []
    for match in _HERMES_BLOCK.finditer(text):
        found.append((match.start(), match.end(), _tool_call_block(match.group(1), strings)))
    for match in _HARMONY.finditer(text):
        found.append((match.start(), match.end(), _named_call(match.group(1), match.group(3))))
    for match in _DEEPSEEK.finditer(text):
        found.append((match.start(), match.end(), _named_call(match.group(2), match.group(3))))
    for match in _GEMMA.finditer(text):
        arguments = _gemma_arguments(match.group(2))
        call = {"name": match.group(1), "arguments": arguments} if isinstance(arguments, dict) else match.group(0)
        found.append((match.start(), match.end(), call))
    return found


def _bare_json_calls(text: str, taken: Sequence[Tuple[int, int]]) -> List[Found]:
    """Llama 3's bare ``{"name": ..., "parameters": {...}}`` objects (``arguments`` too), outside ``taken``."""
    decoder = json.JSONDecoder()
    found: List[Found] = []
    position = 0
    while True:
        match = _JSON_START.search(text, position)
        if match is None:
            return found
        start = match.start()
        if any(begin <= start < end for begin, end in taken):
            position = start + 1
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        if _looks_like_call(value):
            found.append((start, end, _json_call(text[start:end])))
            position = end
        else:
            position = start + 1


# A bare JSON object is a call only when it holds nothing but a call's keys: a tool schema (which also has
# "name" and "parameters") or any other JSON a model quotes is not.
_CALL_KEYS = {"name", "arguments", "parameters", "id", "type"}


def _looks_like_call(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and ("parameters" in value or "arguments" in value)
        and set(value) <= _CALL_KEYS
    )


def _drop_nested(found: List[Found]) -> List[Found]:
    """The outermost calls, in text order (a call inside another call's span is part of that call)."""
    kept: List[Found] = []
    for item in sorted(found, key=lambda item: (item[0], -item[1])):
        if kept and item[0] < kept[-1][1]:
            continue
        kept.append(item)
    return kept


def builtin_tool_calls(text: str, tools: Optional[Iterable[Mapping[str, Any]]] = None) -> List[Any]:
    """Every tool call written in ``text`` in any family's format (see the module docstring), in order.

    ``tools`` (JSON schemas, default the game's four) says which arguments are strings, which XML formats
    cannot tell from the text alone.
    """
    if not isinstance(text, str):
        return []
    strings = _OUR_STRING_PARAMETERS if tools is None else _string_parameters(tools)
    blocks = _drop_nested(_found_blocks(text, strings))
    taken = [(start, end) for start, end, _ in blocks]
    return [call for _, _, call in _drop_nested(blocks + _bare_json_calls(text, taken))]


# ----------------------------------------------------------------------------------- transformers' parsing

_ANCHOR_FIELDS = ("start_anchor", "start_anchor_pattern")


def _turns(text: str, template: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """``text`` cut at each start of an assistant turn the response template names: ``[(prefix, turn)]``."""
    if template.get("start_anchor") is not None:
        anchor = re.compile(re.escape(template["start_anchor"]))
    elif template.get("start_anchor_pattern") is not None:
        anchor = re.compile(template["start_anchor_pattern"])
    else:
        return [("", text)]
    starts = [match for match in anchor.finditer(text)]
    if not starts:
        return [("", text)]
    turns = []
    for number, match in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(text)
        turns.append((text[: match.end()], text[match.end() : end]))
    return turns


def parsed_tool_calls(text: str, tokenizer: Any, tools: Optional[Sequence[Mapping[str, Any]]] = None) -> List[Any]:
    """The calls of ``text`` read by ``tokenizer.parse_response``, one assistant turn at a time.

    A turn transformers cannot parse (it raises) is read with :func:`builtin_tool_calls` instead.
    """
    template = getattr(tokenizer, "response_template", None)
    if not isinstance(template, Mapping) or not isinstance(text, str):
        return builtin_tool_calls(text, tools)
    calls: List[Any] = []
    for prefix, turn in _turns(text, template):
        try:
            message = tokenizer.parse_response(turn, prefix=prefix, tools=list(tools) if tools is not None else prompts.tool_schemas())
        except Exception:  # noqa: BLE001 - a model's text, however strange, must not stop training
            calls.extend(builtin_tool_calls(turn, tools))
            continue
        for call in (message.get("tool_calls") or []) if isinstance(message, Mapping) else []:
            body = call.get("function", call) if isinstance(call, Mapping) else call
            calls.append({"name": body.get("name"), "arguments": body.get("arguments", {})} if isinstance(body, Mapping) else body)
    return calls


def text_tool_calls(text: Any, tokenizer: Any = None, tools: Optional[Sequence[Mapping[str, Any]]] = None) -> List[Any]:
    """Every tool call written in ``text``, in order: transformers' parser when ``tokenizer`` has a
    ``response_template``, else :func:`builtin_tool_calls`.  Never raises; anything not text has no calls."""
    if not isinstance(text, str):
        return []
    if tokenizer is not None and getattr(tokenizer, "response_template", None) is not None:
        return parsed_tool_calls(text, tokenizer, tools)
    return builtin_tool_calls(text, tools)


# -------------------------------------------------------------------- messages (moved from tcsynth.env)


def hermes_tool_calls(text: str) -> List[Any]:
    """The calls written as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks in ``text``.

    A block that is not JSON is kept as its raw text, so the caller sees (and reports) a malformed call
    instead of silently dropping it.
    """
    calls: List[Any] = []
    for block in _HERMES_BLOCK.findall(text):
        try:
            calls.append(json.loads(block))
        except ValueError:
            calls.append(block)
    return calls


def message_text(message: Mapping[str, Any]) -> Optional[str]:
    """The text of a message's ``content``: a string, or the text parts of a list of content parts."""
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return content if isinstance(content, str) else None


def message_tool_calls(message: Mapping[str, Any], read: Callable[[str], List[Any]] = hermes_tool_calls) -> List[Any]:
    """The tool calls of one assistant message: its ``tool_calls``, else the calls ``read`` finds in its
    text (Hermes blocks by default; :func:`text_tool_calls` reads every family's format)."""
    tool_calls = message.get("tool_calls")
    if tool_calls:
        return list(tool_calls) if isinstance(tool_calls, list) else [tool_calls]
    content = message_text(message)
    return read(content) if content is not None else []


# ------------------------------------------------------------------- data fixes for templates (dataset.map)


def string_arguments(messages: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """``messages`` with every tool call's ``arguments`` as JSON text, for templates that concatenate it
    as a string (DeepSeek-V3's original template).

    >>> dataset = dataset.map(lambda row: {"messages": string_arguments(row["messages"])})
    """
    fixed = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                dict(call, function=dict(call["function"], arguments=json.dumps(call["function"]["arguments"])))
                if not isinstance(call["function"]["arguments"], str) else dict(call)
                for call in message["tool_calls"]
            ]
        fixed.append(message)
    return fixed


def inline_tool_calls(messages: Sequence[Mapping[str, Any]], style: str = "hermes") -> List[Dict[str, Any]]:
    """``messages`` with the tool calls written into the assistant text and the tool results as plain
    turns, for templates that render only ``content`` (Phi-3.5, the Llama 3 training template).

    ``style="hermes"``: calls as ``<tool_call>`` JSON blocks, results as a ``user`` turn of
    ``<tool_response>`` blocks.  ``style="llama3"``: the call as Llama 3.1's ``{"name", "parameters"}``
    JSON, each result as an ``ipython`` turn; like Llama 3.1's own template it takes one call a turn
    (``ValueError`` otherwise: use ``sft-sequential``).  Every call stays a call :func:`builtin_tool_calls`
    reads back.

    >>> dataset = dataset.map(lambda row: {"messages": inline_tool_calls(row["messages"])})
    """
    if style not in ("hermes", "llama3"):
        raise ValueError("style must be 'hermes' or 'llama3', got %r" % (style,))
    fixed: List[Dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "assistant" and message.get("tool_calls"):
            calls = [call["function"] for call in message["tool_calls"]]
            if style == "hermes":
                text = (message.get("content") or "").strip()
                blocks = ["<tool_call>\n%s\n</tool_call>" % json.dumps({"name": c["name"], "arguments": c["arguments"]}) for c in calls]
                fixed.append({"role": "assistant", "content": "\n".join(([text] if text else []) + blocks)})
            elif len(calls) > 1:
                raise ValueError("Llama 3 makes one tool call a turn, this turn makes %d: use the sft-sequential config" % len(calls))
            else:
                # Llama 3.1 writes a call as the whole turn, with no text beside it.
                fixed.append({"role": "assistant", "content": json.dumps({"name": calls[0]["name"], "parameters": calls[0]["arguments"]})})
        elif role == "tool":
            if style == "llama3":
                fixed.append({"role": "ipython", "content": message["content"]})
            elif fixed and fixed[-1]["role"] == "user" and fixed[-1].get("tool_results"):
                fixed[-1]["content"] += "\n<tool_response>\n%s\n</tool_response>" % message["content"]
            else:
                text = "<tool_response>\n%s\n</tool_response>" % message["content"]
                fixed.append({"role": "user", "content": text, "tool_results": True})
        else:
            fixed.append({"role": role, "content": message.get("content") or ""})
    for message in fixed:
        message.pop("tool_results", None)
    return fixed
