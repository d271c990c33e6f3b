"""Publishing: the Hub repository's whole tree, staged on disk, then uploaded with ``HfApi.upload_folder``.

The Hub repository is the dataset card and everything a user of any product needs: the Parquet configs
for ``datasets``, the package and its command line, and the Harbor tasks that ``registry.json`` points at.
:func:`stage` writes that tree into STAGE::

    STAGE/README.md  LICENSE  pyproject.toml  textcraft_synth.py      from the repository root
    STAGE/registry.json  task-index.json  splits.json                 the root index files (checked fresh)
    STAGE/tcsynth/  data/  tests/  scripts/  benchmarks/  docs/  results/   from the repository
    STAGE/tasks/<name>/...                                             a fresh Harbor export of data/
    STAGE/.tcsynth-stage                                               our marker; never uploaded

Only ``tasks/`` is made here: ``export_harbor`` writes it into a scratch directory and it is moved in.
The export also writes the three index files; they must equal the repository's own byte for byte, or
the repository's copies are stale (their digests would not match the tasks) and staging stops.  The
export's own card and licence are dropped: the repository's ``README.md`` is the Hub card.

Files are copied, never linked: a symbolic link in the repository (``tcsynth/recipes.json`` may become
one) is staged as the bytes it points at.  Hidden names, ``__pycache__``, ``*.pyc`` and ``*.egg-info``
are left out.  Modes are fixed (0755 for a file with any execute bit, else 0644; directories 0755), so
two stages of the same checkout hold the same paths, bytes and modes.  The tree is built in a sibling
directory and renamed into place once complete; an existing STAGE is replaced only when it is empty or
holds our marker (or with ``force``).

:func:`upload` sends a staged tree to the Hub with ``HfApi.upload_folder`` (``repo_type="dataset"``, the
marker left out): with ``huggingface_hub`` 2.x (2.4 tested) and ``hf_xet`` it commits a large tree in
several batches below the Hub's limits and resumes an interrupted upload, where one ``create_commit`` of
38,000 files would not; older versions make one commit.  :func:`publish` stages, then uploads.

>>> staged = stage("build/hub")                                         # doctest: +SKIP
>>> staged.file_count, staged.total_bytes                               # doctest: +SKIP
>>> upload(staged, "apurvaga/textcraft-synth", create_pr=True)          # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import game, store
from .errors import UserError
from .harbor.layout import DIR_MODE, FILE_MODE, ROOT_INDEX_FILES, SCRIPT_MODE, TASKS_DIR

MARKER = ".tcsynth-stage"
MARKER_FORMAT = "textcraft-synth-stage/1"
# Root files the Hub repository must have; staging fails without any of them.
ROOT_FILES = ("README.md", "LICENSE", "pyproject.toml", "textcraft_synth.py")
PACKAGE_DIR = "tcsynth"
DATA_DIR = store.DEFAULT_DATA_DIR.name
# Directories published when the checkout has them: tests (the README's test command works in a clone
# of the Hub repository too), maintainer scripts, benchmarks, the figures and the evaluation results.
OPTIONAL_DIRS = ("tests", "scripts", "benchmarks", "docs", "results")
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")
REPO_TYPE = "dataset"
# The Hub makes this file with the repository (its LFS patterns); a stage never holds it.
COMMIT_MESSAGE = "Publish TextCraft-Synth: the Parquet configs, the package and every Harbor task"


class PublishError(UserError):
    """The tree cannot be staged or uploaded: a bad option, stale index files, or a refusal from the Hub."""


@dataclass(frozen=True)
class StagedTree:
    """A staged Hub tree: its directory and every file in it (sorted POSIX paths, marker excluded)."""

    root: Path
    files: Tuple[str, ...]
    total_bytes: int
    task_count: int

    @property
    def file_count(self) -> int:
        return len(self.files)

    def summary(self) -> str:
        return "%s files (%s tasks), %s bytes in %s" % (
            "{:,}".format(self.file_count),
            "{:,}".format(self.task_count),
            "{:,}".format(self.total_bytes),
            self.root,
        )


# ----------------------------------------------------------------------------------- what gets published


def _skipped(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__" or name.endswith(SKIPPED_SUFFIXES)


def _collect(source: Path, prefix: str) -> Dict[str, Path]:
    """{relative POSIX path under ``prefix``: the file to read} for every published file below ``source``.

    Symbolic links to files are followed (their targets' bytes are staged); a link to a directory, a
    broken link or anything that is not a regular file stops staging.
    """
    found: Dict[str, Path] = {}
    for directory, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(name for name in dirnames if not _skipped(name))
        here = Path(directory)
        for name in dirnames:
            if (here / name).is_symlink():
                raise PublishError("%s is a symbolic link to a directory; only file links are staged" % (here / name))
        for name in sorted(filenames):
            if _skipped(name):
                continue
            path = here / name
            if not path.is_file():  # follows links: a broken link or a FIFO lands here
                raise PublishError("%s is not a regular file (or a link to one)" % path)
            found[prefix + "/" + path.relative_to(source).as_posix()] = path
    return found


def hub_sources(repo_root: Path, data_dir: Optional[Path] = None) -> Dict[str, Path]:
    """{path in the Hub repository: the local file it comes from} for everything but ``tasks/``."""
    repo_root = Path(repo_root)
    data_dir = Path(data_dir) if data_dir is not None else repo_root / DATA_DIR
    sources: Dict[str, Path] = {}
    for name in ROOT_FILES + ROOT_INDEX_FILES:
        path = repo_root / name
        if not path.is_file():
            raise PublishError("%s is missing: the Hub repository needs it" % path)
        sources[name] = path
    for name, directory in ((PACKAGE_DIR, repo_root / PACKAGE_DIR), (DATA_DIR, data_dir)):
        if not directory.is_dir():
            raise PublishError("%s is not a directory: the Hub repository needs %s/" % (directory, name))
        sources.update(_collect(directory, name))
    for name in OPTIONAL_DIRS:
        if (repo_root / name).is_dir():
            sources.update(_collect(repo_root / name, name))
    return sources


def _mode_of(path: Path) -> int:
    return SCRIPT_MODE if os.stat(path).st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH) else FILE_MODE


# ------------------------------------------------------------------------------------------------- stage


def _is_our_stage(path: Path) -> bool:
    try:
        return json.loads((path / MARKER).read_text()).get("format") == MARKER_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _check_stage_dir(stage_dir: Path, repo_root: Path, data_dir: Path, force: bool) -> None:
    if stage_dir.is_symlink() or (stage_dir.exists() and not stage_dir.is_dir()):
        raise PublishError("%s exists and is not a directory" % stage_dir)
    resolved = stage_dir.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise PublishError("the stage directory %s holds the current directory; choose another" % stage_dir)
    if resolved == repo_root.resolve() or resolved in repo_root.resolve().parents:
        raise PublishError("the stage directory %s holds the repository %s; choose another" % (stage_dir, repo_root))
    for published in [data_dir] + [repo_root / name for name in (PACKAGE_DIR,) + OPTIONAL_DIRS]:
        published = published.resolve()
        if resolved == published or published in resolved.parents or resolved in published.parents:
            raise PublishError("the stage directory %s overlaps %s, which is published" % (stage_dir, published))
    if stage_dir.is_dir() and any(stage_dir.iterdir()) and not (force or _is_our_stage(stage_dir)):
        raise PublishError("%s is not empty and is not a staged tree (use --force to replace it)" % stage_dir)


def _copy(source: Path, target: Path, mode: int) -> None:
    with open(source, "rb") as reader, open(target, "xb") as writer:  # "rb" follows a link to its bytes
        shutil.copyfileobj(reader, writer, 1 << 20)
    os.chmod(target, mode)


def _make_dirs(root: Path, relative: str, made: set) -> None:
    parts = relative.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        directory = "/".join(parts[:depth])
        if directory not in made:
            os.mkdir(root / directory)
            os.chmod(root / directory, DIR_MODE)
            made.add(directory)


def _export_tasks(scratch: Path, data: store.Records, progress: bool) -> Tuple[Path, Dict[str, bytes]]:
    """A fresh Harbor export in ``scratch``: its ``tasks/`` directory and its root index files."""
    from .harbor import export_harbor

    out = scratch / "export"
    export_harbor(out, data, progress=progress)
    return out / TASKS_DIR, {name: (out / name).read_bytes() for name in ROOT_INDEX_FILES}


def _check_fresh(sources: Dict[str, Path], exported: Dict[str, bytes]) -> None:
    stale = [name for name in ROOT_INDEX_FILES if sources[name].read_bytes() != exported[name]]
    if stale:
        raise PublishError(
            "%s at the repository root %s not what a fresh export writes: refresh them with "
            "`python -m textcraft_synth export-harbor . --index-only`"
            % (", ".join(stale), "is" if len(stale) == 1 else "are")
        )
    game_path = sources.get(PACKAGE_DIR + "/game.py")
    if game_path is not None and game_path.read_bytes() != Path(game.__file__).read_bytes():
        raise PublishError(
            "%s differs from the game file the tasks carry (%s): stage with the checkout's own package"
            % (game_path, game.__file__)
        )


def _tree_files(root: Path) -> Tuple[List[str], int]:
    files: List[str] = []
    total = 0
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            path = Path(directory) / name
            relative = path.relative_to(root).as_posix()
            if relative != MARKER:
                files.append(relative)
                total += path.lstat().st_size
    return sorted(files), total


def stage(
    stage_dir: Path,
    repo_root: Path = store.REPO_ROOT,
    data_dir: Optional[Path] = None,
    progress: bool = False,
    force: bool = False,
) -> StagedTree:
    """Write the complete Hub tree of the checkout ``repo_root`` to ``stage_dir``; return what it holds.

    Args:
        stage_dir (`Path`): where the tree goes; absent, empty, a previous stage, or (with ``force``) anything.
        repo_root (`Path`, defaults to this checkout): the repository whose files are published.
        data_dir (`Path`, optional): the records, published as ``data/`` (default: ``repo_root/data``).
        progress (`bool`, defaults to `False`): progress bars while the Harbor tasks are built.
        force (`bool`, defaults to `False`): replace a non-empty ``stage_dir`` that is not a stage of ours.

    Raises :class:`PublishError` (one line) for a bad ``stage_dir``, a missing file, a link to a
    directory, or root index files that a fresh export would write differently.
    """
    try:
        return _stage(Path(stage_dir), Path(repo_root), data_dir, progress, force)
    except PublishError:
        raise
    except OSError as error:  # an unwritable or full disk, an output path below a file
        raise PublishError("cannot stage %s: %s" % (stage_dir, error))
    except ValueError as error:  # the records do not read, or a gold solution fails in the export
        raise PublishError(str(error))


def _stage(stage_dir: Path, repo_root: Path, data_dir: Optional[Path], progress: bool, force: bool) -> StagedTree:
    data_dir = Path(data_dir) if data_dir is not None else repo_root / DATA_DIR
    _check_stage_dir(stage_dir, repo_root, data_dir, force)
    sources = hub_sources(repo_root, data_dir)
    data = store.load_records(data_dir)
    stage_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = store.staging_directory(stage_dir)
    try:
        os.chmod(staging, DIR_MODE)
        scratch = staging / ".export"
        scratch.mkdir()
        tasks_dir, exported = _export_tasks(scratch, data, progress)
        _check_fresh(sources, exported)
        made: set = set()
        for relative in sorted(sources):
            _make_dirs(staging, relative, made)
            _copy(sources[relative], staging / relative, _mode_of(sources[relative]))
        os.rename(tasks_dir, staging / TASKS_DIR)  # the export already fixed its modes
        shutil.rmtree(scratch)
        files, total = _tree_files(staging)
        task_count = sum(1 for _ in (staging / TASKS_DIR).iterdir())
        marker = {"format": MARKER_FORMAT, "files": len(files), "bytes": total, "tasks": task_count}
        (staging / MARKER).write_text(json.dumps(marker, sort_keys=True) + "\n")
        os.chmod(staging / MARKER, FILE_MODE)
        store.swap_directory(staging, stage_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return StagedTree(stage_dir, tuple(files), total, task_count)


def read_stage(stage_dir: Path) -> StagedTree:
    """The :class:`StagedTree` of a directory :func:`stage` wrote earlier."""
    stage_dir = Path(stage_dir)
    if not _is_our_stage(stage_dir):
        raise PublishError("%s is not a staged tree (no %s marker)" % (stage_dir, MARKER))
    files, total = _tree_files(stage_dir)
    return StagedTree(stage_dir, tuple(files), total, sum(1 for _ in (stage_dir / TASKS_DIR).iterdir()))


# ------------------------------------------------------------------------------------------------ upload


def upload_arguments(staged: StagedTree, repo_id: str, revision: Optional[str] = None, create_pr: bool = False,
                     token: Optional[str] = None, commit_message: str = COMMIT_MESSAGE, delete_missing: bool = False) -> Dict[str, Any]:
    """The keyword arguments of the ``HfApi.upload_folder`` call that uploads ``staged`` (see :func:`upload`)."""
    return dict(
        repo_id=repo_id,
        folder_path=str(staged.root),
        repo_type=REPO_TYPE,
        revision=revision,
        create_pr=create_pr,
        token=token,
        commit_message=commit_message,
        ignore_patterns=[MARKER],
        # Every remote file the stage does not hold; huggingface_hub always keeps .gitattributes.
        delete_patterns=["*"] if delete_missing else None,
    )


def upload(
    staged: StagedTree,
    repo_id: str,
    revision: Optional[str] = None,
    create_pr: bool = False,
    token: Optional[str] = None,
    api: Any = None,
    commit_message: str = COMMIT_MESSAGE,
    delete_missing: bool = False,
) -> Any:
    """Upload ``staged`` to the dataset repository ``repo_id``; returns the ``CommitInfo`` (of the last commit).

    Args:
        staged (`StagedTree`): from :func:`stage` or :func:`read_stage`.
        repo_id (`str`): ``namespace/name`` of an existing dataset repository.
        revision (`str`, optional): the branch to commit to (default: ``main``).
        create_pr (`bool`, defaults to `False`): open a pull request with the upload instead.
        token (`str`, optional): a Hub token; `None` lets ``huggingface_hub`` find one
            (``HF_TOKEN``, then the token saved by ``hf auth login``).
        api (optional): an ``HfApi`` (tests pass a stand-in); default ``HfApi(token=token)``.
        commit_message (`str`): the commit's summary line (later batches get `` (part N)``).
        delete_missing (`bool`, defaults to `False`): also delete every file the repository holds at
            ``revision`` that the stage does not (``.gitattributes`` is kept).

    Without ``delete_missing`` files the repository holds that the stage does not are left alone.  Run it
    again after an interruption: what was committed is skipped.  Errors from the Hub (no such repository,
    no token, no permission) raise :class:`PublishError`.
    """
    check_repo_id(repo_id)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    try:
        return api.upload_folder(**upload_arguments(staged, repo_id, revision, create_pr, token, commit_message, delete_missing))
    except _hub_errors() as error:
        raise PublishError(_hub_error_line(repo_id, error)) from error


def _hub_errors() -> Tuple[type, ...]:
    """What the Hub client raises for a refusal, a missing token or repository, or a broken connection.

    ``HfHubHTTPError`` and a missing token are ``OSError``s; bad arguments are ``ValueError``s; the HTTP
    library's transport errors share the base class ``huggingface_hub.errors`` imports as ``HTTPError``.
    """
    from huggingface_hub import errors

    return (OSError, ValueError, getattr(errors, "HTTPError", OSError))


def _hub_error_line(repo_id: str, error: BaseException) -> str:
    from huggingface_hub.errors import LocalTokenNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, RepositoryNotFoundError):
        return "the dataset repository %s was not found, or the token cannot write to it (create it with " \
               "`hf repos create %s --repo-type dataset`): %s" % (repo_id, repo_id, first_line)
    if isinstance(error, RevisionNotFoundError):
        return "no such revision in %s: %s" % (repo_id, first_line)
    if isinstance(error, LocalTokenNotFoundError):
        return "no Hub token: set HF_TOKEN or run `hf auth login`"
    return "upload to %s failed (%s): %s" % (repo_id, type(error).__name__, first_line)


def check_repo_id(repo_id: str) -> None:
    """Raise :class:`PublishError` unless ``repo_id`` is a valid ``namespace/name``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise PublishError(str(error))
    if repo_id.count("/") != 1:
        raise PublishError("repository id must be namespace/name, got %r" % repo_id)


def publish(
    repo_id: str,
    stage_dir: Optional[Path] = None,
    dry_run: bool = False,
    revision: Optional[str] = None,
    create_pr: bool = False,
    token: Optional[str] = None,
    api: Any = None,
    repo_root: Path = store.REPO_ROOT,
    data_dir: Optional[Path] = None,
    force: bool = False,
    delete_missing: bool = False,
    progress: bool = False,
    log: Callable[[str], None] = lambda line: None,
) -> Tuple[StagedTree, Any]:
    """Stage the Hub tree and, unless ``dry_run``, upload it (:func:`upload`); returns (tree, commit info).

    Without ``stage_dir`` the tree is staged in a temporary directory removed at the end (a dry run then
    only proves that the tree can be built).  The repository id is checked before anything is staged.
    """
    check_repo_id(repo_id)
    with tempfile.TemporaryDirectory(prefix="tcsynth-publish-") as scratch:
        target = Path(stage_dir) if stage_dir is not None else Path(scratch) / "stage"
        staged = stage(target, repo_root=repo_root, data_dir=data_dir, progress=progress, force=force)
        log("staged %s" % staged.summary())
        if dry_run:
            return staged, None
        result = upload(
            staged, repo_id, revision=revision, create_pr=create_pr, token=token, api=api, delete_missing=delete_missing
        )
        log("committed to %s: %s" % (repo_id, getattr(result, "commit_url", result)))
        return staged, result
