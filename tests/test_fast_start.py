"""A fast start: commands that only read Parquet never import ``datasets``, and the shortcuts that skip
turning rows into Python objects give exactly what the row-by-row paths give."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys

import pytest

from tcsynth import records, store
from tcsynth.harbor import columns, export, files, gold

# Runs `python -m textcraft_synth ARGS` in a fresh interpreter and reports, at exit, whether `datasets`
# (or pandas, which pyarrow.dataset pulls in) was ever imported.
# Commands that end with os._exit (cli.entry's quick exit) skip atexit, so the probe reports there too.
PROBE = (
    "import atexit, os, runpy, sys\n"
    "report = lambda: sys.stderr.write('\\nIMPORTED %s\\n' % ' '.join(m for m in ('datasets', 'pandas') if sys.modules.get(m) is not None))\n"
    "atexit.register(report)\n"
    "exit_now = os._exit\n"
    "os._exit = lambda code: (report(), sys.stderr.flush(), exit_now(code))\n"
    "sys.argv = ['textcraft_synth'] + sys.argv[1:]\n"
    "runpy.run_module('textcraft_synth', run_name='__main__')\n"
)


def _imported(repo, *args):
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=repo, capture_output=True, text=True)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("IMPORTED"), result.stderr[-2000:]
    return result, last.split()[1:]


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("replay", "val:3", "--gold", "-q"),
        ("sft", "textcraft-synth-val-easy-00000"),
        ("eval", "--agent", "planner", "--limit", "3", "--out", "{tmp}/eval", "-q"),
        ("export-harbor", "{tmp}/harbor", "--splits", "val", "--limit", "3", "-q"),
    ],
    ids=lambda args: args[0],
)
def test_commands_that_read_parquet_do_not_import_datasets(repo, tmp_path, args):
    result, modules = _imported(repo, *(arg.format(tmp=tmp_path) for arg in args))
    assert result.returncode == 0, result.stderr[-2000:]
    assert modules == []


def test_build_does_not_import_datasets(repo, tmp_path):
    """build writes Parquet with a schema pyarrow makes (configs.arrow_schema), so it needs no datasets."""
    shutil.copytree(repo / "data", tmp_path / "data", ignore=shutil.ignore_patterns("sft-recursive"))
    result, modules = _imported(repo, "build", "-q", "--data-dir", str(tmp_path / "data"), "--index-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert modules == []
    assert "rebuilt" in result.stdout


def test_verify_export_does_not_import_datasets(repo, tmp_path):
    _imported(repo, "export-harbor", str(tmp_path / "harbor"), "--splits", "val", "--limit", "2", "-q")
    result, modules = _imported(repo, "verify-export", str(tmp_path / "harbor"))
    assert result.returncode == 0 and "2 tasks checked, 0 problem(s)" in result.stdout
    assert modules == []


def test_the_builder_class_is_still_importable(repo):
    code = "import sys, textcraft_synth; assert 'datasets' not in sys.modules; from textcraft_synth import TextCraftSynth; print(TextCraftSynth.__module__, 'datasets' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["textcraft_synth", "True"]


# ------------------------------------------------------------------------------ lazy rows and the tables


@pytest.fixture(scope="module")
def plain(data):
    """The same records as rows only (no Arrow tables): every shortcut is compared with this."""
    return store.Records({split: list(rows) for split, rows in data.tasks.items()}, data.recipes_bytes, data.license_bytes)


@pytest.mark.parametrize("wanted", ["val:3", "train:2521", "textcraft_synth.val.100", "textcraft-synth-train-medium-00000"])
def test_find_row_on_the_tables_is_find_row_on_the_rows(repo, plain, wanted):
    fresh = store.load_records(repo / "data")
    assert store.find_row(fresh, wanted) == store.find_row(plain, wanted)
    assert "val" not in fresh.tasks._rows  # found without converting the split


def test_column_rows_are_the_rows_cut_down(repo, plain):
    fresh = store.load_records(repo / "data")
    wanted = ["name", "target_items", "difficulty"]
    assert fresh.column_rows("val", wanted) == [{column: row[column] for column in wanted} for row in plain.tasks["val"]]


def test_column_wise_gold_commands_are_the_row_wise_ones(data):
    for split, table in data.tables.items():
        gold_columns = columns.GoldColumns(table)
        texts = columns.command_texts(gold_columns)
        for number, row in enumerate(data.tasks[split]):
            assert columns.commands_text(texts[number], row).split("\n") == files.gold_commands(row)
            assert gold_columns.crafts(number) == len(row["gold_trajectory"])


def test_a_name_the_shell_must_quote_leaves_the_column_wise_path(data):
    import pyarrow as pa

    rows = copy.deepcopy(data.tasks["val"][:3])
    rows[1]["gold_trajectory"][0]["ingredients"][0]["item"] = "it's"
    table = pa.Table.from_pylist(rows, schema=data.tables["val"].schema)
    assert columns.command_texts(columns.GoldColumns(table)) is None
    broken = store.Records({"val": rows}, data.recipes_bytes, data.license_bytes, {"val": table})
    selection = export.Selection(broken)
    assert selection.gold[rows[1]["name"]][1].split("\n") == files.gold_commands(rows[1])


def test_a_selection_from_tables_gives_the_same_task_files(data, plain):
    fast, slow = export.Selection(data, ["val"], 40), export.Selection(plain, ["val"], 40)
    assert fast.tasks.keys() == slow.tasks.keys() and fast.crafts == slow.crafts
    shared = files.SharedBytes(data.recipes_bytes, data.world_name)
    for light, row in zip(fast.rows, slow.rows):
        assert files.task_files(light, shared, fast.gold[light["name"]]) == files.task_files(row, shared)
    assert fast.gold_failure() is None and slow.gold_failure() is None


@pytest.mark.parametrize("breakage", ["short", "wrong total"])
def test_the_column_wise_gold_check_fails_as_the_row_wise_one(data, breakage):
    import pyarrow as pa

    rows = copy.deepcopy(data.tasks["val"][:5])
    steps = rows[3]["gold_trajectory"]
    if breakage == "short":
        del steps[-1]
    else:
        steps[0]["count"] += 1
    table = pa.Table.from_pylist(rows, schema=data.tables["val"].schema)
    light = store.table_rows(table.select([name for name in records.TASK_COLUMNS if name != "gold_trajectory"]))
    problem = columns.gold_failure(data.world, light, columns.GoldColumns(table))
    with pytest.raises(Exception) as row_wise:
        gold.check_gold(data.world, rows[3])
    assert problem == str(row_wise.value) and rows[3]["name"] in problem
