"""The repository's scripts and benchmarks as modules, for the tests that use them (loaded once per session)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"


def load(name: str, folder: str = "scripts") -> ModuleType:
    """``<folder>/<name>.py`` (``scripts`` or ``benchmarks``) as the module ``name`` (the same object on every call)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / folder / ("%s.py" % name))
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]
