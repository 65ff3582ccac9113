"""The docs say what the code does: status head lines as status prints them today, templates.md's
header options and built-in labels, and the README's word on what the tests need."""

from __future__ import annotations

import re

import yaml

from simpletfjob.frameworks import FRAMEWORKS
from simpletfjob.options.render import header_fields
from simpletfjob.template.catalog import builtin_names, locate
from tests.conftest import ROOT
from tests.support.docs import DOCS, fenced_blocks

# `status RUN`'s head line (cli/status.py): the state and tasks, the deciding task once
# ended, the whole-run restarts, then when it started and ended.
HEAD = re.compile(
    r"run \S+ in \S+: (?P<state>\w+), \d+ tasks?( \([^)]*\))?(, restarts \d+/\d+)?"
    r"(?P<started>; started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    r"(?P<ended>, ended \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\w+\))?)?"
)


def test_the_status_head_lines_in_the_docs_are_todays() -> None:
    found = 0
    for page in DOCS:
        for block in fenced_blocks(page):
            for line in block.text.splitlines():
                if not re.match(r"run \S+ in \S+: ", line):
                    continue
                found += 1
                head = HEAD.fullmatch(line)
                assert head, f"{page.name}: {line}"
                # A run that runs or has ended has started; one that has ended says when.
                if head["state"] in ("Running", "Succeeded", "Failed"):
                    assert head["started"], f"{page.name}: {line}"
                if head["state"] in ("Succeeded", "Failed"):
                    assert head["ended"], f"{page.name}: {line}"
    assert found >= 4


def test_templates_md_lists_every_option_a_header_may_set() -> None:
    text = (ROOT / "docs" / "templates.md").read_text()
    paragraph = text.split("- `options:` gives defaults for these command-line options only:")[1]
    paragraph = paragraph.split("\n- ")[0]
    listed = {name for name in re.findall(r"`([a-z][a-z-]*)`", paragraph)}
    allowed = {name.replace("_", "-") for name in header_fields()}
    assert allowed <= listed, sorted(allowed - listed)
    assert {"framework", "nproc-per-node"} <= listed


def test_templates_md_says_which_labels_only_the_tensorflow_built_ins_carry() -> None:
    text = " ".join((ROOT / "docs" / "templates.md").read_text().split())
    assert "Only the TensorFlow built-ins carry `tfjob: <name>` and `tf-role: <type>`" in text
    for name in builtin_names():
        source = locate(name)
        framework = str(source.header.options.get("framework") or FRAMEWORKS[0])
        rendered = source.render_text().replace("<<", "").replace(">>", "")
        labels = {
            key
            for line in rendered.splitlines()
            if re.match(r"\s+(tfjob|tf-role|pytorchjob|jaxjob):", line)
            for key in yaml.safe_load(line.strip())
        }
        expected = {
            "tensorflow": {"tfjob", "tf-role"},
            "pytorch": {"pytorchjob"},
            "jax": {"jaxjob"},
        }[framework]
        assert labels == expected, (name, labels)
        if framework != "tensorflow":
            assert f"`{name}` carries `{sorted(expected)[0]}: <name>`" in text, name


def test_the_readmes_test_section_says_what_the_tests_need() -> None:
    text = " ".join((ROOT / "README.md").read_text().split("## Tests")[1].split("\n## ")[0].split())
    for needed in (
        "TensorFlow",
        "torch",
        "JAX",
        "about 3 GB",
        "`$KUBEBUILDER_ASSETS`",
        "without it they are skipped",
        "setup-envtest",
        "kube-controller-manager",
    ):
        assert needed in text, needed
