"""The Hub tree: staged from the checkout, read by Harbor's own client over git and by ``datasets``, uploaded by upload_folder.

Most tests stage a small checkout made in ``tmp_path`` (six tasks); the full tree (3,154 tasks) is staged
once per session for the end-to-end checks: Harbor downloads the val dataset from it over ``git://`` and
lints every task, ``datasets`` loads its configs, and the upload hands the stage to a recording stand-in
for ``HfApi.upload_folder`` (the Hub cannot be reached from the tests), whose own file filter must pick
exactly the staged files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import datasets
import pyarrow.parquet as pq
import pytest
from huggingface_hub.utils import filter_repo_objects
from huggingface_hub.errors import RepositoryNotFoundError

import harbor_venv
from tcsynth import publish, store
from tcsynth.configs import TASKS, features
from tcsynth.harbor import export_harbor

REPO = Path(__file__).resolve().parent.parent
ROWS_PER_SPLIT = 3
VAL_DATASET = "textcraft-synth-val@1.0"


# ------------------------------------------------------------------------------------------------ helpers


def tree_listing(root: Path) -> Dict[str, Tuple[int, str]]:
    """{relative path: (mode, sha256)} of every file below ``root``, the marker included."""
    listing = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            listing[path.relative_to(root).as_posix()] = (path.stat().st_mode & 0o7777, hashlib.sha256(data).hexdigest())
    return listing


def directory_modes(root: Path) -> set:
    return {path.stat().st_mode & 0o7777 for path in root.rglob("*") if path.is_dir()}


def small_data(data_dir: Path) -> None:
    """The first rows of each split, with the real world and licence: a data/ that exports in a blink."""
    for split in ("train", "val"):
        table = pq.read_table(store.parquet_path(REPO / "data", "tasks", split))
        target = store.parquet_path(data_dir, "tasks", split)
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(0, ROWS_PER_SPLIT), target)
    for name in ("recipes.json", "LICENSE.platoon"):
        shutil.copyfile(REPO / "data" / name, data_dir / name)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A small checkout: the real root files and package, six tasks, and index files that match them."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in publish.ROOT_FILES:
        shutil.copyfile(REPO / name, root / name)
    shutil.copytree(REPO / "tcsynth", root / "tcsynth", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    small_data(root / "data")
    (root / "scripts").mkdir()
    (root / "scripts" / "tool.py").write_text("print('a maintainer script')\n")
    os.chmod(root / "scripts" / "tool.py", 0o700)
    exported = tmp_path / "index-export"
    export_harbor(exported, store.load_records(root / "data"))
    for name in publish.ROOT_INDEX_FILES:
        shutil.copyfile(exported / name, root / name)
    shutil.rmtree(exported)
    return root


def siblings(path: Path) -> List[str]:
    return sorted(entry.name for entry in path.parent.iterdir() if entry.name != path.name)


# ------------------------------------------------------------------------------------ the staged tree


def test_stage_holds_the_repository_files_and_a_fresh_export(checkout, tmp_path):
    (checkout / "tcsynth" / "__pycache__").mkdir()
    (checkout / "tcsynth" / "__pycache__" / "game.cpython-311.pyc").write_bytes(b"\0")
    (checkout / "data" / ".DS_Store").write_bytes(b"\0")
    (checkout / "notes.txt").write_text("not for the Hub\n")
    staged = publish.stage(tmp_path / "hub", repo_root=checkout)
    expected = tmp_path / "expected"
    export_harbor(expected, store.load_records(checkout / "data"))

    repo_files = {
        path.relative_to(checkout).as_posix()
        for path in checkout.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.name not in (".DS_Store", "notes.txt")
    }
    task_files = {path.relative_to(expected).as_posix() for path in (expected / "tasks").rglob("*") if path.is_file()}
    assert set(staged.files) == repo_files | task_files
    assert list(staged.files) == sorted(staged.files)
    assert staged.task_count == 2 * ROWS_PER_SPLIT
    assert staged.total_bytes == sum((staged.root / name).stat().st_size for name in staged.files)
    for name in repo_files:
        assert (staged.root / name).read_bytes() == (checkout / name).read_bytes(), name
    for name in task_files:
        assert (staged.root / name).read_bytes() == (expected / name).read_bytes(), name
    assert json.loads((staged.root / publish.MARKER).read_text())["format"] == publish.MARKER_FORMAT
    assert publish.MARKER not in staged.files
    assert publish.read_stage(staged.root) == staged
    assert siblings(staged.root) == ["checkout", "expected"]  # no staging directory left behind


def test_stage_is_deterministic_whatever_the_umask_and_source_modes(checkout, tmp_path):
    os.chmod(checkout / "LICENSE", 0o600)
    first = publish.stage(tmp_path / "first", repo_root=checkout)
    previous = os.umask(0o077)
    try:
        second = publish.stage(tmp_path / "second", repo_root=checkout)
    finally:
        os.umask(previous)
    assert tree_listing(first.root) == tree_listing(second.root)
    listing = tree_listing(first.root)
    assert listing["LICENSE"][0] == 0o644
    assert listing["scripts/tool.py"][0] == 0o755
    assert {mode for mode, _ in listing.values()} == {0o644, 0o755}
    assert directory_modes(first.root) == directory_modes(second.root) == {0o755}


def test_symbolic_links_are_staged_as_the_bytes_they_point_at(checkout, tmp_path):
    assert (checkout / "tcsynth" / "recipes.json").is_symlink()  # as in the repository: a link into data/
    staged = publish.stage(tmp_path / "hub", repo_root=checkout)
    copy = staged.root / "tcsynth" / "recipes.json"
    assert not copy.is_symlink()
    assert copy.read_bytes() == (checkout / "data" / "recipes.json").read_bytes()
    assert copy.stat().st_mode & 0o7777 == 0o644


@pytest.mark.parametrize(
    "make_link, message",
    [
        # a link to a directory would publish a second copy of a whole tree
        (lambda root: (root / "tcsynth" / "more").symlink_to(root / "data", target_is_directory=True), "symbolic link to a directory"),
        # a dangling link has no bytes to stage
        (lambda root: (root / "tcsynth" / "gone.json").symlink_to(root / "nowhere.json"), "not a regular file"),
    ],
)
def test_links_that_cannot_be_staged_are_refused(checkout, tmp_path, make_link, message):
    make_link(checkout)
    with pytest.raises(publish.PublishError, match=message):
        publish.stage(tmp_path / "hub", repo_root=checkout)
    assert not (tmp_path / "hub").exists()


@pytest.mark.parametrize("name", publish.ROOT_INDEX_FILES)
def test_stale_root_index_files_are_refused_and_nothing_is_written(checkout, tmp_path, name):
    path = checkout / name
    path.write_bytes(path.read_bytes().replace(b"textcraft-synth", b"textcraft-stale", 1))
    with pytest.raises(publish.PublishError, match="%s .*export-harbor \\. --index-only" % name):
        publish.stage(tmp_path / "hub", repo_root=checkout)
    assert not (tmp_path / "hub").exists()
    assert siblings(tmp_path / "hub") == ["checkout"]


def test_a_package_whose_game_differs_from_the_exported_one_is_refused(checkout, tmp_path):
    game = checkout / "tcsynth" / "game.py"
    game.write_bytes(game.read_bytes() + b"\n# edited\n")
    with pytest.raises(publish.PublishError, match="game.py differs"):
        publish.stage(tmp_path / "hub", repo_root=checkout)


@pytest.mark.parametrize("missing", ["README.md", "task-index.json", "tcsynth"])
def test_a_checkout_without_a_required_file_is_refused(checkout, tmp_path, missing):
    target = checkout / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(publish.PublishError, match="%s" % missing):
        publish.stage(tmp_path / "hub", repo_root=checkout)


def test_os_and_record_errors_become_one_line(checkout, tmp_path):
    (tmp_path / "a-file").write_text("not a directory\n")
    with pytest.raises(publish.PublishError, match="cannot stage .*a-file/hub"):
        publish.stage(tmp_path / "a-file" / "hub", repo_root=checkout)
    (checkout / "data" / "tasks" / "val.parquet").write_bytes(b"not parquet")
    with pytest.raises(publish.PublishError, match="val.parquet does not read as Parquet"):
        publish.stage(tmp_path / "hub", repo_root=checkout)
    assert not (tmp_path / "hub").exists()


def test_a_foreign_directory_is_kept_unless_forced(checkout, tmp_path):
    target = tmp_path / "hub"
    target.mkdir()
    (target / "mine.txt").write_text("a user's file\n")
    with pytest.raises(publish.PublishError, match="not empty and is not a staged tree"):
        publish.stage(target, repo_root=checkout)
    assert (target / "mine.txt").read_text() == "a user's file\n"
    staged = publish.stage(target, repo_root=checkout, force=True)
    assert not (target / "mine.txt").exists()
    assert "README.md" in staged.files


def test_a_previous_stage_is_replaced_without_force(checkout, tmp_path):
    target = tmp_path / "hub"
    publish.stage(target, repo_root=checkout)
    (target / "tasks" / "left-over").mkdir()
    staged = publish.stage(target, repo_root=checkout)
    assert not (target / "tasks" / "left-over").exists()
    assert siblings(target) == ["checkout"]
    assert staged.files == publish.read_stage(target).files


def test_stage_directories_that_overlap_the_checkout_are_refused(checkout, tmp_path, monkeypatch):
    for bad in (checkout, checkout / "data" / "hub", checkout / "tcsynth", tmp_path):
        with pytest.raises(publish.PublishError, match="stage directory"):
            publish.stage(bad, repo_root=checkout)
    monkeypatch.chdir(tmp_path / "checkout" / "scripts")
    with pytest.raises(publish.PublishError, match="current directory"):
        publish.stage(Path("."), repo_root=checkout)
    inside = publish.stage(checkout / "build" / "hub", repo_root=checkout)  # build/ is not published
    assert not any(name.startswith("build/") for name in inside.files)


def test_read_stage_refuses_a_directory_without_the_marker(tmp_path):
    with pytest.raises(publish.PublishError, match="not a staged tree"):
        publish.read_stage(tmp_path)


# ----------------------------------------------------------------------------------- upload (stand-in)


class RecordingApi:
    """Stands in for ``HfApi``: records each ``upload_folder`` call, or raises ``error`` when given one."""

    def __init__(self, error: Exception = None):
        self.calls: List[Dict[str, Any]] = []
        self.error = error

    def upload_folder(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return "https://huggingface.co/datasets/%s/commit/0123" % kwargs["repo_id"]


def uploaded_files(call: Dict[str, Any]) -> List[str]:
    """The files an ``upload_folder`` call sends: its folder's files through huggingface_hub's own filter."""
    root = Path(call["folder_path"])
    everything = sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())
    return sorted(filter_repo_objects(everything, allow_patterns=call.get("allow_patterns"), ignore_patterns=call.get("ignore_patterns")))


def test_publish_uploads_every_staged_file_and_nothing_else(checkout, tmp_path):
    api = RecordingApi()
    staged, result = publish.publish(
        "org/textcraft-synth", stage_dir=tmp_path / "hub", revision="dev", create_pr=True, token="hf_test",
        api=api, repo_root=checkout,
    )
    assert result == "https://huggingface.co/datasets/org/textcraft-synth/commit/0123"
    assert len(api.calls) == 1
    call = api.calls[0]
    assert {key: call[key] for key in ("repo_id", "repo_type", "revision", "create_pr", "token", "delete_patterns")} == {
        "repo_id": "org/textcraft-synth", "repo_type": "dataset", "revision": "dev", "create_pr": True, "token": "hf_test",
        "delete_patterns": None,
    }
    assert call["commit_message"]
    assert Path(call["folder_path"]) == staged.root
    assert uploaded_files(call) == list(staged.files)  # the marker stays home
    assert (tmp_path / "hub" / publish.MARKER).exists()  # an explicit stage directory is kept


def test_the_upload_arguments_are_what_upload_folder_takes():
    import inspect

    from huggingface_hub import HfApi

    staged = publish.StagedTree(Path("/nowhere"), ("README.md",), 1, 0)  # root, files, bytes, tasks
    arguments = publish.upload_arguments(staged, "org/textcraft-synth", delete_missing=True)
    assert set(arguments) <= set(inspect.signature(HfApi.upload_folder).parameters)
    assert (arguments["revision"], arguments["create_pr"], arguments["token"], arguments["delete_patterns"]) == (None, False, None, ["*"])


def test_upload_defaults_to_main_without_a_pull_request(checkout, tmp_path):
    staged = publish.stage(tmp_path / "hub", repo_root=checkout)
    api = RecordingApi()
    publish.upload(staged, "org/textcraft-synth", api=api)
    assert [(c["revision"], c["create_pr"], c["token"], c["repo_type"]) for c in api.calls] == [(None, False, None, "dataset")]


def test_delete_missing_asks_to_delete_every_remote_file_the_stage_does_not_hold(checkout, tmp_path):
    staged = publish.stage(tmp_path / "hub", repo_root=checkout)
    api = RecordingApi()
    publish.upload(staged, "org/textcraft-synth", revision="dev", token="hf_test", api=api, delete_missing=True)
    assert api.calls[0]["delete_patterns"] == ["*"]  # huggingface_hub keeps .gitattributes and the files uploaded
    assert uploaded_files(api.calls[0]) == list(staged.files)
    api = RecordingApi()
    publish.upload(staged, "org/textcraft-synth", api=api)  # by default the Hub's other files stay
    assert api.calls[0]["delete_patterns"] is None


def test_dry_run_stages_and_uploads_nothing(checkout, tmp_path):
    api = RecordingApi()
    staged, result = publish.publish("org/textcraft-synth", stage_dir=tmp_path / "hub", dry_run=True, api=api, repo_root=checkout)
    assert (result, api.calls) == (None, [])
    assert publish.read_stage(tmp_path / "hub").files == staged.files


def test_a_temporary_stage_is_removed_after_the_upload(checkout):
    api = RecordingApi()
    staged, _ = publish.publish("org/textcraft-synth", api=api, repo_root=checkout)
    assert len(api.calls) == 1 and len(staged.files) == staged.file_count
    assert not staged.root.exists()


@pytest.mark.parametrize("repo_id", ["textcraft-synth", "org/a/b", "org/bad--name", "org/name.git", ""])
def test_a_bad_repository_id_is_refused_before_staging(checkout, tmp_path, repo_id):
    api = RecordingApi()
    with pytest.raises(publish.PublishError):
        publish.publish(repo_id, stage_dir=tmp_path / "hub", api=api, repo_root=checkout)
    assert api.calls == [] and not (tmp_path / "hub").exists()


def test_hub_errors_become_one_line(checkout, tmp_path):
    staged = publish.stage(tmp_path / "hub", repo_root=checkout)
    response = SimpleNamespace(headers={}, request=None)  # the fields HfHubHTTPError reads
    missing = RepositoryNotFoundError("404 Client Error.\n\nRepository Not Found for url: https://huggingface.co/api/...", response=response)
    with pytest.raises(publish.PublishError) as raised:
        publish.upload(staged, "org/textcraft-synth", api=RecordingApi(missing))
    assert "\n" not in str(raised.value)
    assert "hf repos create org/textcraft-synth --repo-type dataset" in str(raised.value)
    with pytest.raises(publish.PublishError, match="upload to org/textcraft-synth failed \\(ConnectionError\\): no route"):
        publish.upload(staged, "org/textcraft-synth", api=RecordingApi(ConnectionError("no route\nto host")))
    with pytest.raises(TypeError):  # a bug is not dressed up as a Hub refusal
        publish.upload(staged, "org/textcraft-synth", api=RecordingApi(TypeError("a bug")))
    httpx2 = pytest.importorskip("httpx2", reason="the HTTP library of huggingface_hub 2.x")
    with pytest.raises(publish.PublishError, match="\\(ConnectError\\): connection reset"):
        publish.upload(staged, "org/textcraft-synth", api=RecordingApi(httpx2.ConnectError("connection reset")))


# ---------------------------------------------------------------------------- the full tree, end to end


@pytest.fixture(scope="module")
def hub_stage(tmp_path_factory) -> publish.StagedTree:
    return publish.stage(tmp_path_factory.mktemp("hub") / "textcraft-synth")


def test_the_full_stage_holds_every_task_and_config(hub_stage):
    index = json.loads((hub_stage.root / "task-index.json").read_text())
    assert hub_stage.task_count == len(index) == 3154
    assert sorted(path.name for path in (hub_stage.root / "tasks").iterdir()) == sorted(index)
    for config in ("tasks", "easy", "sft", "recipes"):
        assert any(name.startswith("data/%s/" % config) for name in hub_stage.files), config
    assert "tcsynth/publish.py" in hub_stage.files and "README.md" in hub_stage.files


def test_upload_of_the_full_stage_sends_every_file(hub_stage):
    api = RecordingApi()
    publish.upload(hub_stage, "org/textcraft-synth", revision="main", api=api)
    assert len(api.calls) == 1
    files = uploaded_files(api.calls[0])
    assert files == list(hub_stage.files)
    assert sum((hub_stage.root / name).stat().st_size for name in files) == hub_stage.total_bytes


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("hf")
    patch.setenv("HF_HOME", str(cache))
    patch.setenv("HF_HUB_OFFLINE", "1")
    patch.setenv("HF_DATASETS_OFFLINE", "1")
    yield cache / "datasets"
    patch.undo()


def test_datasets_serves_the_card_configs_not_the_harbor_builder(hub_stage, hf_cache, tmp_path):
    tasks = datasets.load_dataset(str(hub_stage.root), cache_dir=str(hf_cache))
    assert {split: len(rows) for split, rows in tasks.items()} == {"train": 2522, "val": 632}
    assert tasks["train"].info.builder_name == "parquet"
    assert tasks["train"].features == features(TASKS)
    splits = json.loads((hub_stage.root / "splits.json").read_text())
    assert tasks["val"]["name"] == splits["val"] and tasks["train"]["name"] == splits["train"]
    sft = datasets.load_dataset(str(hub_stage.root), "sft", cache_dir=str(hf_cache))
    assert {split: len(rows) for split, rows in sft.items()} == {"train": 2522, "val": 632}
    assert sft["train"].info.builder_name == "parquet"
    # The control: the same task directories without the card are taken by datasets' harbor builder,
    # so the configs above are what keeps it away.
    bare = tmp_path / "bare"
    for name in sorted(os.listdir(hub_stage.root / "tasks"))[:2]:
        shutil.copytree(hub_stage.root / "tasks" / name, bare / "tasks" / name)
    taken = datasets.load_dataset(str(bare), cache_dir=str(hf_cache))
    assert [(split, rows.info.builder_name, len(rows)) for split, rows in taken.items()] == [("test", "harbor", 2)]


def commit_tree(root: Path, files: Tuple[str, ...], git_dir: Path) -> str:
    """Commit ``files`` of ``root`` into the bare repository ``git_dir``; returns the commit id.

    The export hard-links the files every task shares, so each distinct file (inode) is hashed once
    and the index is written from the blob ids: much faster than ``git add`` of 1.3 GB of paths.
    """
    git = ["git", "--git-dir", str(git_dir)]
    env = dict(os.environ, GIT_INDEX_FILE=str(git_dir / "stage-index"), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    first_path: Dict[Tuple[int, int], str] = {}
    keys = []
    for name in files:
        info = os.stat(root / name)
        keys.append(((info.st_dev, info.st_ino), "100755" if info.st_mode & 0o111 else "100644"))
        first_path.setdefault(keys[-1][0], name)
    unique = list(first_path)
    hashed = subprocess.run(git + ["hash-object", "-w", "--no-filters", "--stdin-paths"], input="\n".join(str(root / first_path[key]) for key in unique),
                            capture_output=True, text=True, check=True, env=env).stdout.split()
    blob = dict(zip(unique, hashed))
    index_info = "".join("%s %s\t%s\n" % (mode, blob[key], name) for name, (key, mode) in zip(files, keys))
    subprocess.run(git + ["update-index", "--add", "--index-info"], input=index_info, text=True, check=True, env=env)
    tree = subprocess.run(git + ["write-tree"], capture_output=True, text=True, check=True, env=env).stdout.strip()
    commit = subprocess.run(git + ["commit-tree", tree, "-m", "staged Hub tree"], capture_output=True, text=True, check=True, env=env).stdout.strip()
    subprocess.run(git + ["update-ref", "refs/heads/main", commit], check=True, env=env)
    subprocess.run(git + ["symbolic-ref", "HEAD", "refs/heads/main"], check=True, env=env)
    return commit


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail("git daemon exited: %s" % process.stderr.read().decode(errors="replace"))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail("git daemon did not listen on port %d" % port)


@pytest.fixture(scope="module")
def git_served(hub_stage, tmp_path_factory):
    """The staged tree committed as org/textcraft-synth and served by ``git daemon`` on loopback."""
    base = tmp_path_factory.mktemp("git-base")
    git_dir = base / "org" / "textcraft-synth.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(git_dir)], check=True)
    # Harbor clones with --filter=blob:none and fetches its commit by id.
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        subprocess.run(["git", "--git-dir", str(git_dir), "config", key, "true"], check=True)
    commit_tree(hub_stage.root, hub_stage.files, git_dir)
    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--base-path=%s" % base, "--export-all", "--port=%d" % port, "--listen=127.0.0.1", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, daemon)
        yield "git://127.0.0.1:%d/org/textcraft-synth" % port
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


@pytest.fixture(scope="module")
def harbor_tools(tmp_path_factory) -> Tuple[Path, Path]:
    return harbor_venv.venv(tmp_path_factory), harbor_venv.home(tmp_path_factory)


def test_harbor_downloads_the_val_dataset_over_git_and_lints_it(hub_stage, git_served, harbor_tools, tmp_path):
    venv, home = harbor_tools
    harbor = str(venv / "bin" / "harbor")
    env = harbor_venv.harbor_env(home)
    out = tmp_path / "download"
    result = subprocess.run([harbor, "datasets", "download", VAL_DATASET, "--repo", git_served, "--output-dir", str(out)],
                            env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    registry = json.loads((hub_stage.root / "registry.json").read_text())
    val_names = [task["name"] for dataset in registry if dataset["name"] == "textcraft-synth-val" for task in dataset["tasks"]]
    downloaded = out / "textcraft-synth-val"
    assert len(val_names) == 632
    assert sorted(os.listdir(downloaded)) == sorted(val_names)
    for name in val_names:  # every file, byte for byte and mode for mode, as staged
        assert tree_listing(downloaded / name) == tree_listing(hub_stage.root / "tasks" / name), name
    lint = subprocess.run([harbor, "lint", "--json", *[str(downloaded / name) for name in val_names]],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
    assert json.loads(lint.stdout) == []
