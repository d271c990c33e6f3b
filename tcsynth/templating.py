"""Text templates: files with ``{{name}}`` placeholders, so the prose lives beside the code, not in it.

``{{name}}`` is the only syntax, so a template may hold JSON, shell or YAML braces and dollars as they are.
A placeholder without a value is an error, never an empty string.
"""

import re
from functools import lru_cache
from pathlib import Path
from typing import Mapping

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
TEMPLATES = Path(__file__).resolve().parent / "templates"


@lru_cache(maxsize=None)
def template_text(path: Path) -> str:
    """The text of a template file (read once)."""
    return Path(path).read_text(encoding="utf-8")


def render(path: Path, values: Mapping[str, object]) -> str:
    """The template at ``path`` with every ``{{key}}`` replaced by ``values[key]`` (``KeyError`` if absent)."""

    def value(match: "re.Match[str]") -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError("template %s needs {{%s}}" % (Path(path).name, key))
        return str(values[key])

    return _PLACEHOLDER.sub(value, template_text(path))
