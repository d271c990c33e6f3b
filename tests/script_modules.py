"""The repository's scripts as modules, for the tests that exercise them (loaded once per session)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load(name: str) -> ModuleType:
    """``scripts/<name>.py`` as the module ``name`` (the same object on every call)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / ("%s.py" % name))
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]
