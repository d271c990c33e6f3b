"""The sft configs: every conversation replays to reward 1.0, tool messages are the engine's output, the
expert looks recipes up before crafting, the rows survive Parquet with dict arguments, and sft-sequential
rows train with TRL's real Qwen2.5 and Llama 3 training templates and ``SFTTrainer`` (assistant-only loss,
exactly the assistant turns trained) offline on CPU.

The expected texts come from SPEC.md §2 (``Successfully crafted {total} {item}(s)``, ``finish`` echoes its
message) and from the message shape of issue 3; the tool answers are checked against a fresh engine.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any, Dict, Iterable, List

import datasets
import pytest
import script_modules

from tcsynth import build, cli, configs, game, prompts, records, sft, store

# ------------------------------------------------------------------------------ chat template and tokenizer

# A Hermes/Qwen-style template (ChatML turns, <tool_call> JSON with the arguments object) with the
# {% generation %} markers TRL's assistant-only loss reads.  The assistant's <|im_end|> is inside them,
# so a model learns to stop.  Consecutive tool answers share one user turn, as the Hermes format does.
CHAT_TEMPLATE = """\
{%- for message in messages %}
{%- if message.role == 'system' %}
<|im_start|>system
{{ message.content }}
{%- if tools %}

Functions you can call, as JSON schemas:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
Call one inside <tool_call></tool_call> tags as {"name": ..., "arguments": {...}}.
{%- endif %}<|im_end|>
{% elif message.role == 'user' %}
<|im_start|>user
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}
<|im_start|>assistant
{% generation %}{{ message.content }}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": {{ call.function.name | tojson }}, "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% endgeneration %}
{%- elif message.role == 'tool' %}
{%- if loop.first or loop.previtem.role != 'tool' %}<|im_start|>user{% endif %}
<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or loop.nextitem.role != 'tool' %}<|im_end|>
{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

SPECIAL_TOKENS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<tools>", "</tools>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TOKENIZER_VOCAB_SIZE = 1024


def training_texts(rows: Iterable[Dict[str, Any]]) -> Iterable[str]:
    """What a tokenizer is trained on: every message text, tool call and tool schema of decoded sft rows."""
    for row in rows:
        yield json.dumps(row["tools"])
        for message in row["messages"]:
            yield message["content"]
            for call in message.get("tool_calls", ()):
                yield json.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]})
    yield " ".join(TAGS + ["system", "user", "assistant"])


