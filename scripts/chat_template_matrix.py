"""Measure which chat templates keep every tool call and tool result of the sft configs, and write the matrix.

Every row of a fixed sample of ``sft`` (several calls a turn) and ``sft-sequential`` (one call a turn)
conversations, all difficulties and both splits, is rendered with the chat templates TRL ships in its
``trl/chat_templates/`` folder (copies of the models' own, read offline from the installed package), through
transformers' own Jinja machinery with the tools passed.  Before rendering, every call gets a unique mark (an
extra ``mark`` argument holding an item-like token) and every tool result one (appended to its text); a call
or result whose mark is not in the rendered text was lost.  The training template (``*_training.jinja``, the
one TRL swaps in for ``assistant_only_loss``) is rendered too, with its ``{% generation %}`` spans: usable
means every call mark falls inside a trained span and no result mark and no system prompt does.

    python scripts/chat_template_matrix.py            # measure and write docs/chat-template-matrix.md
    python scripts/chat_template_matrix.py --check    # exit 1 when the file differs from the measurement

``tests/test_chat_templates.py`` keeps the file equal to the measurement.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere: use this checkout's package
    sys.path.insert(0, str(REPO))

from tcsynth import game, records, sft, store, toolcalls  # noqa: E402

MATRIX_FILE = REPO / "docs" / "chat-template-matrix.md"
CONFIGS = ("sft", "sft-sequential")
PER_DIFFICULTY = 2  # rows per split and difficulty: the first and the last of each
# What templates read besides the messages; the values only have to be distinct strings.
SPECIAL_TOKENS = {"bos_token": "<bos>", "eos_token": "<eos>"}

Messages = List[Dict[str, Any]]
Prep = Callable[[Messages], Messages]


def _as_is(messages: Messages) -> Messages:
    return messages


def _llama3_inline(messages: Messages) -> Messages:
    return toolcalls.inline_tool_calls(messages, style="llama3")


@dataclass(frozen=True)
class Variant:
    """One matrix row: a family's template, the data as given to it, and its training template."""

    family: str
    template: str  # file stem in trl/chat_templates
    training: Optional[str]  # file stem of the *_training.jinja TRL swaps in, or None
    prep: str = "as is"  # how the rows are changed before rendering (a dataset.map)
    prep_fn: Prep = _as_is


# The families of issue 10, each with its data as it is; then the fixes for those that cannot take it.
VARIANTS: Tuple[Variant, ...] = (
    Variant("Qwen2.5", "qwen2_5", "qwen2_5_training"),
    Variant("Qwen3", "qwen3", "qwen3_training"),
    Variant("Qwen3.6", "qwen3_6", "qwen3_6_training"),
    Variant("Qwen3-2507", "qwen3_instruct_2507", "qwen3_instruct_2507_training"),
    Variant("Llama 3.1", "llama3_1", None),
    Variant("Llama 3.2", "llama3_2", None),
    Variant("gpt-oss", "gptoss", "gptoss_training"),
    Variant("GLM-4-MoE", "glm4moe", "glm4moe_training"),
    Variant("Gemma 4", "gemma4", None),
    Variant("Nemotron-3-nano", "nemotron_3_nano", "nemotron_3_nano_training"),
    Variant("DeepSeek-V3", "deepseekv3", "deepseekv3_training"),
    Variant("Phi-3.5", "phi3_5", "phi3_5_training"),
    # Fixes: one dataset.map each (tcsynth.toolcalls).
    Variant("DeepSeek-V3", "deepseekv3", None, "string_arguments", toolcalls.string_arguments),
    Variant("Phi-3.5", "phi3_5", "phi3_5_training", "inline_tool_calls", toolcalls.inline_tool_calls),
    Variant("Llama 3.1", "llama3_1", "llama3_training", "inline_tool_calls(style='llama3')", _llama3_inline),
    Variant("Llama 3.2", "llama3_2", "llama3_training", "inline_tool_calls(style='llama3')", _llama3_inline),
)

# The templates of the matrix, and the fix each needs before its text holds every call (None: as is).
TEMPLATE_STEMS = tuple(dict.fromkeys(variant.template for variant in VARIANTS))
READ_FIXES = {"deepseekv3": toolcalls.string_arguments, "phi3_5": toolcalls.inline_tool_calls}

