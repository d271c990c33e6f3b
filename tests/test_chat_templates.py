"""The chat-template matrix: measured with TRL's real templates, equal to docs/chat-template-matrix.md, and
the one-line ``dataset.map`` fixes it names work on a ``datasets.Dataset``.

The measurement (``scripts/chat_template_matrix.py``) renders a fixed sample of sft and sft-sequential
conversations with every listed template (about a minute on one core); it runs once for this module.
"""

from __future__ import annotations

import json

import datasets
import pytest

import script_modules
from tcsynth import configs, game, records, sft, toolcalls

matrix = script_modules.load("chat_template_matrix")


@pytest.fixture(scope="module")
def cells(data):
    return matrix.measure(data)


def cell(cells, family, config, prep="as is"):
    (index,) = [i for i, v in enumerate(matrix.VARIANTS) if v.family == family and v.prep == prep]
    return cells[index, config]


# --------------------------------------------------------------------------------------------- the file


def test_the_matrix_file_is_the_measured_one(cells):
    assert matrix.MATRIX_FILE.read_text(encoding="utf-8") == matrix.markdown(cells), (
        "docs/chat-template-matrix.md is stale: run python scripts/chat_template_matrix.py"
    )


def test_the_sample_covers_every_difficulty_of_both_splits(data):
    rows = matrix.sample_rows(data)
    assert {(row["split"], row["difficulty"]) for row in rows} == {(s, d) for s in records.SPLITS for d in records.DIFFICULTIES}
    assert len({row["name"] for row in rows}) == len(rows)


def test_every_listed_template_comes_from_the_installed_trl():
    for variant in matrix.VARIANTS:
        assert (matrix.templates_dir() / (variant.template + ".jinja")).is_file(), variant.template
        if variant.training is not None:
            assert "generation" in matrix.read_template(variant.training), variant.training


# ------------------------------------------------------------------------------------ what was measured


def test_sequential_keeps_every_call_and_result_for_every_family_that_renders_tools(cells):
    for index, variant in enumerate(matrix.VARIANTS):
        measured = cells[index, "sft-sequential"]
        if variant.family in ("DeepSeek-V3", "Phi-3.5") and variant.prep == "as is":
            continue  # they need a fix, asserted below
        assert measured.rendered == measured.rows, variant
        assert (measured.calls_kept, measured.results_kept) == (measured.calls, measured.results), variant


def test_the_failures_issue_10_reported_are_measured(cells):
    llama = cell(cells, "Llama 3.1", "sft")
    assert llama.rendered < llama.rows and "single tool-calls" in llama.error
    gpt_oss = cell(cells, "gpt-oss", "sft")
    assert gpt_oss.rendered == gpt_oss.rows and gpt_oss.calls_kept < gpt_oss.calls  # silently dropped
    assert gpt_oss.results_kept == gpt_oss.results
    phi = cell(cells, "Phi-3.5", "sft-sequential")
    assert phi.rendered == phi.rows and phi.calls_kept == phi.results_kept == 0
    deepseek = cell(cells, "DeepSeek-V3", "sft-sequential")
    assert deepseek.rendered == 0 and "TypeError" in deepseek.error


def test_parallel_families_keep_every_call_of_sft(cells):
    for family in ("Qwen2.5", "Qwen3", "Qwen3.6", "Qwen3-2507", "GLM-4-MoE", "Gemma 4", "Nemotron-3-nano"):
        measured = cell(cells, family, "sft")
        assert (measured.calls_kept, measured.results_kept) == (measured.calls, measured.results), family


def test_training_templates_mask_right_on_sequential_rows(cells):
    for family in ("Qwen2.5", "Qwen3", "Qwen3.6", "Qwen3-2507", "gpt-oss", "GLM-4-MoE", "Nemotron-3-nano", "DeepSeek-V3"):
        measured = cell(cells, family, "sft-sequential")
        assert measured.trained_ok == measured.rows, family
    assert cell(cells, "Llama 3.1", "sft-sequential", "inline_tool_calls(style='llama3')").trained_ok > 0