def train_tokenizer(rows: List[Dict[str, Any]], vocab_size: int = TOKENIZER_VOCAB_SIZE):
    """A byte-level BPE tokenizer trained here on ``rows`` (decoded sft rows), with :data:`CHAT_TEMPLATE`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_texts(rows), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|pad|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tokenizer_sample(rows: Iterable[Dict[str, Any]], per_difficulty: int = 4) -> List[Dict[str, Any]]:
    """The rows the test tokenizer is trained on: the shortest train conversations of each difficulty."""
    sample = []
    for difficulty in records.DIFFICULTIES:
        mine = [row for row in rows if row["split"] == "train" and row["difficulty"] == difficulty]
        sample += sorted(mine, key=lambda row: (row["num_characters"], row["name"]))[:per_difficulty]
    return sample


def decode_row(row: Dict[str, Any]) -> Dict[str, Any]:
    """An encoded sft row (JSON text per message) as ``datasets`` hands it to users."""
    return dict(row, messages=[json.loads(message) for message in row["messages"]], tools=json.loads(row["tools"]))


# -------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def data() -> store.Records:
    return store.load_records()


@pytest.fixture(scope="module")
def world(data) -> game.World:
    return game.World(data.world_document)


@pytest.fixture(scope="module")
def tasks(data) -> Dict[str, Dict[str, Any]]:
    return {row["name"]: row for rows in data.tasks.values() for row in rows}


@pytest.fixture(scope="module")
def sft_rows(data) -> List[Dict[str, Any]]:
    """Every sft row of both splits, decoded."""
    return [decode_row(row) for split in records.SPLITS for row in sft.sft_rows(data, split)]


@pytest.fixture(scope="module")
def sample_rows(sft_rows) -> List[Dict[str, Any]]:
    return tokenizer_sample(sft_rows)


@pytest.fixture(scope="module")
def tokenizer(sample_rows):
    return train_tokenizer(sample_rows)


@pytest.fixture()
def offline_hf_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return tmp_path


def assistant_turns(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [message for message in messages if message["role"] == "assistant"]


def calls_of(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [call for message in assistant_turns(messages) for call in message["tool_calls"]]


# ------------------------------------------------------------------------------------------ the replay


def test_every_row_replays_to_one_and_each_tool_message_is_the_engine_output(sft_rows, tasks, world):
    assert len(sft_rows) == sum(records.TASK_COUNTS.values())
    for row in sft_rows:
        task = records.engine_task(tasks[row["name"]])
        fresh = game.Game.for_task(world, task)
        waiting: List[Dict[str, Any]] = []
        for message in row["messages"][2:]:
            if message["role"] == "assistant":
                assert not waiting, "%s: an assistant turn before every call was answered" % row["name"]
                waiting = list(message["tool_calls"])
                continue
            assert message["role"] == "tool"
            call = waiting.pop(0)
            assert (message["tool_call_id"], message["name"]) == (call["id"], call["function"]["name"])
            assert message["content"] == fresh.call(call["function"]["name"], call["function"]["arguments"]), row["name"]
        assert not waiting
        assert fresh.succeeded(), row["name"]
        verdict = game.replay(world, task, calls_of(row["messages"]))
        assert verdict.reward == 1.0, (row["name"], verdict.reason)


def test_tool_answers_have_the_spec_text(sft_rows):
    for row in sft_rows[::25]:
        for call, answer in zip(calls_of(row["messages"]), [m for m in row["messages"] if m["role"] == "tool"]):
            arguments = call["function"]["arguments"]
            if call["function"]["name"] == "craft":
                item, total = arguments["target"]
                assert answer["content"] == "Successfully crafted %d %s(s)" % (total, item)
            elif call["function"]["name"] == "finish":
                assert answer["content"] == arguments["message"] != ""
            elif call["function"]["name"] == "get_info":
                assert [entry["item"] for entry in json.loads(answer["content"])] == arguments["items"]


# ------------------------------------------------------------------------------------ the expert's behaviour


def test_the_expert_looks_up_level_by_level_then_crafts_the_gold_totals_bottom_up(sft_rows, tasks, world):
    totals_differ_from_crafts = 0
    for row in sft_rows:
        task = tasks[row["name"]]
        messages = row["messages"]
        assert messages[0] == {"role": "system", "content": prompts.SYSTEM_PROMPT}
        assert messages[1] == {"role": "user", "content": task["goal"]}
        turns = assistant_turns(messages)
        assert all(turn["content"].strip() for turn in turns), row["name"]
        names = [[call["function"]["name"] for call in turn["tool_calls"]] for turn in turns]
        assert names[0] == ["view_inventory"] and turns[0]["tool_calls"][0]["function"]["arguments"] == {}
        assert names[-1] == ["finish"]
        look_ups = 1
        while names[look_ups] == ["get_info"]:
            look_ups += 1
        assert look_ups > 1 and all(set(call) == {"craft"} for call in names[look_ups:-1]), row["name"]

        # Look-ups: the targets, then only ingredients that earlier answers printed and that are not held.
        answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        held = {entry["item"] for entry in task["initial_inventory"]}
        seen_ingredients: set = set()
        depth_of: Dict[str, int] = {}
        for number, turn in enumerate(turns[1:look_ups]):
            asked = turn["tool_calls"][0]["function"]["arguments"]["items"]
            if number == 0:
                assert asked == [entry["item"] for entry in task["target_items"]]
            else:
                assert set(asked) <= seen_ingredients - held - set(depth_of), row["name"]
            assert len(set(asked)) == len(asked)
            for entry in json.loads(answers[turn["tool_calls"][0]["id"]]):
                depth_of[entry["item"]] = entry["crafting_depth"]
                seen_ingredients.update(name for recipe in entry["recipes"] for name in recipe["ingredients"])

        # Crafts: the gold steps with the total the tool takes (count, not crafts), one depth a turn, rising.
        crafts = [call["function"]["arguments"] for turn in turns[look_ups:-1] for call in turn["tool_calls"]]
        gold = task["gold_trajectory"]
        assert [c["target"] for c in crafts] == [[step["item"], step["count"]] for step in gold], row["name"]
        assert [c["ingredients"] for c in crafts] == [records.list_to_counts(step["ingredients"]) for step in gold]
        totals_differ_from_crafts += any(step["crafts"] != step["count"] for step in gold)
        assert set(depth_of) == {step["item"] for step in gold}, "looked up exactly the items crafted"
        turn_depths = []
        for turn in turns[look_ups:-1]:
            depths = {depth_of[call["function"]["arguments"]["target"][0]] for call in turn["tool_calls"]}
            assert len(depths) == 1, row["name"]
            turn_depths.append(depths.pop())
        assert turn_depths == sorted(set(turn_depths)), row["name"]
    assert totals_differ_from_crafts > 0  # the corpus does exercise count vs crafts


def test_message_shape_and_ids(sft_rows):
    for row in sft_rows[::10]:
        assert row["tools"] == prompts.TOOLS
        number = 0
        for message in row["messages"]:
            if message["role"] in ("system", "user"):
                assert set(message) == {"role", "content"}
            elif message["role"] == "assistant":
                assert list(message) == ["role", "content", "tool_calls"]
                for call in message["tool_calls"]:
                    number += 1
                    assert call == {"id": "call_%d" % number, "type": "function", "function": call["function"]}
                    assert list(call["function"]) == ["name", "arguments"]
                    assert isinstance(call["function"]["arguments"], dict)
                    assert game.argument_problem(call["function"]["name"], call["function"]["arguments"]) is None
            else:
                assert list(message) == ["role", "tool_call_id", "name", "content"]
                assert isinstance(message["content"], str)
        assert row["num_tool_calls"] == number
        assert row["num_turns"] == len(assistant_turns(row["messages"]))
        assert row["num_characters"] > sum(len(m["content"]) for m in row["messages"])


def test_one_call_per_turn_makes_the_same_calls(data, tasks, world):
    for row in data.tasks["val"][::40]:
        batched = sft.conversation(row, world)
        single = sft.conversation(row, world, parallel=False)
        assert all(len(turn["tool_calls"]) == 1 for turn in assistant_turns(single))
        assert [c["function"] for c in calls_of(single)] == [c["function"] for c in calls_of(batched)]
        assert len(assistant_turns(single)) == len(calls_of(single)) >= len(assistant_turns(batched))
        assert game.replay(world, records.engine_task(row), calls_of(single)).reward == 1.0


def test_the_same_row_renders_the_same_bytes(data, world):
    row = data.tasks["train"][7]
    first = json.dumps(sft.encode_row(sft.sft_row(row, world)))
    assert first == json.dumps(sft.encode_row(sft.sft_row(copy.deepcopy(row), world)))


def test_sft_configs_split_by_difficulty(data):
    for split in records.SPLITS:
        everything = build.config_rows(configs.CONFIGS["sft"], data, split)
        assert [row["name"] for row in everything] == [row["name"] for row in data.tasks[split]]
        for difficulty in records.DIFFICULTIES:
            rows = build.config_rows(configs.CONFIGS["sft-" + difficulty], data, split)
            assert rows == [row for row in everything if row["difficulty"] == difficulty] != []


# ---------------------------------------------------------------------------------------------- failures


def test_a_wrong_gold_total_fails_the_build(data, world):
    row = copy.deepcopy(data.tasks["train"][0])
    row["gold_trajectory"][0]["count"] = row["gold_trajectory"][0]["crafts"]  # crafts passed as the total
    assert row["gold_trajectory"][0]["crafts"] != data.tasks["train"][0]["gold_trajectory"][0]["count"]
    with pytest.raises(sft.SftError, match=row["name"]):
        sft.conversation(row, world)


def test_a_gold_craft_no_recipe_needs_fails_the_build(data, world):
    row = copy.deepcopy(data.tasks["train"][0])
    row["gold_trajectory"].insert(0, {"item": "zz_unrelated", "crafts": 1, "count": 1, "ingredients": []})
    with pytest.raises(sft.SftError, match="zz_unrelated"):
        sft.conversation(row, world)


def test_verify_rejects_altered_conversations(data, world):
    row = data.tasks["val"][3]
    messages = sft.conversation(row, world)
    tampered = copy.deepcopy(messages)
    next(m for m in tampered if m["role"] == "tool")["content"] = "{}"
    with pytest.raises(sft.SftError, match="not what the engine prints"):
        sft.verify(row, world, tampered)
    short = [m for m in copy.deepcopy(messages) if m["role"] != "tool" or m["name"] != "craft"]
    for turn in short:
        turn["tool_calls"] = [c for c in turn.get("tool_calls", []) if c["function"]["name"] != "craft"]
    with pytest.raises(sft.SftError, match="does not reach the goal"):
        sft.verify(row, world, short)


# ----------------------------------------------------------------------------------- storage and templates


def write_sft_repo(root: Path, data: store.Records) -> None:
    """A dataset repository holding a small ``sft`` config, its README declaring it as the lead's does."""
    for split in records.SPLITS:
        path = store.parquet_path(root / "data", "sft", split)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(store.parquet_bytes(sft.sft_rows(data, split)[:6], configs.arrow_schema(configs.SFT)))
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: sft\n  data_files:\n"
        "  - split: train\n    path: data/sft/train.parquet\n  - split: val\n    path: data/sft/val.parquet\n---\n"
    )


