"""Reading tool calls back from text: every family's format, rendered here by the family's real template
(TRL 1.16's ``trl/chat_templates``), gives back exactly the calls of the conversation, with the built-in
readers and with transformers' ``parse_response``; malformed text never raises.
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import script_modules
from tcsynth import game, prompts, records, sft, toolcalls

matrix = script_modules.load("chat_template_matrix")

# Each family's template and the data change it needs (see docs/chat-template-matrix.md).
FAMILIES = {stem: matrix.READ_FIXES.get(stem) for stem in matrix.TEMPLATE_STEMS}
# Templates TRL knows a response template for (trl.chat_template_utils.add_response_schema).
PARSEABLE = ["qwen2_5", "qwen3", "qwen3_6", "qwen3_instruct_2507", "llama3_1", "llama3_2", "gptoss", "glm4moe", "gemma4", "nemotron_3_nano"]


@pytest.fixture(scope="module")
def rows(data, world):
    """sft-sequential rows of three val tasks of different difficulties."""
    picks = [next(row for row in data.tasks["val"] if row["difficulty"] == d) for d in ("easy", "hard", "extreme")]
    return [sft.sft_row(row, world, parallel=False) for row in picks]


def completion_text(row, template, fix=None):
    """What the model writes in ``row``, as ``template`` renders it: the text after the goal."""
    messages = fix(row["messages"]) if fix else row["messages"]
    text, _ = matrix.render(messages, row["tools"], template)
    goal = row["messages"][1]["content"]
    return text[text.index(goal) + len(goal) :]


def gold_calls(row):
    return [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in sft.tool_calls_of(row["messages"])]


def tiny_tokenizer(template):
    """A tokenizer made on the spot carrying ``template`` and TRL's response template for it."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import add_response_schema

    core = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")
    tokenizer.chat_template = matrix.read_template(template)
    return add_response_schema(tokenizer)


# ------------------------------------------------------------------------------------ the built-in readers


@pytest.mark.parametrize("template", sorted(FAMILIES))
def test_each_family_reads_back_exactly_the_calls_it_rendered(rows, template):
    for row in rows:
        assert toolcalls.text_tool_calls(completion_text(row, template, FAMILIES[template])) == gold_calls(row), (template, row["name"])


@pytest.mark.parametrize("template", ["qwen2_5", "qwen3_6", "glm4moe", "gemma4", "nemotron_3_nano", "deepseekv3"])
def test_several_calls_a_turn_read_back_in_order(data, world, template):
    row = sft.sft_row(data.tasks["val"][0], world, parallel=True)
    assert max(len(m.get("tool_calls", ())) for m in row["messages"]) > 1
    assert toolcalls.text_tool_calls(completion_text(row, template, FAMILIES[template])) == gold_calls(row)


def test_the_formats_one_line_each():
    craft = {"name": "craft", "arguments": {"ingredients": {"a": 2}, "target": ["b", 1]}}
    finish = {"name": "finish", "arguments": {"message": "42"}}  # a string that looks like a number
    cases = {
        "hermes": '<tool_call>\n{"name": "finish", "arguments": {"message": "42"}}\n</tool_call>',
        "xml": "<tool_call>\n<function=finish>\n<parameter=message>\n42\n</parameter>\n</function>\n</tool_call>",
        "glm": "<tool_call>finish\n<arg_key>message</arg_key>\n<arg_value>42</arg_value>\n</tool_call>",
        "llama": '{"name": "finish", "parameters": {"message": "42"}}',
        "harmony": '<|start|>assistant to=functions.finish<|channel|>commentary json<|message|>{"message": "42"}<|call|>',
        "deepseek": (
            '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>finish\n```json\n{"message": "42"}\n```<｜tool▁call▁end｜>'
        ),
        "gemma": '<|tool_call>call:finish{message:<|"|>42<|"|>}<tool_call|>',
    }
    for name, text in cases.items():
        calls = [game.parse_tool_call(call) for call in toolcalls.text_tool_calls(text)]
        assert calls == [("finish", finish["arguments"])], name
    xml_craft = (
        '<tool_call>\n<function=craft>\n<parameter=ingredients>\n{"a": 2}\n</parameter>\n'
        '<parameter=target>\n["b", 1]\n</parameter>\n</function>\n</tool_call>'
    )
    assert toolcalls.text_tool_calls(xml_craft) == [craft]
    gemma_craft = '<|tool_call>call:craft{ingredients:{a:2},target:[<|"|>b<|"|>,1]}<tool_call|>'
    assert toolcalls.text_tool_calls(gemma_craft) == [craft]


