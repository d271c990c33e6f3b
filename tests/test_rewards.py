"""The TRL reward: gold completions score 1.0, anything short of the goal 0.0, rows without a task None."""

from __future__ import annotations

import copy
import json
import pickle
import threading

import pytest

import script_modules
from tcsynth import records
from tcsynth.rewards import completion_tool_calls, get_textcraft_reward, textcraft_reward


def conversational(calls):
    """One assistant message carrying every call in OpenAI form (arguments as JSON text)."""
    return [{
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_%d" % n, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for n, c in enumerate(calls)
        ],
    }]


def hermes(calls):
    """Plain text with one <tool_call> block per call."""
    return "Let me craft.\n" + "\n".join("<tool_call>\n%s\n</tool_call>" % json.dumps(c) for c in calls)


def columns(rows):
    return {"target_items": [r["target_items"] for r in rows], "initial_inventory": [r["initial_inventory"] for r in rows]}


@pytest.fixture(scope="module")
def val(data):
    return data.tasks["val"]


class TestGold:
    def test_every_val_task_conversational(self, val):
        completions = [conversational(records.gold_tool_calls(row)) for row in val]
        assert textcraft_reward(completions, **columns(val)) == [1.0] * len(val)

    def test_hermes_text(self, val):
        rows = val[::25]
        assert textcraft_reward([hermes(records.gold_tool_calls(r)) for r in rows], **columns(rows)) == [1.0] * len(rows)

    def test_one_call_per_assistant_message_with_tool_results_between(self, val):
        row = val[3]
        completion = []
        for message in conversational(records.gold_tool_calls(row)):
            for call in message["tool_calls"]:
                completion.append({"role": "assistant", "content": None, "tool_calls": [call]})
                completion.append({"role": "tool", "tool_call_id": call["id"], "content": "ignored: the replay recomputes it"})
        assert textcraft_reward([completion], **columns([row])) == [1.0]

    def test_task_columns_as_mappings(self, val):
        row = val[0]
        reward = textcraft_reward(
            [conversational(records.gold_tool_calls(row))],
            target_items=[records.list_to_counts(row["target_items"])],
            initial_inventory=[records.list_to_counts(row["initial_inventory"])],
        )
        assert reward == [1.0]

    def test_other_columns_are_ignored(self, val):
        row = val[0]
        extra = {"prompts": [[{"role": "user", "content": "x"}]], "completion_ids": [[1, 2]], "goal": [row["goal"]], "trainer_state": None}
        assert textcraft_reward([hermes(records.gold_tool_calls(row))], **columns([row]), **extra) == [1.0]


