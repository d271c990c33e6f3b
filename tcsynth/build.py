"""Building ``data/``: from the source files (``build-data``) or again from the records it holds (``build``).

Both paths check everything before writing anything: for the published world (``textcraft-synth@1``) the
SHA-256 of every source file and that the rows convert back to its bytes; for every world the shape of
every task line and that every gold trajectory replays in the engine to reward 1.0.  Output goes to a
staging directory that replaces ``data/`` only when complete, so a failed build leaves ``data/`` as it was.

:func:`config_rows` is the one place that knows how each config's rows come from the records; the
``datasets`` builder in ``textcraft_synth.py`` calls it too.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from tqdm.auto import tqdm

from . import background, configs, game, records, sft, store
from .errors import UserError
from .store import Records

Log = Callable[[str], None]
DISTRIBUTION = "textcraft-synth"
# The extra whose exact versions rebuild data/ byte for byte (declared once, in pyproject.toml).
BUILD_EXTRA = "build"


class BuildError(UserError):
    """The inputs cannot be built from; the message names the file and the reason in one line."""


# ----------------------------------------------------------------------------------------- reading sources


def read_source(source_dir: Path) -> Records:
    """Read and check the source files in ``source_dir`` (hashes pinned in :data:`records.SOURCE_SHA256`)."""
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        raise BuildError("%s: no such source directory" % source_dir)
    blobs: Dict[str, bytes] = {}
    for filename in list(records.SOURCE_SHA256) + [records.LICENSE_FILE]:
        path = source_dir / filename
        try:
            blobs[filename] = path.read_bytes()
        except OSError as error:
            raise BuildError("%s: cannot read: %s" % (path, error.strerror or error))
        expected = records.SOURCE_SHA256.get(filename)
        if expected is not None and records.sha256_hex(blobs[filename]) != expected:
            raise BuildError(
                "%s: SHA-256 is %s, expected %s (altered or truncated)"
                % (path, records.sha256_hex(blobs[filename]), expected)
            )
    tasks = {}
    for split, filename in records.SOURCE_FILES.items():
        try:
            lines = records.parse_source_file(blobs[filename], str(source_dir / filename))
        except records.SourceError as error:  # one kind of error for every bad input of build-data
            raise BuildError(str(error))
        tasks[split] = records.rows_from_source_lines(split, lines)
    return Records(tasks, blobs[records.RECIPES_FILE], blobs[records.LICENSE_FILE])


# -------------------------------------------------------------------------------------------- verification


def check_release(data: Records, lines: Optional[Mapping[str, List[Dict[str, Any]]]] = None) -> None:
    """For the published world, the pinned bytes: ``recipes.json`` and each split's source file.

    ``lines``: each split's source tasks already made from its rows (:func:`check_round_trip` has them).
    """
    if records.sha256_hex(data.recipes_bytes) != records.SOURCE_SHA256[records.RECIPES_FILE]:
        raise BuildError("%s: not the textcraft-synth@1 world (SHA-256 differs)" % records.RECIPES_FILE)
    for split, filename in records.SOURCE_FILES.items():
        rows = data.tasks[split]
        if len(rows) != records.TASK_COUNTS[split]:
            raise BuildError("%s: %d tasks, expected %d" % (split, len(rows), records.TASK_COUNTS[split]))
        tasks = lines[split] if lines is not None else [records.source_from_row(row) for row in rows]
        if records.sha256_hex(b"".join(map(records.source_line, tasks))) != records.SOURCE_SHA256[filename]:
            raise BuildError("%s: the rows do not convert back to %s byte for byte" % (split, filename))


def gold_failure(world: game.World, tasks: Mapping[str, List[Dict[str, Any]]], progress: bool = False) -> Optional[str]:
    """The first task whose gold trajectory does not reach its goal in the engine, as a message, or None.

    Each gold craft goes straight to the engine's ``craft`` tool (the calls are the records' own, so there
    is nothing to parse), then ``finish``; every craft must be accepted and the episode must succeed.
    """
    total = sum(len(rows) for rows in tasks.values())
    with tqdm(total=total, desc="replaying gold trajectories", unit="task", disable=not progress or None) as bar:
        for rows in tasks.values():
            for row in rows:
                task = records.engine_task(row)
                played = game.Game.for_task(world, task)
                for number, (item, count, ingredients) in enumerate(records.gold_steps(row), 1):
                    answer = played.craft(ingredients, [item, count])
                    if not game.craft_succeeded(answer):
                        return "%s: the gold trajectory does not reach the goal: craft %d: %s" % (row["name"], number, answer)
                played.finish(records.finish_message(task["target_items"]))
                if not played.succeeded():
                    return "%s: the gold trajectory does not reach the goal: %s" % (row["name"], game.judge(played, 0, []).reason)
                bar.update(1)
    return None


def check_gold(data: Records, progress: bool = True) -> None:
    """Raise :class:`BuildError` unless every task's gold trajectory reaches its goal in the engine."""
    problem = gold_failure(data.world, data.tasks, progress)
    if problem:
        raise BuildError(problem)


