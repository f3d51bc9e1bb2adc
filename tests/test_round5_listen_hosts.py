"""Round five of bad inputs, the address a server listens on: an empty ``--host`` (which
would listen on every network while the log shows ``http://:PORT``) is refused by ``serve``
and ``label`` before anything is made; any host beyond loopback is said in one line; and
``label`` (no password, it writes files) listens beyond loopback only with
``--allow-remote``."""

from __future__ import annotations

from pathlib import Path

import pytest
from round4_files import tree
from serve_helpers import free_port
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.serving.listen_address import reachable_note

pytest.importorskip("fastapi")

EMPTY = (
    "error: --host {shown} is empty, which would listen on every network: give 127.0.0.1 "
    "(this machine only, the default) or the address to listen on, e.g. 0.0.0.0"
)
LABEL_REMOTE = (
    "error: --host {host} is not loopback: the labeling page asks no password, shows your "
    "documents and writes --output, for anyone who can reach this machine; keep the default "
    "127.0.0.1, or add --allow-remote"
)
REACHABLE = (
    "warning: --host {host} is not loopback: the {what} is reachable from the network (by "
    "anyone who can reach this machine)"
)


def run(args: list[object]) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def label_args(tmp_path: Path, host: str) -> list[object]:
    (tmp_path / "doc.txt").write_text("Alma Stroud designed the bridge.", encoding="utf-8")
    args = ["label", tmp_path / "doc.txt", "--output", tmp_path / "lab.json"]
    return [*args, "--host", host, "--port", free_port()]


@pytest.mark.parametrize(("host", "shown"), [("", "''"), (" ", "' '")])
def test_serve_refuses_an_empty_host(tmp_path: Path, host: str, shown: str) -> None:
    before = tree(tmp_path)
    code, errors, out = run(["serve", tmp_path / "no-model", "--host", host])
    assert (code, errors, out) == (1, [EMPTY.format(shown=shown)], "")
    assert tree(tmp_path) == before


@pytest.mark.parametrize(("host", "shown"), [("", "''"), (" ", "' '")])
def test_label_refuses_an_empty_host(tmp_path: Path, host: str, shown: str) -> None:
    args = label_args(tmp_path, host)
    before = tree(tmp_path)
    code, errors, out = run(args)
    assert (code, errors, out) == (1, [EMPTY.format(shown=shown)], "")
    assert tree(tmp_path) == before  # no lab.json, no journal, no lock


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_label_beyond_loopback_needs_allow_remote(tmp_path: Path, host: str) -> None:
    args = label_args(tmp_path, host)
    before = tree(tmp_path)
    code, errors, out = run(args)
    assert (code, errors, out) == (1, [LABEL_REMOTE.format(host=host)], "")
    assert tree(tmp_path) == before


def test_label_with_allow_remote_says_it_is_reachable(tmp_path: Path) -> None:
    # A document that is not there stops label after the host is taken: the warning came
    # first, and nothing was made.
    args = label_args(tmp_path, "0.0.0.0")
    args[1] = tmp_path / "missing.txt"
    before = tree(tmp_path)
    code, errors, _ = run([*args, "--allow-remote"])
    assert code == 1
    assert errors[0] == REACHABLE.format(host="0.0.0.0", what="labeling page")
    assert errors[1].startswith(f"error: document not found: {tmp_path / 'missing.txt'}")
    assert len(errors) == 2
    assert tree(tmp_path) == before


def test_serve_beyond_loopback_says_it_is_reachable(tmp_path: Path) -> None:
    (tmp_path / "no-model").mkdir()  # there, but no model: serve stops before loading one
    before = tree(tmp_path)
    code, errors, _ = run(["serve", tmp_path / "no-model", "--host", "0.0.0.0"])
    assert code == 1
    assert errors[0] == REACHABLE.format(host="0.0.0.0", what="server")
    assert errors[1].startswith("error: ") and len(errors) == 2
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("host", "beyond"),
    [
        ("127.0.0.1", False),
        ("127.8.8.8", False),
        ("::1", False),
        ("[::1]", False),
        ("localhost", False),
        ("0.0.0.0", True),
        ("::", True),
        ("192.0.2.7", True),
        ("no-such-host.invalid", True),
    ],
)
def test_only_loopback_is_quiet(host: str, beyond: bool) -> None:
    note = reachable_note(host, "server")
    assert note == (REACHABLE.format(host=host, what="server") if beyond else None)
