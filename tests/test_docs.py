"""The documentation runs: every `qa-finetune` command that README.md and docs/*.md show names a
command that exists and only options that command takes, and every file they link to exists.

Commands are read from fenced code blocks (line continuations joined, comments dropped, pipes
and `&&` split) and from inline code spans; the options are read from the typer app itself, so
a renamed or removed option fails here rather than in a reader's terminal.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import typer.core
import typer.main

from qa_finetune.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BENCHMARKS = ROOT / "BENCHMARKS.md"
REPORTS = sorted((ROOT / "bench" / "reports").glob("*.md"))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"(?<!`)`(qa-finetune [^`]+)`(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
NAMED_FILE = re.compile(r"(?<![\w/.-])((?:bench|configs)/[\w./-]+\.(?:py|sh|yaml))\b")
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def _commands() -> dict[str, set[str]]:
    """Each command of the app and the option spellings it accepts (``--help`` included)."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    return {
        name: {
            "--help",
            *(o for p in command.params for o in [*p.opts, *p.secondary_opts] if o[:1] == "-"),
        }
        for name, command in group.commands.items()
    }


@cache
def _global_options() -> set[str]:
    """The options given before the command (``qa-finetune --verbose ask ...``)."""
    group = typer.main.get_command(app)
    return {o for p in group.params for o in p.opts if o[:1] == "-" and o != "--help"}


def _shell_lines(block: str) -> list[str]:
    """A code block's logical lines: continuations joined; prompts and output left out."""
    joined = re.sub(r"\\\n", " ", block)
    lines = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        lines.append(line)
    return lines


def _invocations(line: str) -> list[list[str]]:
    """The argument lists that follow each `qa-finetune` in one shell line."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: not shell (a JSON line, say)
        return []
    found: list[list[str]] = []
    current: list[str] | None = None
    for token in tokens:
        if token in SEPARATORS:
            current = None
        elif token == "qa-finetune":
            current = []
            found.append(current)
        elif current is not None:
            current.append(token)
    return found


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, arguments) for every `qa-finetune` command the documentation shows."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in FENCE.findall(text):
            for line in _shell_lines(block):
                found += [(_name(path), args) for args in _invocations(line)]
        prose = FENCE.sub("", text)
        for span in INLINE.findall(prose):
            found += [(_name(path), args) for args in _invocations(span)]
    return found


def problems(args: list[str]) -> list[str]:
    """What is wrong with one documented command: an unknown command or option."""
    commands = _commands()
    while args and args[0] in _global_options():  # qa-finetune --verbose ask ...
        args = args[1:]
    if not args or args[0] in {"--help", "-h"}:
        return []
    name, rest = args[0], args[1:]
    if name not in commands:
        return [f"no command {name!r}"]
    # An option is a token starting with "-" that is neither stdin ("-") nor a negative number.
    options = [token.strip("[]").split("=", 1)[0] for token in rest]
    return [
        f"{name}: no option {option}"
        for option in options
        if re.match(r"-[^\d]", option) and option not in commands[name]
    ]


COMMANDS = documented_commands()


def test_the_documentation_shows_commands() -> None:
    # A reader that found nothing would pass everything below.
    assert len(COMMANDS) > 60
    assert {args[0] for _, args in COMMANDS if args} >= set(_commands())


@pytest.mark.parametrize(
    ("where", "args"), COMMANDS, ids=[f"{w}:{' '.join(a)[:60]}" for w, a in COMMANDS]
)
def test_each_documented_command_exists(where: str, args: list[str]) -> None:
    assert problems(args) == [], f"{where}: qa-finetune {shlex.join(args)}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("qa-finetune ask 'q?' --model m --top-k 3  # --nonsense in a comment", []),
        ("cat a.txt | qa-finetune ask 'q?' --json", []),
        ("qa-finetune split f.json [--folds 5] [--fold 0]", []),
        ("qa-finetune train --max-minutez 5", ["train: no option --max-minutez"]),
        ("qa-finetune trian --config c.yaml", ["no command 'trian'"]),
        ("qa-finetune evaluate --data=dev.json --model m", []),
        ("qa-finetune --verbose ask 'q?' --model m", []),
        ("qa-finetune --verbose ask 'q?' --modle m", ["ask: no option --modle"]),
    ],
)
def test_the_checker_catches_what_it_looks_for(line: str, expected: list[str]) -> None:
    (args,) = _invocations(line)
    assert problems(args) == expected


def test_continuations_and_prompts_are_read() -> None:
    block = "$ qa-finetune ask q \\\n  --index i --top-k 2\n1. an answer (score 0.9)\n"
    calls = [a for line in _shell_lines(block) for a in _invocations(line)]
    assert calls == [["ask", "q", "--index", "i", "--top-k", "2"]]


def _links() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:|#", target):
                found.append((_name(path), target.split("#", 1)[0]))
        for named in NAMED_FILE.findall(FENCE.sub("", text)) + [
            n for block in FENCE.findall(text) for n in NAMED_FILE.findall(block)
        ]:
            found.append((_name(path), "/" + named))  # named from the repository root
    return sorted(set(found))


@pytest.mark.parametrize(("where", "target"), _links(), ids=lambda v: str(v))
def test_each_linked_file_exists(where: str, target: str) -> None:
    base = ROOT if target.startswith("/") else (ROOT / where).parent
    path = (base / target.lstrip("/")).resolve()
    assert path.exists(), f"{where} links to {target}, which does not exist"


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (code blocks left out)."""
    slugs: set[str] = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            # A repeated heading gets -1, -2, ... after its first use.
            n = 0
            while (slug if n == 0 else f"{slug}-{n}") in slugs:
                n += 1
            slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


