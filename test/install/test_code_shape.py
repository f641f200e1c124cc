"""The house's size rules, checked for every product module: a module over 600 lines or a
class over 300 is a room that holds more than one job. One that must stay bigger says why
in a comment at its top (``# size: ...`` in the module's first lines, or on the lines above
the class), so the exception is a decision someone made, not drift."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = sorted([*(REPO / "ortf_ros").rglob("*.py"), *(REPO / "ortf").rglob("*.py")])
MODULE_LINES = 600
CLASS_LINES = 300
REASON = "# size:"


def _says_why(lines: list[str], first: int, last: int) -> bool:
    return any(line.lstrip().startswith(REASON) for line in lines[first:last])


def oversized(path: Path) -> list[str]:
    """What in ``path`` is over its size without a reason given: one line each."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    if len(lines) > MODULE_LINES and not _says_why(lines, 0, 30):
        found.append(f"{path.name}: {len(lines)} lines, over {MODULE_LINES}")
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            size = node.end_lineno - node.lineno + 1
            top = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            if size > CLASS_LINES and not _says_why(lines, max(0, top - 3), top):
                found.append(f"{path.name}:{node.lineno}: class {node.name} is {size} lines, over {CLASS_LINES}")
    return found


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(REPO)))
def test_modules_and_classes_keep_to_their_size(path: Path) -> None:
    found = oversized(path)
    assert not found, f"{found}: split it by job, or say why at its top ({REASON} ...)"


def test_the_rule_finds_a_big_class_and_a_big_module_and_takes_a_reason(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(300))
    big = tmp_path / "big.py"
    big.write_text(f"class Big:\n{body}\n" + "\n" * 300, encoding="utf-8")
    assert oversized(big) == ["big.py: 601 lines, over 600", "big.py:1: class Big is 301 lines, over 300"]
    big.write_text(f"# size: one table, read top to bottom\nclass Big:\n{body}\n", encoding="utf-8")
    assert oversized(big) == []
