"""Values a template only writes out as they are: `<<name>>`, straight to the output.

A role's tasks differ in a few values (their index, host, node, port...). Where the
template does nothing with such a value but write it, a task's text is the text of
any other task of the role with its own values written in their places, which
manifest/skeleton.py uses to render a role once. Anything else the template could do
with a value may change more than that place: a filter or test (`<<index | string>>`,
`index is even`), a condition or a loop over it, an assignment or a macro's parameter
of the same name, a call, or output captured by a macro, a `{% set %}` block, a
`{% filter %}` block or a `{% call %}` block. Each makes the value not bare.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


def written_bare(ast: Any, names: Collection[str]) -> bool:
    """Whether every use of each of `names` in the template is a bare `<<name>>` written out.

    Such a `<<name>>` must stand in the template's body, or in the body of an `if` or
    a `for` there (which write their output as it comes); a name used anywhere else,
    read or assigned, makes this False.
    """
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
