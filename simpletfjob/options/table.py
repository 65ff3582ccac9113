"""How an option is declared: once, with all that the command line, a template header and the checks need.

An option group is a class whose annotated fields are the options::

    class ConnectionOptions(OptionGroup):
        context: str | None = option("--context", default=None, metavar="NAME", help="...")

One declaration gives the field's type (checked by mypy), its default, flags, help and
metavar (the CLI builds click parameters from `fields()`), whether a header may set it, and its
rule. Each group is a frozen, keyword-only dataclass (`__init_subclass__` makes it one;
`dataclass_transform` tells mypy); a command's options combine groups by inheritance, and
`fields()` lists them in --help's order: its own, then each combined group's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from simpletfjob.errors import UsageError

if TYPE_CHECKING:
    from typing_extensions import Self, dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[type], type]:
        return lambda cls: cls


T = TypeVar("T")


# What a value must be: `rule(value)` is None when it holds, else the phrase that says why not.
# The phrase follows the option's name (`--psn`, or `option 'psn' in the template header`),
# so one rule reads the same wherever it is broken.
Rule = Callable[[Any], str | None]


class Must:
    """A test, and what it asks for in words: `must be WHAT, not VALUE`; an option with a
    `format` shows the value so (a duration as the user typed one: `not 0s`, not `not 0.0`)."""

    def __init__(self, what: str, holds: Callable[[Any], bool]) -> None:
        self.what = what
        self.holds = holds

    def __call__(self, value: Any, show: Callable[[Any], str] = repr) -> str | None:
        return None if self.holds(value) else f"must be {self.what}, not {show(value)}"


class OneOf(Must):
    """One of a fixed set of words; the command line shows them as `[a|b]`."""

    def __init__(self, *choices: str) -> None:
        words = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
        super().__init__(words, lambda value: value in choices)
        self.choices = choices


def ascii_int(text: str) -> int:
    """An integer as the command line writes it: ASCII digits, a sign at most, as Go's
    strconv.Atoi (kubectl) reads it. ValueError otherwise: int() reads any Unicode digit
    (a fullwidth `\uff12` is 2), and blanks and underscores too."""
    digits = text[1:] if text[:1] in ("-", "+") else text
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{text!r} is not a valid integer")
    return int(text)


def at_least(minimum: int) -> Must:
    what = "0 or more" if minimum == 0 else f"at least {minimum}"
    return Must(what, lambda value: value >= minimum)


def between(low: int, high: int) -> Must:
    return Must(f"between {low} and {high}", lambda value: low <= value <= high)


@dataclass(frozen=True)
class Option:
    """One option's declaration; see `option()`."""

    flags: tuple[str, ...]
    default: Any
    help: str
    type: type
    metavar: str | None = None
    show_default: bool = False
    rule: Rule | None = None
    header: bool = False
    negatable: bool = False
    bare: str | None = None
    multiple: bool = False
    parse: Callable[[str], Any] | None = None
    format: Callable[[Any], str] | None = None
    named: str | None = None  # how messages name it, when not by its first long flag

    @property
    def shown(self) -> str:
        """How messages name the option: the first long flag, unless told (-N, as the original tool)."""
        return self.named or next((f for f in self.flags if f.startswith("--")), self.flags[0])

    def spellings(self) -> tuple[str, ...]:
        """Every flag that sets it, the --no- forms of a negatable switch included."""
        negated = tuple(
            f"--no-{f[2:]}" for f in self.flags if self.negatable and f.startswith("--")
        )
        return self.flags + negated


@dataclass(frozen=True)
class Argument:
    """A positional argument (a command's TEMPLATE or RUN), named on the command line as its field, in capitals."""

    required: bool  # on the command line
    multiple: bool = False  # any number of them (a tuple)


_DECLARED = "simpletfjob"  # the key of a declaration in a dataclass field's metadata


def option(
    *flags: str,
    default: T,
    help: str,
    type: type | None = None,
    metavar: str | None = None,
    show_default: bool = False,
    rule: Rule | None = None,
    header: bool = False,
    negatable: bool = False,
    bare: str | None = None,
    multiple: bool = False,
    parse: Callable[[str], Any] | None = None,
    format: Callable[[Any], str] | None = None,
    shown: str | None = None,
) -> T:
    """Declare an option field. Returns the dataclass field, typed as the field's value for mypy.

    - `type`: the value's type (default: the default's, else str); a header value
      must have exactly this type.
    - `rule`: what the value must be, checked on the command line and in a header.
    - `header`: a template header may give it a default (`options:` in the header).
    - A bool option is a switch that sets the opposite of its default
      (`--explain`, `--no-labels`); `negatable` gives it both forms
      (`--chief/--no-chief`), so that the command line can undo a header's `true`.
    - `bare`: the value when the flag is given without one (`-E` means `-E exc`).
    - `multiple`: repeatable; the value is a tuple.
    - `parse`: turns the command line's text into the value (durations); it
      raises ValueError with a phrase saying what the text should be. `format`
      writes a value as that text (for the default in --help).
    - `shown`: how messages name the option (default: its first long flag).
    """
    declared = Option(
        flags,
        default,
        help,
        type or (default.__class__ if default is not None else str),
        metavar,
        show_default,
        rule,
        header,
        negatable,
        bare,
        multiple,
        parse,
        format,
        shown,
    )
    return dataclasses.field(default=default, metadata={_DECLARED: declared})


