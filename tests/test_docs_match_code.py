"""Docs checked against the code they describe: the command lines they show exist with those flags, the
architecture page lists the shared root modules the architecture test enforces, and no text cites an
issue number (a reader cannot look one up)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer

from tests.test_architecture import SHARED
from toolweave.cli import app

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_INLINE = re.compile(r"`([^`\n]+)`")
_INVOCATION = re.compile(r"(?:^|[\s/(])toolweave((?: +[^\s|;&>]+)*)")
"""``toolweave`` and its words, up to the end of the code or a shell operator (``|``, ``;``, ``&``, ``>``)."""


_COMMAND_WORD = re.compile(r"[a-z][a-z-]*(/[a-z][a-z-]*)*")


def code_spans(text: str) -> list[tuple[int, str]]:
    """(line number, code) for each inline code span and each line of a fenced block."""
    spans: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            spans.append((number, line))
        else:
            # README tables escape a literal | as \| inside code: an alternative, not a shell pipe
            spans += [(number, span.replace("\\|", "/")) for span in _INLINE.findall(line)]
    return spans


def command_lines(text: str) -> list[tuple[int, list[str]]]:
    """The words after each ``toolweave`` the docs show as a command line."""
    found = []
    for number, code in code_spans(text):
        for match in _INVOCATION.finditer(code.replace("|", " | ")):
            words = match.group(1).split()
            if words:
                found.append((number, words))
    return found


def command_tree() -> Any:
    return typer.main.get_command(app)


def problems_in(words: list[str], root: Any) -> list[str]:
    """What is wrong with one documented command line: an unknown command, subcommand or flag."""
    command, rest = root, list(words)
    while hasattr(command, "commands") and rest:
        head = rest.pop(0).rstrip("\"',")  # `"command": "toolweave hook claude-code",` in JSON
        if command is root and not _COMMAND_WORD.fullmatch(head):
            return []  # `toolweave --help`, a server named toolweave (`claude mcp add toolweave URL`)
        # `graph stats/show TOOL/export`: alternatives separated by a slash (a | in the docs)
        names = [n for n in head.split("/") if n]
        if not names or any(n not in command.commands for n in names):
            return [f"no command {' '.join(words[: len(words) - len(rest)])!r}"]
        command = command.commands[names[0]]
    options = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    flags = [w.strip("[](),.").split("=")[0] for w in rest if w.lstrip("[(").startswith("--")]
    return [f"{command.name}: no option {flag}" for flag in flags if flag not in options]


def test_documented_command_lines_exist_with_their_flags() -> None:
    root = command_tree()
    problems = []
    checked = 0
    for doc in DOCS:
        for number, words in command_lines(doc.read_text(encoding="utf-8")):
            checked += 1
            problems += [f"{doc.relative_to(REPO)}:{number}: {p}" for p in problems_in(words, root)]
    assert checked >= 20, "the docs should show command lines"
    assert not problems, "\n".join(problems)


def test_the_command_line_check_bites() -> None:
    """The negative cases: an unknown command, subcommand or flag is reported; alternatives are not."""
    root = command_tree()
    assert problems_in(["serve", "--manifest", "m.yaml", "--no-such-flag"], root)
    assert problems_in(["frobnicate"], root)
    assert problems_in(["hook", 'claude-cod",'], root)
    assert problems_in(["graph", "draw"], root)
    assert problems_in(["bench", "x", "[--methd", "..."], root)
    assert not problems_in(["graph", "stats/show", "TOOL/export"], root)
    assert not problems_in(["serve", "--manifest", "FILE", "[--transport", "stdio/http/sse]"], root)


@pytest.mark.parametrize("line", ["| `toolweave serve --manifest FILE [--transport stdio\\|http]` | x |"])
def test_a_table_row_is_read_as_one_command_line(line: str) -> None:
    assert command_lines(line) == [(1, ["serve", "--manifest", "FILE", "[--transport", "stdio/http]"])]


def test_architecture_page_lists_the_shared_root_modules() -> None:
    """The row of shared root modules names exactly the modules the architecture test lets every layer
    import, and every other module at the package root has a row of its own."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `toolweave/")]
    shared_row = next(line for line in rows if "shared vocabulary" in line)
    listed = set(re.findall(r"`toolweave/(\w+)\.py`", shared_row.split("|")[1]))
    assert listed == SHARED, f"shared modules on the page {sorted(listed)} != enforced {sorted(SHARED)}"
    root = {p.stem for p in (REPO / "toolweave").glob("*.py")} - {"__init__", "__main__"}
    others = {
        m for line in rows if line is not shared_row for m in re.findall(r"`toolweave/(\w+)\.py`", line)
    }
    assert root - SHARED == others, f"root modules without a row: {sorted(root - SHARED - others)}"


ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d|(?<![\w&/#])#\d+\b", re.IGNORECASE)
"""``issue 12``, ``issues 3``, ``issue #12``, ``#12``; not ``lance#4585`` (another project's issue, which a
reader can look up), nor ``&#39;``."""
TEXT_FILES = (".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".txt", ".sh")
HISTORY = {"bench/HISTORY.md"}
"""The record of past measurements: its sections keep the titles they were recorded under."""
EXAMPLES = "tests/test_docs_match_code.py"
"""This file: it shows what the check catches."""


def test_no_text_cites_an_issue_number() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    files = [f for f in tracked.stdout.splitlines() if f.endswith(TEXT_FILES) or f in ("Makefile", ".ci/run")]
    assert len(files) > 50, "git ls-files should list the repository"
    cited = []
    for name in files:
        if name in HISTORY or name == EXAMPLES:
            continue
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                cited.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not cited, "say what the issue said instead of its number:\n" + "\n".join(cited)


def test_the_issue_number_check_bites() -> None:
    for text in ("the gateway (issue 3)", "Issue #12 item 5", "see #12", "issues 10.3"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("(lance-format/lance#4585)", "&#39;", "## 2. Setup", "tissue 5", "k=3 # 12 ms"):
        assert not ISSUE_NUMBER.search(text), text
