"""A public call's arguments checked against its signature, at the API's entry.

docs/python.md promises that every error is a `simpletfjob.Error`, a wrong type a
`UsageError`. `checked` checks a public call's named arguments against their annotations
before anything runs (`render() takes template as a string or a path, not 5`), and a
missing or extra argument is a `UsageError` too; `**keywords` go to options/keywords.py.

The annotations read are the API's own: None, bool, int, float (an int too), str,
`os.PathLike[str]`, `Sequence[X]` (not a string or bytes), `Mapping[str, X]`, a class, and
unions of them; anything else (Any) takes any value.
"""

from __future__ import annotations

import functools
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from simpletfjob.errors import UsageError

P = ParamSpec("P")
R = TypeVar("R")


def checked(function: Callable[P, R]) -> Callable[P, R]:
    """`function`, its named arguments checked against their annotations on each call."""
    signature = inspect.signature(function)
    caller = function.__name__ if function.__name__ != "__init__" else ""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        hints = _hints(function)
        named = caller or type(args[0]).__name__  # a class's __init__: the class
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:  # too many, too few, or an unknown or repeated keyword
            raise UsageError(f"{named}(): {e}") from None
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            if hint is None or _takes(hint, value):
                continue
            raise UsageError(f"{named}() takes {name} as {_words(hint)}, not {value!r}")
        return function(*args, **kwargs)

    return call


@functools.cache
def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, resolved; one that cannot be (a name imported only for
    type checkers) is left out: it takes any value."""
    found: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        kind = parameter.kind
        if kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL) or parameter.name == "self":
            continue
        annotation = parameter.annotation
        if annotation is parameter.empty:
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, function.__globals__)  # (our own source)
            except NameError:
                continue
        found[parameter.name] = annotation
    return found


def _takes(hint: Any, value: Any) -> bool:
    """Whether `value` is of the annotation's type (see the module)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_takes(arg, value) for arg in args)
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is os.PathLike:
        return isinstance(value, os.PathLike) and isinstance(os.fspath(value), str)
    if origin is Sequence:
        return (
            isinstance(value, Sequence)
            and not isinstance(value, (str, bytes, bytearray))
            and all(_takes(args[0], item) for item in value)
        )
    if origin is Mapping:
        return isinstance(value, Mapping) and all(_takes(args[0], key) for key in value)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _words(hint: Any) -> str:
    """The annotation as a reader says it: 'a string or a path', 'a list of strings'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_words(arg) for arg in args)
    if origin is Sequence:
        return f"a list of {_words(args[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin is Mapping:
        return "a mapping of names to values"
    if origin is os.PathLike:
        return "a path"
    return _WORDS.get(hint, f"a {getattr(hint, '__name__', hint)}")


_WORDS: dict[Any, str] = {
    None: "None",
    type(None): "None",
    bool: "True or False",
    int: "an integer",
    float: "a number",
    str: "a string",
}
