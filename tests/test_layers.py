"""The layers point one way: records and the engine at the bottom, products above, the command line on top.

Every import of the package is read from the source (module level and inside functions alike), and each
module may import only modules of a lower layer.  A new module must be placed in :data:`LAYERS`, which is
the architecture written down; the test also fails on any import cycle, inside ``tcsynth.harbor`` too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Set

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tcsynth"

# Lowest first.  A module imports only from the layers before its own.
LAYERS = (
    ("errors", "game", "templating"),  # the standard-library engine knows nothing of the package
    ("background",),  # a function run in a forked second process (the build's and the export's other core)
    ("records", "prompts"),  # the row schema and its facts; what an agent is told
    ("store", "configs", "toolcalls", "recursive"),  # where records live; the configs as data; reading calls; the recursive rules
    ("sft", "harbor", "env", "rewards", "agents", "generate", "sft_recursive"),  # products, which never import each other
    ("episode",),  # the loop that plays an agent on an environment, for every runner
    ("recursive_env",),  # the chat environment of a recursive tree and its runner: env and agents together
    ("scoring",),  # an eval run's summary and score
    ("build", "evaluate", "publish"),  # jobs that combine products
    ("eval_dir",),  # an eval run's directory: streamed episodes, resume, the result files (on top of evaluate)
    ("cli",),
    ("__init__", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    """``store``, ``harbor.files``, ``harbor.__init__``: a file's module below ``tcsynth``."""
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def _exists(parts) -> bool:
    return PACKAGE.joinpath(*parts).with_suffix(".py").is_file() or PACKAGE.joinpath(*parts).is_dir()


def imported_modules(source: str, module: str) -> Set[str]:
    """The ``tcsynth`` modules that ``source`` (the text of ``module``) imports, at any depth."""
    package = module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
            elif (node.module or "").split(".")[0] == "tcsynth":
                base = []
            else:
                continue
            target = base + [part for part in (node.module or "").split(".") if part and part != "tcsynth" or node.level]
            target = [part for part in target if part]
            # `from . import game` names a module; `from .store import Records` names something in one.
            found.update(".".join(target + [alias.name]) for alias in node.names if _exists(target + [alias.name]))
            if target and _exists(target):
                found.add(".".join(target))
        elif isinstance(node, ast.Import):
            found.update(".".join(alias.name.split(".")[1:]) for alias in node.names if alias.name.startswith("tcsynth."))
    return found


def graph() -> Dict[str, Set[str]]:
    return {module_name(path): imported_modules(path.read_text(encoding="utf-8"), module_name(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def top(module: str) -> str:
    """The layer entry a module belongs to: ``harbor.files`` is ``harbor``."""
    return module.split(".")[0]


def test_every_module_has_a_layer():
    unplaced = sorted({top(module) for module in graph()} - set(RANK))
    assert not unplaced, "add these modules to LAYERS: %s" % unplaced


def test_no_module_imports_one_of_its_own_layer_or_above():
    wrong = []
    for module, imports in graph().items():
        for target in imports:
            if top(target) != top(module) and RANK.get(top(target), 99) >= RANK.get(top(module), -1):
                wrong.append("%s imports %s" % (module, target))
    assert not wrong


def test_there_is_no_import_cycle():
    edges = graph()
    state: Dict[str, int] = {}
    cycles = []

    def visit(module, path):
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            target = target if target in edges else target + ".__init__"
            if state.get(target) == 1:
                cycles.append(" -> ".join(path[path.index(target):] + [target]) if target in path else module + " -> " + target)
            elif target in edges and not state.get(target):
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(edges):
        if not state.get(module):
            visit(module, [module])
    assert not cycles


def test_the_checker_sees_every_kind_of_import():
    source = """
from . import records
from .store import Records
import tcsynth.sft
from tcsynth.harbor import files
def late():
    from .cli import main
    from .. import nothing_here
"""
    assert imported_modules(source, "build") == {"records", "store", "sft", "harbor", "harbor.files", "cli"}
    assert imported_modules("from ..errors import UserError\nfrom .layout import TaskFile", "harbor.files") == {"errors", "harbor.layout"}


@pytest.mark.parametrize("folder", ["scripts", "benchmarks"])
def test_scripts_and_benchmarks_never_import_the_tests(folder):
    for path in sorted((REPO / folder).glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not [name for name in names if name.split(".")[0] in ("tests", "conftest") or name.split(".")[-1].startswith("test_")], path
        # Nor load a test module by its file name (importlib.util.spec_from_file_location and the like).
        loaded = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"(tests/)?test_\w+\.py", node.value)]
        assert not loaded, (path, loaded)
