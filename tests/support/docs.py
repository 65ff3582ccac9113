"""The project's Markdown pages and their fenced blocks, as the docs' tests read them
(tests/acceptance/test_docs.py says what each kind of block is)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])


@dataclass
class Block:
    path: Path
    line: int
    info: str
    text: str


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, with their info strings."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^(`{3,})(.*)$", lines[i])
        if opening is None:
            i += 1
            continue
        fence, start, body = opening[1], i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        blocks.append(Block(path, start, opening[2].strip(), "\n".join(body) + "\n"))
        i += 1
    return blocks