def check_round_trip(data: Records) -> None:
    """Raise :class:`BuildError` unless the records are complete and lossless (gold not played).

    The published world (its name is :data:`records.TASK_NAME_PREFIX`) must also be byte for byte the
    pinned source; any other world (a generated one) is checked by its rows' round trip.
    """
    lines = {split: [records.source_from_row(row) for row in rows] for split, rows in data.tasks.items()}
    if data.world_name == records.TASK_NAME_PREFIX:
        check_release(data, lines)
    for split, rows in data.tasks.items():
        for row in rows:  # eval reads the gold trajectory's length from num_craft_steps
            if row["num_craft_steps"] != len(row["gold_trajectory"]):
                raise BuildError("%s: num_craft_steps is %d, the gold trajectory has %d steps" % (row["name"], row["num_craft_steps"], len(row["gold_trajectory"])))
        if records.rows_from_source_lines(split, lines[split], data.world_name) != rows:
            raise BuildError("%s: the rows do not convert to source lines and back unchanged" % split)


def verify_records(data: Records, progress: bool = True) -> None:
    """Raise :class:`BuildError` unless the records are complete, lossless and every gold trajectory wins."""
    check_round_trip(data)
    check_gold(data, progress)


def records_failure(data: Records) -> Optional[str]:
    """What :func:`verify_records` would raise, as a message, or None: the round trip, then the gold."""
    try:
        check_round_trip(data)
    except BuildError as error:
        return str(error)
    return gold_failure(data.world, data.tasks)


Extra = Callable[[Records], Dict[str, bytes]]  # more files made from the records (the root index files)


def verified_products(data: Records, names: Optional[Sequence[str]] = None, progress: bool = True,
                      extra: Optional[Extra] = None) -> Tuple[Dict[str, bytes], Dict[str, bytes]]:
    """Every file of ``data/`` (:func:`product_files`) and ``extra(data)``, made only from records that pass
    :func:`verify_records`.

    Two processes share the work (:mod:`tcsynth.background`), split to take about as long on two cores:
    this one renders the train split's sft conversations and makes their files; a forked child checks the
    records (:func:`records_failure`) and, if they pass, makes every other file and ``extra``.  The optional
    sft-recursive config, when asked for, is rendered first by two more forked workers.  Nothing is
    returned, so nothing is written, unless the records pass; when making the files fails too, the
    records' failure is reported first: it is the cause.
    """
    for split in data.tasks:
        data.tasks[split]  # the rows are made before the fork, so both processes share them
    data.world, data.world_name  # and a world that does not read fails here, in this process
    jobs = product_jobs(names)
    recursive = [job for job in jobs if job[0].kind == configs.SFT_RECURSIVE]
    mine = [job for job in jobs if job[0].kind == configs.SFT and job[1] == "train"] + recursive
    theirs = [job for job in jobs if job not in mine]
    gc.freeze()  # the rows live to the end: no collection walks them (nor copies their pages into the child)
    try:
        wait = background.start(_checked_files, data, theirs, extra, what="the process checking the records")
        try:
            # sft-recursive, when present, is most of the work: rendered before this process starts threads.
            rendered = {job: config_rows(job[0], data, job[1], progress, processes=2) for job in recursive}
            files = product_files(data, jobs=mine, progress=progress, rendered=rendered)
        except BaseException:
            try:
                problem = wait()[0]
            except Exception:
                problem = None
            if problem:
                raise BuildError(problem)
            raise
        problem, theirs_files, extra_files = wait()
    finally:
        gc.unfreeze()
    if problem:
        raise BuildError(problem)
    files.update(theirs_files)
    return dict(sorted(files.items())), extra_files


def _checked_files(data: Records, jobs: Sequence["Job"], extra: Optional[Extra]) -> Tuple[Optional[str], Dict[str, bytes], Dict[str, bytes]]:
    """The child's share: the records' failure (or None), then, if they pass, the files of ``jobs`` and ``extra``."""
    problem = records_failure(data)
    if problem:
        return problem, {}, {}
    return None, product_files(data, jobs=jobs, progress=False), extra(data) if extra else {}


# --------------------------------------------------------------------------------------------- config rows


