"""How an option is declared: once, with all that the command line, a template header and the checks need.

An option group is a class whose annotated fields are the options::

    class ConnectionOptions(OptionGroup):
        context: str | None = option("--context", default=None, metavar="NAME", help="...")

One declaration gives the field's type (which mypy checks wherever the field is
read or set), its default, its flag spellings, help and metavar for the command
line (the CLI builds click parameters from `fields()`), whether a template
header may set it, and the rule its value must follow. A command's options are
groups combined by inheritance (`class Options(RenderOptions, TensorFlowOptions)`),
read as flat, frozen attributes.

Groups are not dataclasses on purpose: `dataclasses` imports `inspect` and compiles
code for every class it decorates; made so, the groups cost a 3-host render's cold
start 12-15% more instructions (callgrind, `python -m bench.versus`), against about
0.2 ms for this whole module and the table.
`dataclass_transform` tells mypy to treat a group as a dataclass (a typed,
keyword-only `__init__`; read-only fields); at run time the small base class
below does that work by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from simpletfjob.errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime

    from typing_extensions import Self, dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[type], type]:
        return lambda cls: cls


T = TypeVar("T")


class Rule:
    """What a value must be: `rule(value)` is None when it holds, else the phrase that says why not.

    The phrase follows the option's name: `--psn` + `must be 0 or more, not -1`
    on the command line, `option 'psn' in the template header` + the same phrase
    in a header, so that one rule reads the same wherever it is broken.
    """

    def __call__(self, value: Any) -> str | None:
        raise NotImplementedError


class Must(Rule):
    """A test, and what it asks for in words: `must be WHAT, not VALUE`."""

    def __init__(self, what: str, holds: Callable[[Any], bool]) -> None:
        self.what = what
        self.holds = holds

    def __call__(self, value: Any) -> str | None:
        return None if self.holds(value) else f"must be {self.what}, not {value!r}"


class OneOf(Must):
    """One of a fixed set of words; the command line shows them as `[a|b]`."""

    def __init__(self, *choices: str) -> None:
        words = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
        super().__init__(words, lambda value: value in choices)
        self.choices = choices


def at_least(minimum: int) -> Must:
    what = "0 or more" if minimum == 0 else f"at least {minimum}"
    return Must(what, lambda value: value >= minimum)


def between(low: int, high: int) -> Must:
    return Must(f"between {low} and {high}", lambda value: low <= value <= high)


class Option:
    """One option's declaration; see `option()`."""

    __slots__ = (
        "bare",
        "default",
        "flags",
        "format",
        "header",
        "help",
        "metavar",
        "multiple",
        "negatable",
        "parse",
        "rule",
        "show_default",
        "shown",
        "type",
    )

    def __init__(
        self,
        flags: tuple[str, ...],
        default: Any,
        help: str,
        type: type,
        metavar: str | None,
        show_default: bool,
        rule: Rule | None,
        header: bool,
        negatable: bool,
        bare: str | None,
        multiple: bool,
        parse: Callable[[str], Any] | None,
        format: Callable[[Any], str] | None,
        shown: str | None,
    ) -> None:
        self.flags = flags
        self.default = default
        self.help = help
        self.type = type
        self.metavar = metavar
        self.show_default = show_default
        self.rule = rule
        self.header = header
        self.negatable = negatable
        self.bare = bare
        self.multiple = multiple
        self.parse = parse
        self.format = format
        # How messages name the option: the first long flag, unless told (-N, as the original tool).
        self.shown = shown or next((f for f in flags if f.startswith("--")), flags[0])

    def spellings(self) -> tuple[str, ...]:
        """Every flag that sets it, the --no- forms of a negatable switch included."""
        negated = tuple(
            f"--no-{f[2:]}" for f in self.flags if self.negatable and f.startswith("--")
        )
        return self.flags + negated