def test_parquet_round_trip_gives_dict_arguments(data, offline_hf_home):
    repo = offline_hf_home / "repo"
    write_sft_repo(repo, data)
    loaded = datasets.load_dataset(str(repo), "sft", cache_dir=str(offline_hf_home / "cache"))
    assert loaded["train"].features == configs.features(configs.SFT)
    assert isinstance(loaded["train"].features["messages"], datasets.List)
    for split in records.SPLITS:
        expected = [decode_row(row) for row in sft.sft_rows(data, split)[:6]]
        assert [dict(row) for row in loaded[split]] == expected  # no keys merged in, no nulls added
    craft = next(c for c in calls_of(loaded["train"][0]["messages"]) if c["function"]["name"] == "craft")
    assert isinstance(craft["function"]["arguments"], dict)
    assert isinstance(craft["function"]["arguments"]["ingredients"], dict)


def test_chat_template_renders_tool_calls_with_dict_arguments(data, tokenizer, offline_hf_home):
    repo = offline_hf_home / "repo"
    write_sft_repo(repo, data)
    row = datasets.load_dataset(str(repo), "sft", split="val", cache_dir=str(offline_hf_home / "cache"))[0]
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    assert text.startswith("<|im_start|>system\n" + prompts.SYSTEM_PROMPT)
    for tool in prompts.TOOLS:
        assert json.dumps(tool, ensure_ascii=False) in text
    for call in calls_of(row["messages"]):
        rendered = '{"name": "%s", "arguments": %s}' % (call["function"]["name"], json.dumps(call["function"]["arguments"]))
        assert "<tool_call>\n" + rendered + "\n</tool_call>" in text
    assert '"arguments": "' not in text  # never a JSON string inside the JSON
    for message in row["messages"]:
        if message["role"] == "tool":
            assert "<tool_response>\n" + message["content"] + "\n</tool_response>" in text