class TestShortOfTheGoal:
    @pytest.mark.parametrize("where", ["first", "middle", "last"])
    def test_one_craft_dropped(self, val, where):
        completions = []
        for row in val:
            calls = records.gold_tool_calls(row)
            crafts = len(calls) - 1
            drop = {"first": 0, "middle": crafts // 2, "last": crafts - 1}[where]
            completions.append(conversational(calls[:drop] + calls[drop + 1 :]))
        assert textcraft_reward(completions, **columns(val)) == [0.0] * len(val)

    def test_no_finish(self, val):
        row = val[0]
        assert textcraft_reward([hermes(records.gold_tool_calls(row)[:-1])], **columns([row])) == [0.0]

    def test_empty_finish_message(self, val):
        row = val[0]
        assert textcraft_reward([hermes(records.gold_tool_calls(row, message=""))], **columns([row])) == [0.0]

    def test_a_call_after_finish(self, val):
        row = val[0]
        calls = records.gold_tool_calls(row) + [{"name": "view_inventory", "arguments": {}}]
        assert textcraft_reward([hermes(calls)], **columns([row])) == [0.0]

    def test_another_rows_gold(self, val):
        rows = [val[0], val[200]]
        swapped = [conversational(records.gold_tool_calls(rows[1])), conversational(records.gold_tool_calls(rows[0]))]
        assert textcraft_reward(swapped, **columns(rows)) == [0.0, 0.0]


class TestGarbage:
    GARBAGE = [
        None,  # not a completion at all
        42,
        "",  # empty text
        "I crafted everything, trust me.",  # text without tool calls
        "<tool_call>{not json}</tool_call>",  # a block that is not JSON
        '<tool_call>["finish"]</tool_call>',  # a block that is not an object
        '<tool_call>{"name": "finish", "arguments": "{\\"message\\": "}</tool_call>',  # arguments that are not JSON
        '<tool_call>{"name": "teleport", "arguments": {}}</tool_call>',  # an unknown tool
        '<tool_call>{"name": "finish", "arguments": {"message": 7}}</tool_call>',  # a wrong argument type
        [{"role": "assistant", "content": None, "tool_calls": "finish"}],  # tool_calls not a list
        [{"role": "assistant", "tool_calls": [None, 3, {"function": 5}]}],  # calls that are not objects
        [{"role": "assistant", "content": [{"type": "text", "text": 9}]}],  # content parts with a wrong type
        [object()],  # a message that is not a dict
        {"role": "assistant", "content": '<tool_call>{"name": "craft", "arguments": {"ingredients": [], "target": "x"}}</tool_call>'},
        [{"role": "assistant", "tool_calls": [{"function": {"name": "get_info", "arguments": {"items": [{"x": 1}]}}}]}],
        [{"role": "assistant", "tool_calls": [{"function": {"name": "craft", "arguments": {"ingredients": {"a": float("nan")}, "target": ["b", 10**30]}}}]}],
    ]

    @pytest.mark.parametrize("completion", GARBAGE)
    def test_scores_zero(self, val, completion):
        assert textcraft_reward([completion], **columns([val[0]])) == [0.0]

    @pytest.mark.parametrize("targets, inventory", [([{"item": 3}], []), ("junk", "junk"), ([{"item": "a", "count": "x"}], [])])
    def test_malformed_task_columns_score_zero(self, targets, inventory):
        assert textcraft_reward([hermes([{"name": "finish", "arguments": {"message": "m"}}])], target_items=[targets], initial_inventory=[inventory]) == [0.0]


class TestNoTask:
    def test_rows_without_a_task_are_skipped_with_none(self, val):
        row = val[0]
        completions = [hermes(records.gold_tool_calls(row))] * 2
        reward = textcraft_reward(completions, target_items=[row["target_items"], None], initial_inventory=[row["initial_inventory"], None])
        assert reward == [1.0, None]

    def test_no_task_columns_at_all(self):
        assert textcraft_reward(["x", "y"]) == [None, None]

    def test_mismatched_lengths_are_a_caller_error(self, val):
        with pytest.raises(ValueError, match="2 completions but 1 target_items"):
            textcraft_reward(["x", "y"], **columns(val[:1]))


class TestFunctionObject:
    def test_name_is_stable(self):
        assert textcraft_reward.__name__ == "textcraft_reward"

    def test_pickle_round_trip(self, val):
        clone = pickle.loads(pickle.dumps(textcraft_reward))
        assert clone([hermes(records.gold_tool_calls(val[0]))], **columns(val[:1])) == [1.0]

    def test_worker_threads(self, val):
        reward = get_textcraft_reward()
        results = {}

        def score(index):
            row = val[index]
            results[index] = reward([conversational(records.gold_tool_calls(row))], **columns([row]))

        threads = [threading.Thread(target=score, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {i: [1.0] for i in range(8)}

    def test_recipes_path_is_checked(self, tmp_path):
        with pytest.raises(ValueError, match="not a file"):
            get_textcraft_reward(tmp_path / "missing.json")

    def test_explicit_recipes_path(self, repo, val):
        reward = get_textcraft_reward(repo / "data" / "recipes.json")
        assert reward([hermes(records.gold_tool_calls(val[1]))], **columns(val[1:2])) == [1.0]


def test_completion_tool_calls_reads_every_shape():
    call = {"name": "view_inventory", "arguments": {}}
    assert completion_tool_calls('<tool_call>{"name": "view_inventory", "arguments": {}}</tool_call>') == [call]
    assert completion_tool_calls({"role": "assistant", "tool_calls": [call]}) == [call]
    assert completion_tool_calls([{"role": "user", "tool_calls": [call]}]) == []  # only assistant messages count
    assert completion_tool_calls(17) == []


# ---------------------------------------------------------------------------- text written by real templates

# Each family's template in TRL 1.16 and the data change it needs: the matrix script's own lists (the script
# imports transformers only when it renders, so the floor-version run of this file can still collect it).
def templates():
    matrix = load_matrix_script()
    return {stem: matrix.READ_FIXES.get(stem) for stem in matrix.TEMPLATE_STEMS}


def load_matrix_script():
    """scripts/chat_template_matrix.py as a module: its ``render`` uses TRL's templates."""
    return script_modules.load("chat_template_matrix")


TEMPLATES = templates()


def rendered_completion(row, template, messages=None):
    """The assistant side of ``row``'s conversation as ``template`` writes it (the text after the goal)."""
    matrix = load_matrix_script()
    messages = row["messages"] if messages is None else messages
    fix = TEMPLATES[template]
    if fix:
        messages = fix(messages)
    text, _ = matrix.render(messages, row["tools"], template)
    goal = row["messages"][1]["content"]
    return text[text.index(goal) + len(goal) :]


def without_finish(messages):
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "finish" and messages[-1]["role"] == "tool"
    return messages[:-2]


def one_craft_altered(messages):
    altered = copy.deepcopy(messages)
    craft = next(c for m in altered for c in m.get("tool_calls", ()) if c["function"]["name"] == "craft")
    ingredient = next(iter(craft["function"]["arguments"]["ingredients"]))
    craft["function"]["arguments"]["ingredients"][ingredient] += 1  # the wrong amount: the craft is refused
    return altered


@pytest.fixture(scope="module")
def gold_rows(val, world):
    from tcsynth import sft

    picks = [next(row for row in val if row["difficulty"] == d) for d in records.DIFFICULTIES]
    return picks, [sft.sft_row(row, world, parallel=False) for row in picks]


def tiny_tokenizer(template):
    """A tokenizer made on the spot with TRL's template and response template (for parse_response)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import add_response_schema

    core = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")
    tokenizer.chat_template = load_matrix_script().read_template(template)
    return add_response_schema(tokenizer)


class TestRealTemplates:
    @pytest.mark.parametrize("template", sorted(TEMPLATES))
    def test_gold_scores_one_and_broken_gold_zero(self, gold_rows, template):
        tasks, rows = gold_rows
        gold = [rendered_completion(row, template) for row in rows]
        assert textcraft_reward(gold, **columns(tasks)) == [1.0] * len(rows)
        # The same as a conversational completion: one assistant message holding the text.
        assert textcraft_reward([[{"role": "assistant", "content": text}] for text in gold], **columns(tasks)) == [1.0] * len(rows)
        short = [rendered_completion(row, template, without_finish(row["messages"])) for row in rows]
        assert textcraft_reward(short, **columns(tasks)) == [0.0] * len(rows)
        altered = [rendered_completion(row, template, one_craft_altered(row["messages"])) for row in rows]
        assert textcraft_reward(altered, **columns(tasks)) == [0.0] * len(rows)

    @pytest.mark.parametrize("template", ["qwen2_5", "qwen3_6", "llama3_1", "gptoss", "glm4moe", "gemma4", "nemotron_3_nano"])
    def test_with_a_tokenizer_transformers_parses(self, gold_rows, template, monkeypatch):
        from tcsynth import toolcalls

        tasks, rows = gold_rows
        reward = get_textcraft_reward(tokenizer=tiny_tokenizer(template))
        monkeypatch.setattr(toolcalls, "builtin_tool_calls", lambda *a, **k: pytest.fail("fell back on the built-in reader"))
        assert reward([rendered_completion(row, template) for row in rows], **columns(tasks)) == [1.0] * len(rows)
        altered = [rendered_completion(row, template, one_craft_altered(row["messages"])) for row in rows]
        assert reward(altered, **columns(tasks)) == [0.0] * len(rows)

    def test_parallel_calls_in_one_text(self, val, world):
        from tcsynth import sft

        row = sft.sft_row(val[0], world, parallel=True)
        for template in ("qwen3", "glm4moe", "gemma4", "nemotron_3_nano"):
            assert textcraft_reward([rendered_completion(row, template)], **columns([val[0]])) == [1.0], template

    def test_tokenizer_is_checked(self):
        with pytest.raises(ValueError, match="parse_response"):
            get_textcraft_reward(tokenizer="Qwen/Qwen3-0.6B")

    def test_pickles_with_its_tokenizer(self, gold_rows):
        tasks, rows = gold_rows
        clone = pickle.loads(pickle.dumps(get_textcraft_reward(tokenizer=tiny_tokenizer("qwen2_5"))))
        assert clone.tokenizer.response_template is not None
        assert clone([rendered_completion(rows[0], "qwen2_5")], **columns(tasks[:1])) == [1.0]