def test_a_lost_mark_is_counted(data):
    # The same measurement on a conversation whose last call and result a template cannot show.
    row = sft.sft_row(data.tasks["val"][0], game.World(data.world_document), parallel=False)
    measured = matrix.Cell()
    dropping = matrix.Variant("x", "qwen2_5", None, "drop the last turn", lambda messages: messages[:-2])
    matrix.measure_row(dropping, row, measured)
    assert (measured.calls - measured.calls_kept, measured.results - measured.results_kept) == (1, 1)


# -------------------------------------------------------------------------------- the fixes as dataset.map


def marked_dataset(data, config):
    world = game.World(data.world_document)
    rows = [sft.sft_row(row, world, parallel=config == "sft") for row in data.tasks["val"][::90]]
    for row in rows:
        row["messages"] = matrix.marked(row["messages"])
    encoded = [sft.encode_row(row) for row in rows]
    return datasets.Dataset.from_list(encoded, features=configs.features(configs.SFT)), rows


@pytest.mark.parametrize(
    "prep, template, config",
    [
        ("string_arguments", "deepseekv3", "sft"),
        ("inline_tool_calls", "phi3_5", "sft-sequential"),
        ("inline_tool_calls", "phi3_5_training", "sft"),
        ("inline_tool_calls(style='llama3')", "llama3_training", "sft-sequential"),
        ("inline_tool_calls(style='llama3')", "llama3_1", "sft-sequential"),
    ],
)
def test_the_documented_map_line_fixes_the_family(data, world, prep, template, config):
    dataset, rows = marked_dataset(data, config)
    if template != "llama3_1":  # as it is, the template refuses the data or loses the calls
        try:
            text, _ = matrix.render(dataset[0]["messages"], dataset[0]["tools"], template)
        except Exception:  # noqa: BLE001
            text = ""
        assert matrix.call_mark(1) not in text
    names = {"dataset": dataset, "string_arguments": toolcalls.string_arguments, "inline_tool_calls": toolcalls.inline_tool_calls}
    fixed = eval(matrix.MAP_LINES[prep], names)  # the very line the matrix file shows
    tasks = {row["name"]: row for row in data.tasks["val"]}
    for row, original in zip(fixed, rows):
        text, _ = matrix.render(row["messages"], row["tools"], template)
        for number in range(1, original["num_tool_calls"] + 1):
            assert matrix.call_mark(number) in text and matrix.result_mark(number) in text, (row["name"], number)
        # What the template wrote reads back as the gold calls (their marks aside).
        calls = toolcalls.builtin_tool_calls(text[text.index(tasks[row["name"]]["goal"]):])
        for call in calls:
            if isinstance(call["arguments"], str):
                call["arguments"] = json.loads(call["arguments"])
            assert call["arguments"].pop("mark", None) is not None
        assert game.replay(world, records.engine_task(tasks[row["name"]]), calls).reward == 1.0


def test_llama3_inline_refuses_parallel_turns(data):
    row = sft.sft_row(data.tasks["val"][0], game.World(data.world_document), parallel=True)
    with pytest.raises(ValueError, match="sft-sequential"):
        toolcalls.inline_tool_calls(row["messages"], style="llama3")
    with pytest.raises(ValueError, match="style"):
        toolcalls.inline_tool_calls(row["messages"], style="mistral")


def test_the_training_template_column_is_what_trl_swaps_in():
    # SFTTrainer(assistant_only_loss=True) calls get_training_chat_template on the tokenizer's template.
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import get_training_chat_template

    core = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    for variant in matrix.VARIANTS:
        if variant.prep != "as is":
            continue
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")
        tokenizer.chat_template = matrix.read_template(variant.template)
        if variant.training is None:
            with pytest.raises(ValueError, match="not training-compatible"):
                get_training_chat_template(tokenizer)
        else:
            assert get_training_chat_template(tokenizer) == matrix.read_template(variant.training), variant.family