MAP_LINES = {
    "string_arguments": 'dataset.map(lambda row: {"messages": string_arguments(row["messages"])})',
    "inline_tool_calls": 'dataset.map(lambda row: {"messages": inline_tool_calls(row["messages"])})',
    "inline_tool_calls(style='llama3')": 'dataset.map(lambda row: {"messages": inline_tool_calls(row["messages"], style="llama3")})',
}


# ------------------------------------------------------------------------------------------- templates


def templates_dir() -> Path:
    """The installed TRL's ``chat_templates`` folder."""
    import trl

    return Path(trl.__file__).resolve().parent / "chat_templates"


@lru_cache(maxsize=None)
def read_template(stem: str) -> str:
    return (templates_dir() / (stem + ".jinja")).read_text(encoding="utf-8")


def render(messages: Sequence[Mapping[str, Any]], tools: Any, stem: str, masks: bool = False) -> Tuple[str, List[Tuple[int, int]]]:
    """``messages`` rendered by TRL's template ``stem`` with transformers' renderer (no tokenizer needed).

    Returns the text and, with ``masks``, the character spans inside ``{% generation %}`` blocks.
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, spans = render_jinja_template(
        [list(messages)], tools=tools, chat_template=read_template(stem), return_assistant_tokens_mask=masks, **SPECIAL_TOKENS
    )
    return rendered[0], (spans[0] if masks else [])


# ---------------------------------------------------------------------------------------------- marks


def call_mark(number: int) -> str:
    return "zqm%05dc" % number


def result_mark(number: int) -> str:
    return "zqm%05dr" % number


def marked(messages: Sequence[Mapping[str, Any]]) -> Messages:
    """A copy of ``messages`` whose n-th call carries ``mark: call_mark(n)`` and n-th result ends with ``result_mark(n)``."""
    out = copy.deepcopy(list(messages))
    calls = results = 0
    for message in out:
        for call in message.get("tool_calls") or ():
            calls += 1
            call["function"]["arguments"]["mark"] = call_mark(calls)
        if message["role"] == "tool":
            results += 1
            message["content"] += " " + result_mark(results)
    return out


# ----------------------------------------------------------------------------------------------- sample


def sample_rows(data: store.Records) -> List[Mapping[str, Any]]:
    """The task rows measured: per split and difficulty, the first and the last (deterministic)."""
    rows = []
    for split in records.SPLITS:
        for difficulty in records.DIFFICULTIES:
            mine = [row for row in data.tasks[split] if row["difficulty"] == difficulty]
            picks = [mine[0], mine[-1]][:PER_DIFFICULTY]
            rows += picks
    return rows


def conversations(data: store.Records) -> Dict[str, List[Dict[str, Any]]]:
    """``{config: [sft rows of the sample]}`` for ``sft`` (parallel calls) and ``sft-sequential``."""
    world = game.World(data.world_document)
    rows = sample_rows(data)
    return {
        "sft": [sft.sft_row(row, world, parallel=True) for row in rows],
        "sft-sequential": [sft.sft_row(row, world, parallel=False) for row in rows],
    }


# ---------------------------------------------------------------------------------------------- measure


@dataclass
class Cell:
    """What one variant does to one config's sample."""

    rows: int = 0
    rendered: int = 0
    error: str = ""
    calls: int = 0
    calls_kept: int = 0
    results: int = 0
    results_kept: int = 0
    trained_ok: Optional[int] = None  # rows whose training render masks right (None: no training template)


def measure_row(variant: Variant, row: Mapping[str, Any], cell: Cell) -> None:
    messages = marked(row["messages"])
    calls = [call_mark(n) for n in range(1, row["num_tool_calls"] + 1)]
    results = [result_mark(n) for n in range(1, row["num_tool_calls"] + 1)]
    cell.rows += 1
    cell.calls += len(calls)
    cell.results += len(results)
    try:
        messages = variant.prep_fn(messages)  # a fix may refuse the data too (one call a turn only)
    except ValueError as error:
        cell.error = cell.error or first_line(error)
        cell.trained_ok = None if variant.training is None else (cell.trained_ok or 0)
        return
    try:
        text, _ = render(messages, row["tools"], variant.template)
    except Exception as error:  # noqa: BLE001 - a template that refuses the data is what is measured
        cell.error = cell.error or first_line(error)
    else:
        cell.rendered += 1
        cell.calls_kept += sum(mark in text for mark in calls)
        cell.results_kept += sum(mark in text for mark in results)
    if variant.training is not None:
        cell.trained_ok = (cell.trained_ok or 0) + training_masks_right(messages, row["tools"], variant.training, calls, results)