def recipe_rows(data: Records) -> List[Dict[str, Any]]:
    """One row per item of the world, shallow items first (then by name); base items have no recipe."""
    world = data.world_document
    base = set(world["base_items"])
    depths = world["depths"]
    rows = []
    for item in sorted(base | set(world["recipes"]), key=lambda name: (depths.get(name, 0), name)):
        recipes = world["recipes"].get(item, [])
        if len(recipes) > 1:
            raise BuildError("%s has %d recipes; the recipes config holds one per item" % (item, len(recipes)))
        recipe = recipes[0] if recipes else None
        rows.append(
            {
                "item": item,
                "depth": depths.get(item, 0),
                "is_base": item in base,
                "result_count": recipe["result_count"] if recipe else None,
                "ingredients": [{"item": name, "count": count} for name, count in recipe["ingredients"]] if recipe else [],
            }
        )
    return rows


def config_rows(spec: configs.ConfigSpec, data: Records, split: str, progress: bool = True, processes: int = 1) -> List[Dict[str, Any]]:
    """The rows of one split of a config, from the records (sft rows with messages as JSON text);
    ``processes`` > 1 renders sft-recursive in that many forked processes."""
    if spec.kind == configs.RECIPES:
        return recipe_rows(data)
    if spec.kind == configs.SFT:
        rows = sft.sft_rows(data, split, parallel=spec.parallel, progress=progress)
    elif spec.kind == configs.SFT_RECURSIVE:
        from . import sft_recursive

        rows = sft_recursive.sft_recursive_rows(data, split, progress=progress, processes=processes)
    else:
        rows = data.tasks[split]
    return [row for row in rows if spec.keeps(row)]


# ------------------------------------------------------------------------------------------------- writing


def pinned_build_versions() -> Dict[str, str]:
    """``{package: version}`` of the ``build`` extra: the versions that rebuild ``data/`` byte for byte."""
    from importlib import metadata

    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return {}
    pinned = {}
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        if "==" in spec and BUILD_EXTRA in marker and "extra" in marker:
            name, _, version = spec.partition("==")
            pinned[name.strip()] = version.strip()
    return pinned


