"""Label and field selectors, parsed and matched as kube-apiserver v1.20 does, with its error wording.

The label parser follows k8s.io/apimachinery/pkg/labels (its lexer, its recursive
descent and its messages); the field parser follows k8s.io/apimachinery/pkg/fields.
Which field labels a resource supports, and how it words a refusal, is per resource
(FIELD_LABELS, at the end).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector the server refuses with 400 BadRequest; str() is the Status message."""


# -- label selectors ---------------------------------------------------------------------------

_SPECIAL = "=!(),><"
_WHITESPACE = " \t\r\n"
_TOKENS = {
    ")": "closed-par",
    ",": "comma",
    "!": "does-not-exist",
    "==": "double-equals",
    "=": "equals",
    ">": "greater-than",
    "in": "in",
    "<": "less-than",
    "!=": "not-equals",
    "notin": "notin",
    "(": "open-par",
}
_NAME = "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_VALUE_FORMAT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"


def _regex_error(message: str, regex: str, *examples: str) -> str:
    # validation.RegexError: note the two spaces after each comma, as the server writes them
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{message} (e.g. {shown}, regex used for validation is '{regex}')"


_NAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def _label_key_problems(key: str) -> list[str]:
    """validation.IsQualifiedName."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        problems = []
        if len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        if not re.fullmatch(_DNS_SUBDOMAIN, prefix):
            problems.append(
                "prefix part "
                + _regex_error(
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric character",
                    _DNS_SUBDOMAIN,
                    "example.com",
                )
            )
        if problems:
            return problems
    else:
        return [
            "a qualified name "
            + _regex_error(_NAME_MESSAGE, _NAME_FORMAT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        return ["name part must be non-empty"]
    problems = []
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not re.fullmatch(_NAME, name):
        problems.append(
            "name part " + _regex_error(_NAME_MESSAGE, _NAME_FORMAT, "MyName", "my.name", "123-abc")
        )
    return problems


def _label_value_problems(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if value and not re.fullmatch(_NAME, value):
        problems.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _VALUE_FORMAT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return problems


def _lex(text: str) -> list[tuple[str, str]]:
    """The label selector lexer: (token, literal) pairs ending with ("end", "")."""
    items: list[tuple[str, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos == len(text):
            items.append(("end", ""))
            return items
        if text[pos] in _SPECIAL:
            buffer, last = "", ("", "")
            while pos < len(text) and text[pos] in _SPECIAL:
                buffer += text[pos]
                if buffer in _TOKENS:
                    last = (_TOKENS[buffer], buffer)
                    pos += 1
                elif last[0]:
                    break
                else:
                    pos += 1
            if not last[0]:
                items.append(("error", f"error expected: keyword found '{buffer}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < len(text) and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_TOKENS.get(word, "identifier"), word))


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # exists, !, in, notin, gt, lt
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        if self.operator == "in":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "notin":
            return self.key not in labels or labels[self.key] not in self.values
        if self.key not in labels:
            return False
        try:
            have, want = int(labels[self.key]), int(next(iter(self.values)))
        except ValueError:
            return False
        return have > want if self.operator == "gt" else have < want


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def _look(self, values: bool = True) -> tuple[str, str]:
        token, literal = self.items[self.position]
        if values and token in ("in", "notin"):
            token = "identifier"  # 'in' and 'notin' can be values: `x in (in)`
        return token, literal

    def _take(self, values: bool = True) -> tuple[str, str]:
        item = self._look(values)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self._look()
            if token == "end":
                return requirements
            if token not in ("identifier", "does-not-exist"):
                raise SelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._requirement())
            except SelectorError as e:
                raise SelectorError(f"unable to parse requirement: {e}") from None
            token, literal = self._take()
            if token == "end":
                return requirements
            if token != "comma":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            after, after_literal = self._look()
            if after not in ("identifier", "does-not-exist"):
                raise SelectorError(f"found '{after_literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        token, literal = self._take()
        operator = ""
        if token == "does-not-exist":
            operator = "!"
            token, literal = self._take()
        if token != "identifier":
            raise SelectorError(f"found '{literal}', expected: identifier")
        key = literal
        problems = _label_key_problems(key)
        if problems:
            raise SelectorError(f'invalid label key "{key}": {"; ".join(problems)}')
        if operator == "!" or self._look()[0] in ("end", "comma"):
            return Requirement(key, operator or "exists", frozenset())
        token, literal = self._take(values=False)
        operators = {
            "in": "in",
            "notin": "notin",
            "equals": "in",
            "double-equals": "in",
            "not-equals": "notin",
            "greater-than": "gt",
            "less-than": "lt",
        }
        if token not in operators:
            raise SelectorError(f"found '{literal}', expected: '=', '!=', '==', 'in', notin'")
        operator = operators[token]
        values = self._set_values() if token in ("in", "notin") else self._exact_value()
        for value in values:
            problems = _label_value_problems(value)
            if problems:
                raise SelectorError(
                    f'invalid label value: "{value}": at key: "{key}": {"; ".join(problems)}'
                )
        if operator in ("gt", "lt"):
            (value,) = values
            if not re.fullmatch(r"-?\d+", value):
                raise SelectorError("for 'Gt', 'Lt' operators, the value must be an integer")
        return Requirement(key, operator, frozenset(values))

    def _exact_value(self) -> set[str]:
        if self._look()[0] in ("end", "comma"):
            return {""}
        token, literal = self._take()
        if token != "identifier":
            raise SelectorError(f"found '{literal}', expected: identifier")
        return {literal}

    def _set_values(self) -> set[str]:
        token, literal = self._take()
        if token != "open-par":
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self._look()
        if token == "closed-par":
            self._take()
            return {""}
        if token not in ("identifier", "comma"):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            token, literal = self._take()
            if token == "identifier":
                values.add(literal)
                after, after_literal = self._look()
                if after == "closed-par":
                    self._take()
                    return values
                if after != "comma":
                    raise SelectorError(f"found '{after_literal}', expected: ',' or ')'")
            elif token == "comma":
                if not values:
                    values.add("")
                after, _ = self._look()
                if after == "closed-par":
                    values.add("")
                    self._take()
                    return values
                if after == "comma":
                    values.add("")
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")


def parse_label_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A label selector as a predicate on labels; raises SelectorError as the server words it."""
    requirements = _LabelParser(text).parse()
    return lambda labels: all(r.matches(labels) for r in requirements)


