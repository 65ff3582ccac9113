"""Values a template only writes out as they are: `<<name>>`, straight to the output.

Where the template does nothing with a task's value (index, host, port...) but write it, a
task's text is any other task's of the role with its own values written in, which
manifest/skeleton.py uses to render a role once. Anything else (a filter or test, a
condition or loop over it, an assignment or macro parameter of its name, a call, output
captured by a macro or a `{% set %}`, `{% filter %}` or `{% call %}` block) makes it not bare.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


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