def _anchored_links() -> list[tuple[str, str, str]]:
    """(where, file, anchor) for every link with an anchor into a Markdown file that exists."""
    found = []
    for path in [*DOCS, BENCHMARKS, *REPORTS]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if "#" not in target or re.match(r"[a-z]+:", target):
                continue
            name, anchor = target.split("#", 1)
            linked = (path.parent / name).resolve() if name else path
            if linked.suffix == ".md" and linked.exists():
                found.append((_name(path), _name(linked), anchor))
    return sorted(set(found))


@pytest.mark.parametrize(("where", "linked", "anchor"), _anchored_links(), ids=lambda v: str(v))
def test_each_linked_heading_exists(where: str, linked: str, anchor: str) -> None:
    assert anchor in _anchors(ROOT / linked), f"{where} links to {linked}#{anchor}: no such heading"


def test_anchors_follow_githubs_rule(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A title\n## 16. Passes in `ask --batch` (2026, 2 cores)\n## Notes\n## Notes\n"
    )
    assert _anchors(page) == {
        "a-title",
        "16-passes-in-ask---batch-2026-2-cores",
        "notes",
        "notes-1",
    }


def _report_links() -> list[tuple[str, str]]:
    """(where, file) for every relative link of BENCHMARKS.md and the benchmark reports."""
    found = []
    for path in [BENCHMARKS, *REPORTS]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if not re.match(r"[a-z]+:|#", target):
                found.append((_name(path), target.split("#", 1)[0]))
    return sorted(set(found))


@pytest.mark.parametrize(("where", "target"), _report_links(), ids=lambda v: str(v))
def test_each_file_a_benchmark_links_to_exists(where: str, target: str) -> None:
    path = ((ROOT / where).parent / target).resolve()
    assert path.exists(), f"{where} links to {target}, which does not exist"


def test_benchmarks_is_a_headline_table_over_one_report_per_study() -> None:
    text = BENCHMARKS.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    # The headline table is the page's only table: every row after its header links a report.
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert len(rows) >= 20
    for row in rows:
        assert "](bench/reports/" in row, f"a headline figure without its report: {row[:60]}"
    linked = set(re.findall(r"\]\(bench/reports/([\w.-]+\.md)", text))
    assert linked == {path.name for path in REPORTS}