# -- field selectors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldTerm:
    field: str
    operator: str  # "=" or "!="
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.field, "") == self.value) == (self.operator == "=")


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in text:
        if escaped:
            current += "\\" + char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current + ("\\" if escaped else ""))
    return parts


def _unescape(value: str) -> str:
    out, escaped = "", False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ord(char)}"
            )
        else:
            out += char
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return out


def parse_field_selector(text: str) -> list[FieldTerm]:
    """fields.ParseSelector: `a=b,c!=d,e==f`, with backslash escapes in values."""
    terms = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        for i in range(len(term)):
            operator = next((op for op in ("!=", "==", "=") if term.startswith(op, i)), None)
            if operator:
                field, value = term[:i], term[i + len(operator) :]
                terms.append(FieldTerm(field, "!=" if operator == "!=" else "=", _unescape(value)))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
    return terms


# -- which field labels each resource supports -------------------------------------------------

# field label -> (path in the object, value when absent), per resource, as v1.20's
# *ToSelectableFields functions build them
FIELD_LABELS: dict[str, dict[str, tuple[str, str]]] = {
    "pods": {
        "metadata.name": ("metadata.name", ""),
        "metadata.namespace": ("metadata.namespace", ""),
        "spec.nodeName": ("spec.nodeName", ""),
        "spec.restartPolicy": ("spec.restartPolicy", ""),
        "spec.schedulerName": ("spec.schedulerName", ""),
        "spec.serviceAccountName": ("spec.serviceAccountName", ""),
        "status.phase": ("status.phase", ""),
        "status.podIP": ("status.podIP", ""),
        "status.nominatedNodeName": ("status.nominatedNodeName", ""),
    },
    "nodes": {
        "metadata.name": ("metadata.name", ""),
        "spec.unschedulable": ("spec.unschedulable", "false"),
    },
    "services": {
        "metadata.name": ("metadata.name", ""),
        "metadata.namespace": ("metadata.namespace", ""),
    },
    "jobs": {
        "metadata.name": ("metadata.name", ""),
        "metadata.namespace": ("metadata.namespace", ""),
        "status.successful": ("status.succeeded", "0"),
    },
    "namespaces": {
        "metadata.name": ("metadata.name", ""),
        "status.phase": ("status.phase", ""),
    },
    "events": {
        "metadata.name": ("metadata.name", ""),
        "metadata.namespace": ("metadata.namespace", ""),
        "involvedObject.kind": ("involvedObject.kind", ""),
        "involvedObject.namespace": ("involvedObject.namespace", ""),
        "involvedObject.name": ("involvedObject.name", ""),
        "involvedObject.uid": ("involvedObject.uid", ""),
        "involvedObject.apiVersion": ("involvedObject.apiVersion", ""),
        "involvedObject.resourceVersion": ("involvedObject.resourceVersion", ""),
        "involvedObject.fieldPath": ("involvedObject.fieldPath", ""),
        "reason": ("reason", ""),
        "reportingComponent": ("reportingComponent", ""),
        "source": ("source.component", ""),
        "type": ("type", ""),
    },
}


def field_values(resource: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """The values a field selector sees for `obj`, booleans and numbers as Go prints them."""
    values = {}
    for label, (path, absent) in FIELD_LABELS[resource].items():
        value: Any = obj
        for step in path.split("."):
            value = value.get(step) if isinstance(value, Mapping) else None
        if value is None:
            values[label] = absent
        elif isinstance(value, bool):
            values[label] = "true" if value else "false"
        else:
            values[label] = str(value)
    return values


def unsupported_field(resource: str, label: str) -> str:
    """The server's refusal of a field label, which it words differently per resource."""
    if resource == "services":
        return (
            f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    if resource == "jobs":
        return f'field label "{label}" not supported for batchv1.Job'
    return f"field label not supported: {label}"


def check_fields(resource: str, terms: list[FieldTerm]) -> None:
    for term in terms:
        if term.field not in FIELD_LABELS[resource]:
            raise SelectorError(unsupported_field(resource, term.field))
