"""Values a template only writes out as they are: `<<name>>`, straight to the output.

Where the template does nothing with a task's value (index, host, port...) but write it, a
task's text is any other task's of the role with its own values written in, which
manifest/skeleton.py uses to render a role once. Anything else (a filter or test, a
condition or loop over it, an assignment or macro parameter of its name, a call, output
captured by a macro or a `{% set %}`, `{% filter %}` or `{% call %}` block) makes it not bare.

A template that is nothing but text and such `<<name>>` of known names (`bare_template`)
is rendered by writing each value's `str()` in, as jinja would, without importing jinja.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

# Where jinja's lexer starts a tag (`{% %}`, `<# #>`, `<< >>`, with `-` or `+` or not).
_TAG = re.compile(r"<<|\{%|<#")
_BARE = re.compile(r"<<\s*([A-Za-z_][A-Za-z0-9_]*)\s*>>")
# Names jinja reads as constants or keywords, binds itself (`self`), or has as globals.
_SPECIAL = frozenset(("true", "false", "True", "False", "none", "None", "not", "self"))
_SPECIAL |= {"range", "dict", "cycler", "joiner", "namespace"}


def bare_template(text: str, known: Collection[str]) -> list[str] | None:
    """The template's text split at its tags, [text, name, text, ...], where each of them
    is a bare `<<name>>` of a known name; None otherwise (it is jinja's to compile)."""
    pieces: list[str] = []
    position = 0
    while tag := _TAG.search(text, position):
        bare = _BARE.match(text, tag.start())
        if bare is None or bare[1] not in known or bare[1] in _SPECIAL:
            return None
        pieces += [text[position : tag.start()], bare[1]]
        position = bare.end()
    return [*pieces, text[position:]]


def written_bare(ast: Any, names: Collection[str]) -> bool:
    """Whether every use of each of `names` in the template is a bare `<<name>>` written out.
    Such a `<<name>>` must stand in the template's body, or in the body of an `if` or
    a `for` there (which write their output as it comes); a name used anywhere else,
    read or assigned, makes this False."""
    if not names:
        return True
    from jinja2 import nodes

    wanted = frozenset(names)
    # Statements whose bodies write straight to the template's output.
    passing = (nodes.Template, nodes.Output, nodes.If, nodes.For)
    stack: list[tuple[Any, bool]] = [(ast, True)]
    while stack:
        node, writes = stack.pop()
        output = writes and type(node) is nodes.Output
        for child in node.iter_child_nodes():
            if type(child) is nodes.Name and child.name in wanted:
                if not (output and child.ctx == "load"):
                    return False
                continue
            stack.append((child, writes and isinstance(child, passing)))
    return True
