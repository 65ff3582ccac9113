"""Options given as Python keyword arguments (the Python API), read through the same table as the command line.

A keyword is a field name (`tasks_per_host`) or a long flag with underscores (`no_labels=True`
is `labels=False`). Each value is parsed as click would (`timeout="5m"`) and checked by the
option's rule, so a bad value raises the UsageError the command line prints, in its words; an
unknown keyword names the closest one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from simpletfjob.errors import UsageError
from simpletfjob.options.table import Option, OptionGroup, check_value, options_of, type_problem


def keyword_names(
    group: type[OptionGroup], taken: Collection[str] = ()
) -> dict[str, tuple[str, bool]]:
    """Every keyword the group takes: keyword -> (field name, whether the value is inverted)."""
    names: dict[str, tuple[str, bool]] = {}
    for field, declared in options_of(group):
        if field.name in taken:
            continue
        names[field.name] = (field.name, False)
        for flag in declared.spellings():
            if not flag.startswith("--"):
                continue
            word = flag[2:].replace("-", "_")
            # `--no-usage` sets usage False: no_usage=True is usage=False
            inverted = declared.type is bool and flag.startswith("--no-")
            if word not in taken:
                names.setdefault(word, (field.name, inverted))
    return names


def from_keywords(
    group: type[OptionGroup],
    keywords: Mapping[str, Any],
    *,
    caller: str,
    taken: Collection[str] = (),
) -> dict[str, Any]:
    """The field values that `keywords` give, each checked as the command line checks it.

    `caller` names the function in messages; `taken` are fields it does not offer.
    """
    names = keyword_names(group, taken)
    declarations = {field.name: declared for field, declared in options_of(group)}
    values: dict[str, Any] = {}
    for keyword, value in keywords.items():
        found = names.get(keyword)
        if found is None:
            raise UsageError(_unknown(keyword, caller, names))
        name, inverted = found
        if name in values:
            raise UsageError(f"{caller} got {name!r} twice (as {keyword!r} too)")
        declared = declarations[name]
        value = _keyword_value(declared, value)
        if inverted:
            value = not value
        check_value(declared, value)
        values[name] = value
    return values


def _keyword_value(declared: Option, value: Any) -> Any:
    """A keyword's value as the field holds it: parsed from text as click's reader does, typed."""
    if declared.multiple:
        items = (value,) if isinstance(value, str) else tuple(_list_items(declared, value))
        wrong = next((item for item in items if not isinstance(item, str)), None)
        if wrong is not None:
            raise UsageError(f"{declared.shown} takes strings, not {wrong!r}")
        return items
    return _one(declared, value)


def _list_items(declared: Option, value: Any) -> Iterable[Any]:
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        return value
    raise UsageError(f"{declared.shown} takes a list of values, not {value!r}")


def _one(declared: Option, value: Any) -> Any:
    if value is None and (declared.default is None or declared.bare is not None):
        return value
    if declared.parse is not None and isinstance(value, str):
        try:
            return declared.parse(value)
        except ValueError as e:
            raise UsageError(f"Invalid value for {declared.shown!r}: {e}") from None
    if declared.type is float and type(value) is int:
        return float(value)
    if declared.type is frozenset:  # any collection of its integers (exit codes)
        if (
            not isinstance(value, Collection)
            or isinstance(value, (bytes, bytearray, Mapping))
            or any(type(item) is not int for item in value)
        ):
            raise UsageError(
                f"{declared.shown} takes integers, or the command line's text, not {value!r}"
            )
        if declared.parse is not None and declared.format is not None:
            return _one(declared, declared.format(value))  # the command line's checks
    wrong = type_problem(declared, value)
    if wrong:
        raise UsageError(f"{declared.shown} {wrong}")
    return value


def _unknown(keyword: str, caller: str, names: Mapping[str, object]) -> str:
    import difflib

    close = difflib.get_close_matches(keyword, list(names), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{caller} got an unknown option {keyword!r}{hint}"