def version_mismatches() -> List[str]:
    """``"pyarrow 25.0.0 (data/ is built with 26.0.1)"`` for every installed version that differs from the pin."""
    from importlib import metadata

    found = []
    for name, wanted in sorted(pinned_build_versions().items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "none"
        if installed != wanted:
            found.append("%s %s (data/ is built with %s)" % (name, installed, wanted))
    return found


def config_names(data_dir: Optional[Path] = None, optional: bool = False) -> List[str]:
    """The configs a data directory gets: every required one, and each optional one that ``data_dir``
    already holds (or all of them with ``optional``)."""
    return [
        name for name, spec in configs.CONFIGS.items()
        if not spec.optional or optional or (data_dir is not None and (Path(data_dir) / name).is_dir())
    ]


Job = Tuple[configs.ConfigSpec, str]  # a config and one of its splits: one Parquet file


def product_jobs(names: Optional[Sequence[str]] = None) -> List[Job]:
    """The Parquet files of the configs ``names`` (default: all), as (config, split), in config order."""
    return [(spec, split) for spec in configs.CONFIGS.values() if names is None or spec.name in names for split in spec.splits]


def product_files(data: Records, names: Optional[Sequence[str]] = None, jobs: Optional[Sequence[Job]] = None,
                  progress: bool = True, rendered: Optional[Mapping[Job, List[Dict[str, Any]]]] = None) -> Dict[str, bytes]:
    """Files of ``data/`` ({relative path: bytes}) derived from the records: the Parquet files of ``jobs``
    (default: every split of the configs ``names``, default all; ``rendered`` holds rows already made for
    some), with the world and its license.

    This thread makes each file's rows and Arrow table; Parquet encoding and compression run in worker
    threads (pyarrow releases the GIL) meanwhile.  A config of one difficulty whose whole config is made
    here too (``sft-easy`` of ``sft``) is that table filtered, not its rows converted again.
    """
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.compute as pc

    files = {records.RECIPES_FILE: data.recipes_bytes, records.LICENSE_FILE: data.license_bytes}
    pending = {}
    tables = {}  # (config, split) -> its Arrow table, for the configs that are filtered from it
    with ThreadPoolExecutor(max_workers=2) as pool:
        for spec, split in product_jobs(names) if jobs is None else jobs:
            whole = tables.get((configs.whole_config(spec), split))
            if whole is not None:
                table = whole.filter(pc.equal(whole["difficulty"], spec.difficulty))
            else:
                rows = rendered[spec, split] if rendered and (spec, split) in rendered else config_rows(spec, data, split, progress)
                table = tables[spec.name, split] = store.arrow_table(rows, configs.arrow_schema(spec.kind))
            pending["%s/%s.parquet" % (spec.name, split)] = pool.submit(store.table_parquet_bytes, table)
        for relative, job in pending.items():
            files[relative] = job.result()
    return files


def write_data(data: Records, data_dir: Path, log: Optional[Log] = None, progress: bool = True, names: Optional[Sequence[str]] = None,
               index_dir: Optional[Path] = None) -> List[str]:
    """Verify ``data`` and make ``data_dir`` hold exactly its products (the configs ``names``, default all);
    returns the relative paths written.  With ``index_dir``, the root index files (``registry.json``,
    ``task-index.json``, ``splits.json``) are written there too, once ``data_dir`` is complete."""
    from . import harbor

    files, index = verified_products(data, names, progress, extra=harbor.root_index_files if index_dir is not None else None)
    store.replace_directory(Path(data_dir), files)
    if index_dir is not None:
        harbor.write_root_files(Path(index_dir), index)
    if log:
        for relative in sorted(files):
            log("wrote %s (%d bytes)" % (Path(data_dir) / relative, len(files[relative])))
    return sorted(files)


# ------------------------------------------------------------------------------- a whole dataset directory

DATASET_MARKER = ".textcraft-synth-dataset"


def world_card(data: Records, arguments: str, names: Optional[Sequence[str]] = None) -> bytes:
    """The dataset card (README.md) of a generated world: YAML configs, its shape, how to regenerate it."""
    from . import templating

    document = data.world_document
    generator = document.get("generator", {})
    table = "\n".join("| %s | %s | %s |" % (split, "{:,}".format(len(rows)), records.difficulty_counts_text(rows)) for split, rows in data.tasks.items())
    example = next((rows[0]["name"] for rows in reversed(list(data.tasks.values())) if rows), "")
    values = {
        "world": data.world_name,
        "environment": records.environment_id(data.world_name),
        "configs_yaml": configs.card_configs_yaml(names),
        "base_items": len(document["base_items"]),
        "craftable_items": len(document["recipes"]),
        "max_depth": max(document["depths"].values(), default=0),
        "total": "{:,}".format(sum(len(rows) for rows in data.tasks.values())),
        "table": table,
        "depth_ranges": records.depth_ranges_text(),
        "arguments": arguments,
        "generator_version": generator.get("version", "?"),
        "example_task": example,
    }
    return templating.render(templating.TEMPLATES / "world-card.md", values).encode("utf-8")


def check_dataset_target(out: Path, force: bool) -> Path:
    """``out`` if a dataset may be written there: absent, empty, or an earlier one (unless ``force``)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BuildError("%s exists and is not a directory" % out)
    if out.is_dir() and any(out.iterdir()) and not (out / DATASET_MARKER).is_file() and not force:
        raise BuildError("%s is not empty and is not an earlier generated dataset (use --force to replace it)" % out)
    if out.resolve() in (Path.cwd().resolve(), *Path.cwd().resolve().parents) or out.resolve() == store.REPO_ROOT:
        raise BuildError("%s is the current directory, above it, or the checkout; choose a directory of its own" % out)
    return out


def write_dataset(out: Path, data: Records, card: bytes, progress: bool = True, names: Optional[Sequence[str]] = None) -> Dict[str, bytes]:
    """Write a complete dataset directory at ``out`` (all or nothing): ``data/`` with the configs ``names``
    (default: all), the card ``README.md`` (whose YAML makes ``load_dataset(out)`` work) and the root
    index files."""
    from . import harbor

    products, index = verified_products(data, names, progress, extra=harbor.root_index_files)
    files = {"data/" + relative: payload for relative, payload in products.items()}
    files.update(index)
    files["README.md"] = card
    files[DATASET_MARKER] = b"A dataset written by textcraft-synth generate-world; it may replace this directory.\n"
    store.replace_directory(out, files)
    return files


def build_data(source_dir: Path, data_dir: Path = store.DEFAULT_DATA_DIR, **kwargs) -> List[str]:
    """``build-data``: import the source files into ``data_dir``."""
    return write_data(read_source(source_dir), data_dir, **kwargs)


def build(data_dir: Path = store.DEFAULT_DATA_DIR, **kwargs) -> List[str]:
    """``build``: rebuild every product in ``data_dir`` from the records it already holds (an optional
    config only where ``data_dir`` has it)."""
    return write_data(store.load_records(data_dir), data_dir, names=config_names(data_dir), **kwargs)