class Argument:
    """A positional argument (a command's TEMPLATE or RUN), named on the command line as its field, in capitals."""

    __slots__ = ("multiple", "required")

    def __init__(self, required: bool, multiple: bool = False) -> None:
        self.required = required  # on the command line
        self.multiple = multiple  # any number of them (a tuple)


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
    """Declare an option field. Returns the declaration, typed as the field's value for mypy.

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
    return declared  # type: ignore[return-value]


def argument(*, required: bool = True, multiple: bool = False) -> Any:
    """Declare a positional argument field; the field has no default.

    `required=False` leaves a missing argument to the command, to say in its own
    words what is missing (the render's `missing the TEMPLATE argument`). `multiple`
    takes any number of them, as a tuple (`logs RUN [TASK...]`).
    """
    return Argument(required, multiple)


class Field:
    """A group's field as the table sees it: its name, default, declaration and the group it is in."""

    __slots__ = ("declaration", "default", "group", "name", "required", "section")

    def __init__(
        self,
        name: str,
        default: Any,
        required: bool,
        declaration: Option | Argument | None,
        group: type[OptionGroup],
    ) -> None:
        self.name = name
        self.default = default
        self.required = required
        self.declaration = declaration  # None: not on the command line (filled in by a command)
        self.group = group
        # The heading it stands under in --help: its own group's, not one the group inherits.
        self.section: str = vars(group).get("section", "Options")

    @property
    def option(self) -> Option | None:
        return self.declaration if isinstance(self.declaration, Option) else None

    def __repr__(self) -> str:
        return f"<field {self.group.__name__}.{self.name}>"


_NO_DEFAULT = object()


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(option, argument))
class OptionGroup:
    """Base of every option group: keyword-only construction, read-only fields; see the module doc."""

    section = "Options"  # the heading its options stand under in --help
    _own: ClassVar[dict[str, Field]]  # the fields this class declares
    _table: ClassVar[dict[str, Field]]  # all of its fields, its groups' included

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own: dict[str, Field] = {}
        for name in vars(cls).get("__annotations__", {}):
            if name.startswith("_"):
                continue
            value = vars(cls).get(name, _NO_DEFAULT)
            if isinstance(value, Option):
                own[name] = Field(name, value.default, False, value, cls)
            elif isinstance(value, Argument):
                own[name] = Field(name, None, True, value, cls)
            else:
                own[name] = Field(name, value, value is _NO_DEFAULT, None, cls)
        cls._own = own
        # This class's own fields, then each of its groups' in the order they are listed.
        table: dict[str, Field] = {}
        flags: dict[str, str] = {}
        for klass in cls.__mro__:
            for name, field in vars(klass).get("_own", {}).items():
                if name in table:
                    # Declared once: two groups (core and framework) may not both have it.
                    raise TypeError(f"{cls.__name__}: {name!r} is in {table[name]} and {field}")
                table[name] = field
                for flag in field.option.spellings() if field.option else ():
                    if flag in flags:
                        raise TypeError(f"{cls.__name__}: {flag} is both {flags[flag]} and {name}")
                    flags[flag] = name
        cls._table = table

    def __init__(self, **values: Any) -> None:
        state = self.__dict__
        for name, field in self._table.items():
            if name in values:
                state[name] = values.pop(name)
            elif field.required:
                raise TypeError(f"{type(self).__name__}() needs {name}")
            else:
                state[name] = field.default
        if values:
            raise TypeError(f"{type(self).__name__}() has no field {', '.join(values)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    __hash__ = None  # type: ignore[assignment]  # fields may hold mappings

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items())
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (unknown names are a TypeError)."""
        return type(self)(**{**self.__dict__, **changes})


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


_DURATION_PART = r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)"
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A duration as kubectl's --timeout takes it (Go's syntax): `30s`, `5m`, `1h`, `1h30m`, `500ms`.

    Returns seconds. A number needs its unit, except 0; a duration is never negative.
    """
    if text == "0":
        return 0.0
    if not re.fullmatch(f"(?:{_DURATION_PART})+", text):
        raise ValueError(
            f"{text!r} is not a duration; write a number and a unit, such as 30s, 5m or 1h"
        )
    seconds = sum(
        float(number) * _UNIT_SECONDS[unit] for number, unit in re.findall(_DURATION_PART, text)
    )
    if seconds > _LONGEST_DURATION:
        raise ValueError(f"{text!r} is longer than the longest duration, 2562047h (as in kubectl)")
    return seconds


_LONGEST_DURATION = (2**63 - 1) / 1e9  # Go's: an int64 of nanoseconds, about 292 years


def format_duration(seconds: float) -> str:
    """The shortest of `1h`, `5m`, `30s` that says `seconds` exactly, else seconds with a unit."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.9f}".rstrip("0") + "s"  # no exponent: Go's syntax has none


def age(created: datetime | None, now: datetime | None = None) -> str:
    """An age as kubectl prints it: 45s, 3m20s, 45m, 3h20m, 20h, 3d4h, 30d, 2y; '<unknown>' without one."""
    if created is None:
        return "<unknown>"
    from datetime import datetime, timezone

    seconds = int(((now or datetime.now(timezone.utc)) - created).total_seconds())
    if seconds < 0:
        return "0s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"