# ------------------------------------------------------------------------------------------ TRL end to end

# TRL's real templates (read from the installed trl/chat_templates), one per family, with the tokens they
# write.  The tokenizer carries the family's original template; with assistant_only_loss SFTTrainer swaps
# in the family's *_training.jinja itself.  Llama 3.1/3.2 have no training template in TRL: Llama 3's
# trains once the calls are written into the text the Llama 3.1 way (the matrix's documented map).
TRAINING_FAMILIES = {
    "qwen2_5": dict(
        template="qwen2_5_chat_template",
        training="qwen2_5_training_chat_template",
        special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        tokens=dict(eos_token="<|im_end|>", pad_token="<|endoftext|>"),
        style=None,
    ),
    "llama3": dict(
        template="llama3_chat_template",
        training="llama3_training_chat_template",
        special=["<|finetune_right_pad_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        tokens=dict(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", pad_token="<|finetune_right_pad_id|>"),
        style="llama3",
    ),
}


def family_tokenizer(rows: List[Dict[str, Any]], family: str):
    """A byte-level BPE tokenizer trained here on ``rows``, with ``family``'s tokens and original TRL template."""
    import trl.chat_template_utils as templates
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    setup = TRAINING_FAMILIES[family]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB_SIZE,
        special_tokens=setup["special"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(training_texts(rows), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, **setup["tokens"])
    tokenizer.chat_template = getattr(templates, setup["template"])
    return tokenizer


@pytest.mark.parametrize("family", sorted(TRAINING_FAMILIES))
def test_trl_sft_trainer_trains_exactly_the_assistant_turns_with_real_templates(family, data, world, offline_hf_home):
    import trl.chat_template_utils as templates
    from transformers.utils.chat_template_utils import render_jinja_template
    from trl import SFTConfig, SFTTrainer

    from tcsynth import toolcalls

    setup = TRAINING_FAMILIES[family]
    # sft-sequential rows: one tool call per assistant turn.
    easy = [row for row in data.tasks["train"] if row["difficulty"] == "easy"][:3]
    rows = [sft.sft_row(row, world, parallel=False) for row in easy]
    tokenizer = family_tokenizer(rows, family)
    train = datasets.Dataset.from_list([sft.encode_row(row) for row in rows], features=configs.features(configs.SFT))
    if setup["style"] == "llama3":
        train = train.map(lambda row: {"messages": toolcalls.inline_tool_calls(row["messages"], style="llama3")})
    args = SFTConfig(
        output_dir=str(offline_hf_home / "out"),
        assistant_only_loss=True,
        max_length=4096,
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        activation_checkpointing=False,
        seed=0,
    )
    trainer = SFTTrainer(model=script_modules.load("grpo_cpu_example").tiny_model(tokenizer, max_positions=4096), args=args, train_dataset=train, processing_class=tokenizer)
    assert trainer.chat_template == getattr(templates, setup["training"])  # TRL's own training template
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)

    for number, row in enumerate(train):
        messages = row["messages"]
        example = trainer.train_dataset[number]
        ids = example["input_ids"]
        assert len(ids) < args.max_length  # nothing truncated away
        labels = trainer.data_collator([example])["labels"][0].tolist()
        mask = [int(label != -100) for label in labels]
        trained = [tokenizer.decode(span) for span in spans(ids, mask, 1)]
        ignored = "\n".join(tokenizer.decode(span) for span in spans(ids, mask, 0))
        # Exactly the assistant turns: one trained run per turn, each the text of that turn's generation block.
        text, blocks = render_jinja_template(
            [messages],
            tools=row["tools"],
            chat_template=trainer.chat_template,
            return_assistant_tokens_mask=True,
            **tokenizer.special_tokens_map,
        )
        expected = [text[0][start:end] for start, end in blocks[0]]
        turns = [message for message in messages if message["role"] == "assistant"]
        assert len(trained) == len(expected) == len(turns), (family, len(trained), len(turns))
        assert trained == expected
        for turn, piece in zip(turns, trained):
            if turn.get("tool_calls"):
                (call,) = turn["tool_calls"]
                assert json.dumps(call["function"]["arguments"]) in piece
            else:
                assert turn["content"].strip() in piece
            assert piece.rstrip().endswith(tokenizer.eos_token)  # the model learns to end its turn
        # Never system, user or tool text.
        for message in messages:
            if message["role"] in ("system", "user", "tool", "ipython"):
                assert message["content"].strip()[:200] in ignored
                echo = message["role"] != "system" and message["content"].startswith(("Crafted", '"Crafted'))  # finish's answer
                if not echo:
                    assert not any(message["content"].strip()[:200] in piece for piece in trained), (family, message["role"])
        calls = toolcalls.builtin_tool_calls("".join(trained))
        assert game.replay(world, records.engine_task(easy[number]), calls).reward == 1.0  # the trained text holds the whole play


def spans(ids: List[int], mask: List[int], value: int) -> List[List[int]]:
    """The runs of ``ids`` whose mask equals ``value``."""
    runs: List[List[int]] = []
    previous = None
    for token, flag in zip(ids, mask):
        if flag == value:
            if previous != value:
                runs.append([])
            runs[-1].append(token)
        previous = flag
    return runs


# ------------------------------------------------------------------------------------------------- the cli


def test_cli_prints_a_conversation(data, capsys):
    name = data.tasks["val"][3]["name"]
    assert cli.main(["sft", name, "--one-call-per-turn"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["name"] == name and "tools" not in printed
    assert all(len(m["tool_calls"]) == 1 for m in assistant_turns(printed["messages"]))


def test_cli_unknown_task_is_one_error_line(capsys):
    assert cli.main(["sft", "textcraft-synth-val-easy-99999"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1