def argument(*, required: bool = True, multiple: bool = False) -> Any:
    """Declare a positional argument field (no default); `multiple`: any number, as a tuple.

    `required=False` leaves a missing argument to the command, to say in its own words.
    """
    return dataclasses.field(metadata={_DECLARED: Argument(required, multiple)})


@dataclass(frozen=True)
class Field:
    """A group's field as the table sees it: its name, default, declaration and the group it is in."""

    name: str
    default: Any
    required: bool
    declaration: Option | Argument | None  # None: not on the command line (filled in by a command)
    group: type[OptionGroup] = dataclasses.field(repr=False)

    @property
    def section(self) -> str:
        """The heading it stands under in --help: its own group's, not one the group inherits."""
        section: str = vars(self.group).get("section", "Options")
        return section

    @property
    def option(self) -> Option | None:
        return self.declaration if isinstance(self.declaration, Option) else None


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(option, argument))
class OptionGroup:
    """Base of every option group: each is a frozen, keyword-only dataclass; see the module doc."""

    section: ClassVar[str] = "Options"  # the heading its options stand under in --help
    _table: ClassVar[dict[str, Field]]  # all of its fields, its groups' included, in table order

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(vars(cls).get("__annotations__", {}))  # in the order declared
        dataclass(frozen=True, kw_only=True, eq=False, repr=False)(cls)  # both below
        table: dict[str, Field] = {}
        flags: dict[str, str] = {}
        for klass in cls.__mro__:
            declared = vars(klass).get("__dataclass_fields__", {})
            mine = own if klass is cls else vars(klass).get("_own", ())
            for name in mine:
                if name.startswith("_") or name not in declared:
                    continue
                field = _field(declared[name], klass)
                if name in table:
                    # Declared once: two groups (core and framework) may not both have it.
                    raise TypeError(f"{cls.__name__}: {name!r} is in {table[name]} and {field}")
                table[name] = field
                for flag in field.option.spellings() if field.option else ():
                    if flag in flags:
                        raise TypeError(f"{cls.__name__}: {flag} is both {flags[flag]} and {name}")
                    flags[flag] = name
        cls._own = own  # type: ignore[attr-defined]
        cls._table = table

    # One comparison, hash and repr for every group, as a dataclass's own would be: a
    # dataclass makes them anew for each class, much of a render's start.
    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(tuple(vars(self).values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        return f"{type(self).__qualname__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (unknown names are a TypeError)."""
        changed: Self = dataclasses.replace(cast("Any", self), **changes)
        return changed


def _field(declared: dataclasses.Field[Any], group: type[OptionGroup]) -> Field:
    declaration = declared.metadata.get(_DECLARED)
    default = declared.default
    if declared.default_factory is not dataclasses.MISSING:
        default = declared.default_factory()
    required = default is dataclasses.MISSING
    return Field(declared.name, None if required else default, required, declaration, group)


def fields(group: type[OptionGroup] | OptionGroup) -> tuple[Field, ...]:
    """The fields of a group (or of a group's instance), in declaration order."""
    klass = group if isinstance(group, type) else type(group)
    return tuple(klass._table.values())


def options_of(group: type[OptionGroup]) -> Iterable[tuple[Field, Option]]:
    """The fields that are options on the command line, with their declarations."""
    for field in fields(group):
        declared = field.option
        if declared is not None:
            yield field, declared


def problem(declared: Option, value: Any) -> str | None:
    """Why a value breaks the option's rule (for each item of a repeatable option), or None."""
    if declared.rule is None or value is None:
        return None
    for item in value if declared.multiple else (value,):
        if declared.format is not None and isinstance(declared.rule, Must):
            found = declared.rule(item, declared.format)
        else:
            found = declared.rule(item)
        if found:
            return found
    return None


def check_value(declared: Option, value: Any) -> None:
    """A value that breaks its option's rule is a usage error: `--psn must be 0 or more, not -1`."""
    found = problem(declared, value)
    if found:
        raise UsageError(f"{declared.shown} {found}")


def check_values(options: OptionGroup) -> None:
    """Every option's rule, on an options object however it was made."""
    for field, declared in options_of(type(options)):
        check_value(declared, getattr(options, field.name))


_TYPE_WORDS = {int: "an integer", bool: "true or false", str: "a string", float: "a number"}


def type_problem(declared: Option, value: Any) -> str | None:
    """Why a header's YAML value is not of the option's type (`psn: two`, `chief: 1`), or None."""
    # bool is a subclass of int: `psn: true` must not pass as 1.
    if type(value) is declared.type:
        return None
    return f"must be {_TYPE_WORDS.get(declared.type, declared.type.__name__)}, not {value!r}"
