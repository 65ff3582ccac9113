"""The jinja environment templates render in: sandboxed, strict, and bounded.

jinja's sandbox keeps a template from Python's internals, not from running for ever or
filling the memory (nested loops, `'x' * 10**10`, `9 ** 99999999`). Each render is bounded:

- `MAX_ITERATIONS` loop iterations and `MAX_CALLS` calls, counted as they happen, so a
  runaway loop or recursion stops with a line that names the template line;
- no number over `MAX_INT_BITS` bits and no string or list over `MAX_TEXT` items made by
  `*` or `**`, refused before Python computes it (nothing can interrupt that computation);
- `MAX_TEXT` characters of text for one task (Kubernetes stores no object over 1.5 MiB),
  `MAX_TOTAL_TEXT` for a run's tasks, all held until each is checked;
- on Linux, `MEMORY` bytes more address space for a task's render and the check of its
  YAML (`CompiledTemplate.bounded`), so one huge allocation fails at once;
- `CPU_SECONDS` of CPU time for compiling and for all the tasks: the backstop for work no
  count sees (a filter's own loop, such as `range(100000) | map('string') | join`).

A template has at most `MAX_TAGS` expressions and statements, and is compiled within the
memory and CPU caps. Constant expressions are not folded at compile time (jinja's optimizer
would compute `'x' | center(10**10)` outside these bounds).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import jinja2

MAX_TAGS = 10_000
MAX_ITERATIONS = 1_000_000
MAX_CALLS = 100_000
MAX_INT_BITS = 100_000
MAX_TEXT = 16 << 20
MAX_TOTAL_TEXT = 512 << 20
MEMORY = 512 << 20
CPU_SECONDS = 120.0

T = TypeVar("T")

# The filter every {% for %} loop's iterable goes through, to count its iterations.
_LOOP_FILTER = "simpletfjob.loop"


class RenderLimit(Exception):
    """A render went past one of the bounds; the message says which, for the template line."""

    def __init__(self, message: str, lineno: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.lineno = lineno  # the template line, where only the caller's traceback knows it


def make_environment() -> jinja2.Environment:
    """A sandboxed, strict environment with `<< >>` for variables, whose renders are bounded."""
    environment: jinja2.Environment = _environment_class()(
        loader=_no_loader(),
        variable_start_string="<<",
        variable_end_string=">>",
        block_start_string="{%",
        block_end_string="%}",
        comment_start_string="<#",
        comment_end_string="#>",
        # A statement alone on its line leaves no blank line or stray indentation behind.
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        # No constant folding at compile time: it would run filters outside the bounds.
        optimized=False,
    )
    return environment


_CLASS: Any = None


def _no_loader() -> Any:
    """A loader with nothing to load: {% include %}, {% import %} and {% extends %} say so."""
    from jinja2 import BaseLoader, TemplateNotFound

    class NoLoader(BaseLoader):
        def get_source(self, environment: Any, template: str) -> Any:
            raise TemplateNotFound(
                template,
                f"there is no template {template!r} to include, import or extend: "
                "a simpletfjob template is one file (use a macro, or a value with -f)",
            )

    return NoLoader()


def _environment_class() -> Any:
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from jinja2 import StrictUndefined, nodes
    from jinja2.runtime import LoopContext
    from jinja2.sandbox import SandboxedEnvironment
    from jinja2.utils import pass_context

    class BoundedEnvironment(SandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def __init__(self, **options: Any) -> None:
            super().__init__(undefined=StrictUndefined, **options)
            del self.filters["random"], self.globals["lipsum"]  # the same inputs, the same bytes
            self.iterations = 0
            self.calls = 0

            @pass_context  # never called at compile time
            def loop(context: Any, iterable: Iterable[Any]) -> Iterator[Any]:
                return self.counted(iterable)

            self.filters[_LOOP_FILTER] = loop

        def start(self) -> None:
            self.iterations = self.calls = 0

        def counted(self, iterable: Iterable[Any]) -> Iterator[Any]:
            for item in iterable:
                self.iterations += 1
                if self.iterations > MAX_ITERATIONS:
                    raise RenderLimit(
                        f"the template loops more than {MAX_ITERATIONS:,} times for one task; "
                        "see Limits in the README"
                    )
                yield item

        def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
            template = super()._parse(source, name, filename)
            for node in template.find_all(nodes.For):
                node.iter = nodes.Filter(
                    node.iter, _LOOP_FILTER, [], [], None, None, lineno=node.iter.lineno
                ).set_environment(self)
            return template

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            __self.calls += 1
            if __self.calls > MAX_CALLS:
                raise RenderLimit(
                    f"the template makes more than {MAX_CALLS:,} calls for one task; "
                    "see Limits in the README"
                )
            if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
                args = (__self.counted(args[0]), *args[1:])
            return super().call(__context, __obj, *args, **kwargs)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

    _CLASS = BoundedEnvironment
    return _CLASS


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse a product or power too large to compute, before Python computes it."""
    if operator == "**":
        if type(left) in (int, bool) and type(right) in (int, bool) and right > 0:
            # |left| >= 2 ** (bits - 1), so the power has at least (bits - 1) * right bits.
            bits = abs(left).bit_length()
            if bits > 1 and (bits - 1) * right > MAX_INT_BITS:
                # Numbers past 4300 digits cannot even be shown (Python's own limit).
                small = bits <= 64 and right.bit_length() <= 64
                shown = f"{left} ** {right}" if small else "a power"
                raise RenderLimit(
                    f"{shown} has more than {MAX_INT_BITS:,} bits; see Limits in the README"
                )
        return
    if type(left) in (int, bool) and type(right) in (int, bool):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
            raise RenderLimit(
                f"a product of more than {MAX_INT_BITS:,} bits; see Limits in the README"
            )
        return
    for sequence, times in ((left, right), (right, left)):
        if (
            isinstance(sequence, (str, list, tuple))
            and type(times) in (int, bool)
            and len(sequence) * times > MAX_TEXT
        ):
            what = "string" if isinstance(sequence, str) else type(sequence).__name__
            items = "characters" if isinstance(sequence, str) else "items"
            raise RenderLimit(
                f"'*' would make a {what} of {len(sequence) * times:,} {items}, more than "
                f"{MAX_TEXT:,}; see Limits in the README"
            )