def training_masks_right(messages: Messages, tools: Any, stem: str, calls: Sequence[str], results: Sequence[str]) -> bool:
    """Whether the training template trains every call and no tool result or system text."""
    try:
        text, spans = render(messages, tools, stem, masks=True)
    except Exception:  # noqa: BLE001
        return False

    def trained(position: int) -> bool:
        return any(start <= position < end for start, end in spans)

    for mark in calls:
        where = text.find(mark)
        if where < 0 or not trained(where):
            return False
    for mark in results:
        where = text.find(mark)
        if where < 0 or trained(where):
            return False
    system = text.find(messages[0]["content"][:60])
    return system >= 0 and not trained(system)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return "%s: %s" % (type(error).__name__, text[0] if text else "")


def measure(data: Optional[store.Records] = None) -> Dict[Tuple[int, str], Cell]:
    """``{(variant index, config): Cell}`` over the sample."""
    data = data or store.load_records()
    by_config = conversations(data)
    cells: Dict[Tuple[int, str], Cell] = {}
    for index, variant in enumerate(VARIANTS):
        for config in CONFIGS:
            cell = cells[index, config] = Cell()
            for row in by_config[config]:
                measure_row(variant, row, cell)
    return cells


# ------------------------------------------------------------------------------------------------ write


def _count(kept: int, total: int) -> str:
    return "all %d" % total if kept == total else "**%d of %d**" % (kept, total)


def markdown(cells: Mapping[Tuple[int, str], Cell]) -> str:
    sample = next(iter(cells.values())).rows
    lines = [
        "# Chat templates and the sft configs: the measured matrix",
        "",
        "Written by `python scripts/chat_template_matrix.py` (do not edit by hand; `tests/test_chat_templates.py` "
        "checks it).  %d conversations per config (the first and the last task of every difficulty in both splits) "
        "rendered with the chat templates of the installed TRL (`trl/chat_templates/*.jinja`), tools passed.  "
        "Every call and every tool result carries a unique mark; *calls kept* and *results kept* count the marks "
        "found in the rendered text.  *Training template*: the `*_training.jinja` TRL swaps in for "
        "`assistant_only_loss=True`; *trains right* counts the conversations whose `{%% generation %%}` spans hold "
        "every call and no tool result or system text; *none*: TRL has no training template for it, so "
        "`SFTTrainer(assistant_only_loss=True)` refuses the template (train on the whole sequence, or use a fix "
        "below).  Marks are counted over every conversation of the sample, those a template refused included." % sample,
        "",
        "| family | template | data | config | renders | calls kept | results kept | training template | trains right |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for index, variant in enumerate(VARIANTS):
        for config in CONFIGS:
            cell = cells[index, config]
            renders = "yes" if cell.rendered == cell.rows else "**%d of %d** (`%s`)" % (cell.rendered, cell.rows, cell.error)
            kept = [_count(cell.calls_kept, cell.calls), _count(cell.results_kept, cell.results)] if cell.rendered else ["-", "-"]
            if variant.training is None:
                training, right = "none", "-"
            else:
                training = "`%s.jinja`" % variant.training
                right = "yes" if cell.trained_ok == cell.rows else "**%d of %d**" % (cell.trained_ok, cell.rows)
            prep = "as is" if variant.prep == "as is" else "`%s`" % variant.prep
            columns = [variant.family, "`%s.jinja`" % variant.template, prep, config, renders, kept[0], kept[1], training, right]
            lines.append("| " + " | ".join(columns) + " |")
    lines += ["", "The fixes, one `dataset.map` each (functions in `tcsynth.toolcalls`):", ""]
    for prep, line in MAP_LINES.items():
        lines.append("- `%s`: `%s`" % (prep, line))
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with %s instead of writing it" % MATRIX_FILE.relative_to(REPO))
    parser.add_argument("--output", default=str(MATRIX_FILE), help="where to write the matrix (default: %(default)s)")
    args = parser.parse_args(argv)
    text = markdown(measure())
    output = Path(args.output)
    if args.check:
        if not output.is_file() or output.read_text(encoding="utf-8") != text:
            sys.stderr.write("error: %s differs from the measured matrix; run scripts/chat_template_matrix.py\n" % output)
            return 1
        return 0
    output.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