def test_a_tool_schema_or_other_json_is_not_a_call():
    schema = json.dumps(prompts.TOOLS[3]["function"])  # has "name" and "parameters"
    assert toolcalls.text_tool_calls("Tools: " + schema + ' and {"name": "x", "value": 1}') == []


def test_a_malformed_block_is_kept_as_text_for_the_replay_to_reject(data, world):
    calls = toolcalls.text_tool_calls('<tool_call>{not json}</tool_call> <|tool_call>call:finish{message:<|"|>x}<tool_call|>')
    assert calls == ["{not json}", '<|tool_call>call:finish{message:<|"|>x}<tool_call|>']
    verdict = game.replay(world, records.engine_task(data.tasks["val"][0]), calls)
    assert verdict.reward == 0.0 and verdict.calls == 0


def test_hermes_and_message_readers_keep_their_contract():
    call = {"name": "view_inventory", "arguments": {}}
    assert toolcalls.hermes_tool_calls('<tool_call>{"name": "view_inventory", "arguments": {}}</tool_call>') == [call]
    assert toolcalls.hermes_tool_calls('{"name": "view_inventory", "parameters": {}}') == []  # Hermes only
    message = {"role": "assistant", "content": '{"name": "view_inventory", "parameters": {}}'}
    assert toolcalls.message_tool_calls(message) == []
    assert toolcalls.message_tool_calls(message, toolcalls.text_tool_calls) == [call]
    assert toolcalls.message_tool_calls({"role": "assistant", "tool_calls": [call]}) == [call]
    block = '<tool_call>{"name": "view_inventory"}</tool_call>'
    parts = {"role": "assistant", "content": [{"type": "text", "text": block}, {"type": "text", "text": 9}]}
    assert toolcalls.message_tool_calls(parts) == [{"name": "view_inventory"}]


# ------------------------------------------------------------------------------------- transformers' parser


@pytest.mark.parametrize("template", PARSEABLE)
def test_transformers_parse_response_reads_each_family(rows, template, monkeypatch):
    tokenizer = tiny_tokenizer(template)
    assert tokenizer.response_template is not None
    # Prove transformers did the reading: the built-in readers must not be reached.
    monkeypatch.setattr(toolcalls, "builtin_tool_calls", lambda *a, **k: pytest.fail("fell back on the built-in reader"))
    for row in rows[:2]:
        calls = toolcalls.text_tool_calls(completion_text(row, template), tokenizer=tokenizer)
        assert calls == gold_calls(row), template


def test_a_turn_transformers_cannot_parse_falls_back(rows, monkeypatch):
    tokenizer = tiny_tokenizer("qwen2_5")

    def refuse(*args, **kwargs):
        raise ValueError("cannot parse")

    monkeypatch.setattr(tokenizer, "parse_response", refuse)
    row = rows[0]
    assert toolcalls.text_tool_calls(completion_text(row, "qwen2_5"), tokenizer=tokenizer) == gold_calls(row)


# ---------------------------------------------------------------------------------------------- fuzzing

FRAGMENTS = [
    "<tool_call>", "</tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "<arg_key>",
    "</arg_key>", "<arg_value>", "</arg_value>", '{"name": ', '"parameters": ', '"arguments": ', "{", "}", "[", "]",
    "to=functions.", "<|channel|>", "<|message|>", "<|call|>", "<|start|>", "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>", "\n```json\n", "\n```", "<｜tool▁call▁end｜>", "<|tool_call>call:", "<tool_call|>", '<|"|>',
    "craft", "finish", ":", ",", '"', "\n", "\\", "1e999", "NaN",
]
texts = st.one_of(st.text(max_size=300), st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_arbitrary_text_never_raises(text):
    calls = toolcalls.text_tool_calls(text)
    assert isinstance(calls, list)
    for call in calls:
        assert isinstance(call, (dict, str))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts)
def test_arbitrary_text_never_raises_through_transformers(text):
    assert isinstance(toolcalls.text_tool_calls(text, tokenizer=qwen_tokenizer()), list)


@functools.lru_cache(maxsize=None)
def qwen_tokenizer():
    return tiny_tokenizer("qwen3_6")