def error_line(error: BaseException, filename: str) -> int | None:
    """The template line an error was raised on: jinja gives its frames the template's lines."""
    import traceback

    lines = [
        n for f, n in traceback.walk_tb(error.__traceback__) if f.f_code.co_filename == filename
    ]
    return lines[-1] if lines else None


def check_tags(text: str, filename: str) -> None:
    """Refuse a template of more than MAX_TAGS expressions and statements, before compiling it:
    compiling takes time and memory that grow faster than the template."""
    if text.count("<<") + text.count("{%") <= MAX_TAGS:
        return
    import re

    for count, match in enumerate(re.finditer(r"<<|\{%", text), start=1):
        if count > MAX_TAGS:
            line = text.count("\n", 0, match.start()) + 1
            raise RenderLimit(
                f"{filename}:{line}: the template has more than {MAX_TAGS:,} expressions and "
                "statements (<< >> and {% %}); write a loop instead; see Limits in the README"
            )


class Bounds:
    """The bounds around one run's work on a template: its CPU time, and the memory cap.
    `run` is re-entrant: work inside work is bounded once, by the outermost."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.cpu_left = CPU_SECONDS
        self.total = 0  # characters rendered so far
        self.base: int | None = None  # the address space when the first work started
        self.depth = 0

    def run(self, work: Callable[[], T], doing: str = "for one task") -> T:
        """`work()` within the memory cap and the run's CPU time; RenderLimit if it needs more."""
        if self.depth:
            return work()
        self.depth += 1
        try:
            for attempt in (1, 2):
                line: int | None = None
                try:
                    return self._capped(work)
                except MemoryError as e:
                    line = error_line(e, self.filename)
                # Out of the except block, the failed work's objects are freed with its traceback.
                grown = _address_space()
                if (
                    attempt == 2
                    or grown is None
                    or self.base is None
                    or grown < self.base + (64 << 20)
                ):
                    raise RenderLimit(
                        f"the template needs more than {MEMORY >> 20} MiB of memory {doing}; "
                        "see Limits in the README",
                        line,
                    )
                # The process grew since the cap was set (it holds more rendered tasks now):
                # the cap was too tight, not the template too big. Measure again, once more.
                self.base = grown
            raise AssertionError("unreachable")
        finally:
            self.depth -= 1

    def render(self, render: Callable[[], str]) -> str:
        """One task's text: `render()` capped and timed, and its length checked."""
        text = self.run(render)
        if len(text) > MAX_TEXT:
            raise RenderLimit(
                f"the template makes {len(text):,} characters for one task, more than "
                f"{MAX_TEXT >> 20} MiB; see Limits in the README"
            )
        self.hold(len(text))
        return text

    def hold(self, length: int) -> None:
        """Every task's text is held until all are checked: bound them together too."""
        self.total += length
        if self.total > MAX_TOTAL_TEXT:
            raise RenderLimit(
                f"the template's renders come to more than {MAX_TOTAL_TEXT >> 20} MiB of text "
                "in all; see Limits in the README"
            )

    def _capped(self, work: Callable[[], T]) -> T:
        restore = self._cap_memory()
        try:
            timer = _Timer.start(self.cpu_left)
            try:
                return work()
            finally:
                # The alarm fires once: if it lands in here, it only ends this render.
                self.cpu_left = timer.stop()
        finally:
            if restore is not None:
                restore()

    def _cap_memory(self) -> Any:
        """Lower the address-space limit to the base plus MEMORY; returns how to put it back."""
        try:
            import resource
        except ImportError:  # not Unix
            return None
        if self.base is None:
            self.base = _address_space()
            if self.base is None:  # not Linux: no /proc to measure it
                return None
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = self.base + MEMORY
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft != resource.RLIM_INFINITY and soft <= cap:
            return None  # the user's own limit is tighter already
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ValueError, OSError):
            return None
        return lambda: resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int | None:
    """The process's address space in bytes (VmSize), or None where /proc cannot tell."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


class _Timer:
    """A CPU-time alarm (SIGPROF) that raises RenderLimit in the render when it runs out."""

    def __init__(self, signals: Any, left: float) -> None:
        self.signals = signals
        self.left = left

    @classmethod
    def start(cls, left: float) -> _Timer:
        try:
            import _signal as signals  # type: ignore[import-not-found]  # `signal` builds enums
        except ImportError:
            import signal as signals
        if left <= 0:
            raise RenderLimit(_cpu_message())
        try:
            if signals.getsignal(signals.SIGPROF) is not _expired:
                signals.signal(signals.SIGPROF, _expired)
            signals.setitimer(signals.ITIMER_PROF, left)
        except (AttributeError, ValueError, OSError):  # no timers, or not the main thread
            return cls(None, left)
        return cls(signals, left)

    def stop(self) -> float:
        """Disarm; the CPU time left for the run's later renders."""
        if self.signals is None:
            return self.left
        left, _ = self.signals.setitimer(self.signals.ITIMER_PROF, 0)
        return float(left) if left > 0 else 0.0


def _expired(signum: int, frame: FrameType | None) -> None:
    raise RenderLimit(_cpu_message())


def _cpu_message() -> str:
    return (
        f"rendering and checking the template takes more than {CPU_SECONDS:g} s of CPU time "
        "in all; see Limits in the README"
    )
