"""Pushing a run: staging, token handling, and the upload against a loopback stand-in Hub.

The stand-in implements only the routes huggingface_hub calls for create_repo, create_branch
and upload_folder (validate-yaml, preupload, LFS batch + PUT, commit). It listens on
127.0.0.1 only, so no test can reach the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import huggingface_hub
import pytest
import yaml
from huggingface_hub import constants as hf_constants
from huggingface_hub.utils import reset_sessions

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.publish.hub import push_run

TOKEN = "hf_TestTokenThatMustNeverLeak0123456789"
REPO_ID = "someone/minilm-squad"
MODEL_FILES = {
    "config.json": json.dumps({"model_type": "bert", "hidden_size": 8}),
    "tokenizer_config.json": json.dumps({"do_lower_case": True}),
    "special_tokens_map.json": json.dumps({"cls_token": "[CLS]"}),
    "tokenizer.json": json.dumps({"version": "1.0"}),
    "vocab.txt": "[PAD]\n[CLS]\n[SEP]\nthe\n",
}
WEIGHTS = bytes(range(256)) * 8  # stands in for tf_model.h5
EXPECTED_FILES = sorted(
    [
        "README.md",
        *MODEL_FILES,
        "tf_model.h5",
        "eval/metrics.json",
        "eval/predictions.json",
        "training/config.yaml",
        "training/metrics.json",
        "training/history.csv",
    ]
)


def make_run_dir(root: Path, *, with_eval: bool = True) -> Path:
    """A run directory as train (and evaluate) leave it, with tiny stand-in files."""
    run_dir = root / "outputs" / "run-1"
    model = run_dir / "model"
    model.mkdir(parents=True)
    for name, text in MODEL_FILES.items():
        (model / name).write_text(text, encoding="utf-8")
    (model / "tf_model.h5").write_bytes(WEIGHTS)
    (run_dir / "config.yaml").write_text(Config().to_yaml(), encoding="utf-8")
    metrics = {"exact_match": 70.0, "f1": 80.0, "eval_data": "dev.json", "epochs": 1, "steps": 10}
    (run_dir / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    (run_dir / "history.csv").write_text("epoch,step,loss\n1,10,1.5\n", encoding="utf-8")
    (run_dir / "env.json").write_text("{}", encoding="utf-8")
    # Never pushed: resumable training state and cached features.
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "ckpt-1.index").write_bytes(b"state")
    (run_dir / "features" / "abc123" / "train").mkdir(parents=True)
    (run_dir / "features" / "abc123" / "train" / "data.arrow").write_bytes(b"arrow")
    if with_eval:
        (run_dir / "eval").mkdir()
        eval_metrics = {"exact_match": 72.5, "f1": 81.0, "total": 10, "data": "dev.json"}
        (run_dir / "eval" / "metrics.json").write_text(json.dumps(eval_metrics), encoding="utf-8")
        (run_dir / "eval" / "predictions.json").write_text("{}", encoding="utf-8")
    return run_dir


def snapshot(directory: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``directory`` with its size, mtime and digest."""
    return {
        p.relative_to(directory).as_posix(): (
            p.stat().st_size,
            p.stat().st_mtime_ns,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in directory.rglob("*")
        if p.is_file()
    }


def all_text_under(directory: Path) -> str:
    return "\n".join(p.read_bytes().decode("latin-1") for p in directory.rglob("*") if p.is_file())


# --- the stand-in Hub ------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeHub:
    """Routes, recorded requests and per-route failures of the stand-in Hub."""

    endpoint: str = ""
    requests: list[Recorded] = field(default_factory=list)
    # route name -> (status, JSON body) to answer instead of the normal response.
    failures: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)

    def calls(self, route: str) -> list[Recorded]:
        return [r for r in self.requests if _route(r.method, r.path)[0] == route]


def _route(method: str, path: str) -> tuple[str, list[str]]:
    """(route name, path parts) for a request path without its query."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if method == "POST" and path == "/api/repos/create":
        return "create", parts
    if method == "POST" and path == "/api/validate-yaml":
        return "validate-yaml", parts
    if method == "POST" and path.endswith(".git/info/lfs/objects/batch"):
        return "lfs-batch", parts
    if method == "PUT" and parts[0] == "lfs-upload":
        return "lfs-put", parts
    if parts[:2] == ["api", "models"] and len(parts) >= 6:
        # /api/models/{namespace}/{name}/{action}/{revision}
        return f"{method.lower()}-{parts[4]}", parts
    if method == "GET" and parts[:2] == ["api", "models"]:
        return "repo-info", parts
    return "unknown", parts


def _make_handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", ""):
                data = b""
                while True:
                    size = int(self.rfile.readline().strip(), 16)
                    chunk = self.rfile.read(size)
                    self.rfile.readline()
                    if size == 0:
                        return data
                    data += chunk
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _reply(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if status >= 400 and isinstance(payload, dict) and "error" in payload:
                self.send_header("X-Error-Message", payload["error"])
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            split = urlsplit(self.path)
            body = self._body()
            headers = {key.lower(): value for key, value in self.headers.items()}
            hub.requests.append(Recorded(self.command, split.path, headers, body))
            route, parts = _route(self.command, split.path)
            if route in hub.failures:
                self._reply(*hub.failures[route])
            elif route == "create":
                request = json.loads(body)
                self._reply(
                    200, {"url": f"{hub.endpoint}/{request['organization']}/{request['name']}"}
                )
            elif route == "validate-yaml":
                self._reply(200, {"errors": [], "warnings": []})
            elif route == "post-preupload":
                # Binary weights go through LFS, text as regular git blobs, as on the Hub.
                files = [
                    {
                        "path": f["path"],
                        "uploadMode": "lfs" if f["path"].endswith(".h5") else "regular",
                        "shouldIgnore": False,
                    }
                    for f in json.loads(body)["files"]
                ]
                self._reply(200, {"files": files})
            elif route == "lfs-batch":
                objects = [
                    {
                        "oid": o["oid"],
                        "size": o["size"],
                        "actions": {"upload": {"href": f"{hub.endpoint}/lfs-upload/{o['oid']}"}},
                    }
                    for o in json.loads(body)["objects"]
                ]
                self._reply(200, {"transfer": "basic", "objects": objects})
            elif route == "lfs-put":
                hub.lfs_objects[parts[1]] = body
                self._reply(200, {})
            elif route == "post-branch":
                self._reply(200, {})
            elif route == "post-commit":
                commit_url = f"{hub.endpoint}/{parts[2]}/{parts[3]}/commit/{'a' * 40}"
                self._reply(200, {"commitUrl": commit_url, "commitOid": "a" * 40})
            else:
                self._reply(404, {"error": "Repository not found"})

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


@pytest.fixture(autouse=True)
def isolated_hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No token, cached login or proxy from the machine running the tests."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))


def set_offline(monkeypatch: pytest.MonkeyPatch, offline: bool) -> None:
    """Switch huggingface_hub's offline mode for one test.

    conftest sets HF_HUB_OFFLINE, which huggingface_hub reads once at import and bakes into the
    per-thread HTTP sessions it caches: patch the constant and drop the cached sessions, then
    drop them again afterwards so that later tests get offline sessions back.
    """
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", offline)
    reset_sessions()


@pytest.fixture()
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    set_offline(monkeypatch, False)
    yield
    reset_sessions()


@pytest.fixture()
def fake_hub(monkeypatch: pytest.MonkeyPatch, online: None) -> Iterator[FakeHub]:
    hub = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(hub))
    hub.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll interval keeps shutdown (and so each test's teardown) fast.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    # push_run reads HF_ENDPOINT per call; huggingface_hub read it once at import, and parses
    # commit URLs against that value.
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setattr(hf_constants, "ENDPOINT", hub.endpoint)
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- staging and validation --------------------------------------------------------------


def test_dry_run_stages_exactly_the_upload_folder(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    before = snapshot(run_dir)
    staging = tmp_path / "staging"

    result = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=staging)

    assert result.url is None
    assert result.staging_dir == staging
    assert result.files == EXPECTED_FILES
    # Beside the upload files, only the marker that lets a later dry run replace the folder.
    assert sorted(snapshot(staging)) == sorted([*EXPECTED_FILES, ".qa-finetune-staging"])
    assert (staging / "tf_model.h5").read_bytes() == WEIGHTS
    assert (staging / "README.md").read_text(encoding="utf-8") == result.card
    assert not any(f.startswith(("checkpoints", "features", "model/")) for f in result.files)
    assert snapshot(run_dir) == before


def test_complete_exports_are_uploaded_with_public_settings(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    onnx = run_dir / "onnx"
    onnx.mkdir()
    (onnx / "model.onnx").write_bytes(b"onnx-graph")
    (onnx / "model.int8.onnx").write_bytes(b"int8-graph")
    settings = {"format": "onnx", "source": str(run_dir / "model"), "max_length": 384}
    (onnx / "qa_config.json").write_text(json.dumps(settings), encoding="utf-8")
    # An export interrupted before its qa_config.json (or a stray folder) stays home.
    (run_dir / "savedmodel").mkdir()
    (run_dir / "savedmodel" / "saved_model.pb").write_bytes(b"partial")

    result = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=tmp_path / "staging")

    exported = [f for f in result.files if f.startswith(("onnx/", "savedmodel/"))]
    assert exported == ["onnx/model.int8.onnx", "onnx/model.onnx", "onnx/qa_config.json"]
    assert (tmp_path / "staging" / "onnx" / "model.onnx").read_bytes() == b"onnx-graph"
    staged = json.loads((tmp_path / "staging" / "onnx" / "qa_config.json").read_text())
    assert staged == {**settings, "source": "model"}
    assert "`onnx/` holds `model.onnx`" in result.card
    assert "`model.int8.onnx` (int8 weights)" in result.card
    assert "savedmodel/" not in result.card  # the incomplete export is neither sent nor named


def test_dry_run_card_uses_eval_metrics(tmp_path: Path) -> None:
    result = push_run(make_run_dir(tmp_path), REPO_ID, dry_run=True, staging_dir=tmp_path / "s")
    front = yaml.safe_load(result.card.split("---\n")[1])
    metrics = front["model-index"][0]["results"][0]["metrics"]
    assert {m["type"]: m["value"] for m in metrics} == {"exact_match": 72.5, "f1": 81.0}


def test_dry_run_without_eval_or_staging_dir(tmp_path: Path) -> None:
    result = push_run(make_run_dir(tmp_path, with_eval=False), REPO_ID, dry_run=True)
    try:
        assert not any(f.startswith("eval/") for f in result.files)
        assert result.staging_dir.is_dir()  # a dry run keeps its temporary folder
    finally:
        shutil.rmtree(result.staging_dir)


def test_dry_run_needs_no_token_and_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run must not look up a token or talk to the Hub")

    monkeypatch.setattr(huggingface_hub, "get_token", forbidden)
    monkeypatch.setattr(huggingface_hub, "HfApi", forbidden)
    result = push_run(make_run_dir(tmp_path), REPO_ID, dry_run=True, staging_dir=tmp_path / "s")
    assert result.files == EXPECTED_FILES


@pytest.mark.parametrize("missing", ["model", "model/config.json", "model/tf_model.h5"])
def test_run_without_model_is_an_error(tmp_path: Path, missing: str) -> None:
    run_dir = make_run_dir(tmp_path)
    target = run_dir / missing
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    with pytest.raises(QAFinetuneError, match="qa-finetune train"):
        push_run(run_dir, REPO_ID, dry_run=True, staging_dir=tmp_path / "s")


def test_safetensors_weights_are_accepted(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    (run_dir / "model" / "tf_model.h5").rename(run_dir / "model" / "model.safetensors")
    result = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=tmp_path / "s")
    assert "model.safetensors" in result.files


def test_run_without_tokenizer_is_an_error(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (run_dir / "model" / name).unlink()
    with pytest.raises(QAFinetuneError, match="tokenizer"):
        push_run(run_dir, REPO_ID, dry_run=True, staging_dir=tmp_path / "s")


@pytest.mark.parametrize(
    "repo_id", ["no-namespace", "a/b/c", "someone/", "/name", "some one/x", "me/-x", "me/a..b"]
)
def test_invalid_repo_id_is_an_error(tmp_path: Path, repo_id: str) -> None:
    with pytest.raises(QAFinetuneError, match="invalid repo id"):
        push_run(make_run_dir(tmp_path), repo_id, dry_run=True, staging_dir=tmp_path / "s")


def test_non_empty_staging_dir_is_an_error(tmp_path: Path) -> None:
    staging = tmp_path / "s"
    staging.mkdir()
    (staging / "keep.txt").write_text("mine")
    with pytest.raises(QAFinetuneError, match="not empty"):
        push_run(make_run_dir(tmp_path), REPO_ID, dry_run=True, staging_dir=staging)
    assert (staging / "keep.txt").read_text() == "mine"


def test_second_dry_run_replaces_its_own_staging(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    staging = tmp_path / "s"
    push_run(run_dir, REPO_ID, dry_run=True, staging_dir=staging)
    (run_dir / "eval" / "predictions.json").unlink()
    result = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=staging)
    assert sorted(snapshot(staging)) == sorted([*result.files, ".qa-finetune-staging"])
    assert "eval/predictions.json" not in result.files


def test_no_token_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(QAFinetuneError, match=r"no Hugging Face token.*HF_TOKEN"):
        push_run(make_run_dir(tmp_path), REPO_ID)


# --- the real upload path, against the stand-in --------------------------------------------


def test_push_creates_repo_and_commits_staged_files_once(
    tmp_path: Path, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    run_dir = make_run_dir(tmp_path)
    before = snapshot(run_dir)

    result = push_run(run_dir, REPO_ID, private=True, commit_message="first model")

    assert result.url == f"{fake_hub.endpoint}/{REPO_ID}"
    assert result.commit_url == f"{fake_hub.endpoint}/{REPO_ID}/commit/{'a' * 40}"
    assert result.files == EXPECTED_FILES
    assert not result.staging_dir.exists()  # the temporary staging folder is cleaned up
    assert snapshot(run_dir) == before

    (create,) = fake_hub.calls("create")
    assert create.json() == {
        "name": "minilm-squad",
        "organization": "someone",
        "private": True,
        "type": "model",
    }
    assert create.headers["authorization"] == f"Bearer {TOKEN}"
    assert not fake_hub.calls("post-branch")

    (commit,) = fake_hub.calls("post-commit")
    assert commit.path == f"/api/models/{REPO_ID}/commit/main"
    assert commit.headers["authorization"] == f"Bearer {TOKEN}"
    lines = [json.loads(line) for line in commit.body.decode().splitlines()]
    header = next(line["value"] for line in lines if line["key"] == "header")
    assert header["summary"] == "first model"
    regular = {line["value"]["path"]: line["value"] for line in lines if line["key"] == "file"}
    lfs = {line["value"]["path"]: line["value"] for line in lines if line["key"] == "lfsFile"}
    assert sorted([*regular, *lfs]) == EXPECTED_FILES
    assert base64.b64decode(regular["README.md"]["content"]).decode() == result.card
    # The weights went through LFS: the commit names the object that was PUT.
    oid = hashlib.sha256(WEIGHTS).hexdigest()
    assert lfs["tf_model.h5"]["oid"] == oid
    assert fake_hub.lfs_objects[oid] == WEIGHTS


def test_push_to_a_branch_creates_it(
    tmp_path: Path, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = push_run(make_run_dir(tmp_path), REPO_ID, revision="experiment-1", token=TOKEN)

    assert result.url == f"{fake_hub.endpoint}/{REPO_ID}/tree/experiment-1"
    (branch,) = fake_hub.calls("post-branch")
    assert branch.path == f"/api/models/{REPO_ID}/branch/experiment-1"
    (commit,) = fake_hub.calls("post-commit")
    assert commit.path == f"/api/models/{REPO_ID}/commit/experiment-1"
    (create,) = fake_hub.calls("create")
    assert create.json()["private"] is False


def test_token_argument_wins_over_env(
    tmp_path: Path, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    push_run(make_run_dir(tmp_path), REPO_ID, token=TOKEN)
    assert fake_hub.calls("create")[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_cached_login_is_used_last(
    tmp_path: Path, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_cached_login")
    push_run(make_run_dir(tmp_path), REPO_ID)
    assert fake_hub.calls("create")[0].headers["authorization"] == "Bearer hf_cached_login"


@pytest.mark.parametrize(
    ("route", "status", "expected"),
    [
        ("create", 401, "rejected the token .401 unauthorised.*invalid or expired"),
        ("create", 403, "no write access to someone/minilm-squad .403.*your own namespace"),
        ("post-commit", 403, "no write access.*your own namespace"),
        ("post-preupload", 500, r"refused the push to someone/minilm-squad \(HTTP 500\)"),
    ],
)
def test_hub_errors_become_one_line_messages(
    tmp_path: Path, fake_hub: FakeHub, route: str, status: int, expected: str
) -> None:
    fake_hub.failures[route] = (status, {"error": "denied"})
    with pytest.raises(QAFinetuneError, match=expected) as info:
        push_run(make_run_dir(tmp_path), REPO_ID, token=TOKEN)
    assert "\n" not in str(info.value)
    assert TOKEN not in str(info.value)


def test_unreachable_hub_gives_the_network_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, online: None
) -> None:
    # A loopback port that was just free and is now closed: connection refused, fast.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    with pytest.raises(QAFinetuneError) as info:
        push_run(make_run_dir(tmp_path), REPO_ID, token=TOKEN)
    assert str(info.value) == (
        f"cannot reach the Hub at {endpoint}: check the network or use --dry-run"
    )


def test_offline_mode_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_offline(monkeypatch, True)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    try:
        with pytest.raises(QAFinetuneError, match=r"HF_HUB_OFFLINE is set.*--dry-run"):
            push_run(make_run_dir(tmp_path), REPO_ID, token=TOKEN)
    finally:
        reset_sessions()


def test_token_never_leaks(
    tmp_path: Path,
    fake_hub: FakeHub,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    run_dir = make_run_dir(tmp_path)

    dry = push_run(run_dir, REPO_ID, token=TOKEN, dry_run=True, staging_dir=tmp_path / "s")
    ok = push_run(run_dir, REPO_ID, token=TOKEN)
    # A server that echoes the credentials back in its error message.
    fake_hub.failures["post-commit"] = (500, {"error": f"bad request from Bearer {TOKEN}"})
    with pytest.raises(QAFinetuneError) as info:
        push_run(run_dir, REPO_ID, token=TOKEN)

    assert "***" in str(info.value)
    out, err = capfd.readouterr()
    texts = [repr(dry), repr(ok), str(info.value), out, err, caplog.text]
    texts += [all_text_under(tmp_path / "s"), all_text_under(run_dir)]
    assert all(TOKEN not in text for text in texts)
    assert info.value.__suppress_context__  # the traceback chain is not shown either


def test_push_modules_do_not_import_tensorflow() -> None:
    code = (
        "import sys, qa_finetune.publish.hub, qa_finetune.publish.model_card; "
        "sys.exit(any(m in sys.modules for m in ('tensorflow', 'transformers')))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_pasted_token_is_stripped_and_any_echoed_token_masked(
    tmp_path: Path, fake_hub: FakeHub
) -> None:
    run_dir = make_run_dir(tmp_path)
    other = "hf_SomeOtherTokenEchoedBack42"
    fake_hub.failures["post-commit"] = (500, {"error": f"bad {TOKEN} and {other}"})
    with pytest.raises(QAFinetuneError) as info:
        push_run(run_dir, REPO_ID, token=f"{TOKEN} \n")
    assert fake_hub.calls("create")[0].headers["authorization"] == f"Bearer {TOKEN}"
    message = str(info.value)
    assert TOKEN not in message and other not in message and "hf_" not in message


def test_cli_error_printer_masks_tokens_from_any_source(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from qa_finetune import cli

    def leaky(*args: object, **kwargs: object) -> None:
        raise QAFinetuneError(f"the server said: token {TOKEN} is bad")

    monkeypatch.setattr("qa_finetune.publish.hub.push_run", leaky)
    result = CliRunner().invoke(cli.app, ["push", str(Path("run")), "--repo-id", REPO_ID])
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: the server said: token *** is bad"


def test_staged_files_carry_no_local_paths(tmp_path: Path) -> None:
    """The card, training/config.yaml, training/metrics.json and eval/metrics.json name data
    by file name only, however the run was started."""
    run_dir = make_run_dir(tmp_path)
    home = str(Path.home())
    private = f"{home}/private/data"
    config = Config.from_dict(
        {
            "model": {"name_or_path": f"{home}/models/base"},
            "data": {
                "train_file": f"{private}/train.json,{tmp_path}/extra.json",
                "validation_file": f"{private}/dev.json",
            },
            "train": {"output_dir": str(tmp_path / "outputs")},
        }
    )
    (run_dir / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
    metrics = {
        "exact_match": 70.0,
        "f1": 80.0,
        "train_data": f"{private}/train.json,{tmp_path}/extra.json",
        "eval_data": f"{private}/train.json (held-out 10%)",
    }
    (run_dir / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    evaluated = {
        "exact_match": 1.0,
        "f1": 2.0,
        "data": f"{private}/dev.json",
        "model": str(run_dir),
        "output_dir": str(run_dir / "eval"),
    }
    (run_dir / "eval" / "metrics.json").write_text(json.dumps(evaluated), encoding="utf-8")

    staging = tmp_path / "s"
    result = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=staging)
    texts = {
        name: (staging / name).read_text(encoding="utf-8")
        for name in (
            "README.md",
            "training/config.yaml",
            "training/metrics.json",
            "eval/metrics.json",
        )
    }
    for name, text in texts.items():
        for secret in (home, str(tmp_path), "/private/"):
            assert secret not in text, (name, secret)
    assert result.card == texts["README.md"]
    staged_metrics = json.loads(texts["training/metrics.json"])
    assert staged_metrics["train_data"] == "train.json,extra.json"
    assert staged_metrics["eval_data"] == "train.json (held-out 10%)"
    staged_config = yaml.safe_load(texts["training/config.yaml"])
    assert staged_config["data"]["validation_file"] == "dev.json"
    assert staged_config["train"]["output_dir"] == "outputs"
    assert "| `data.train_file` | train.json,extra.json |" in texts["README.md"]


def test_pytorch_weights_are_pushed_beside_the_tf_weights(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    (run_dir / "model" / "model.safetensors").write_bytes(b"pt" * 64)
    result = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=tmp_path / "staging")
    assert {"tf_model.h5", "model.safetensors"} <= set(result.files)
    assert (tmp_path / "staging" / "model.safetensors").read_bytes() == b"pt" * 64
    assert result.card.index(f'model="{REPO_ID}")') < result.card.index('framework="tf"')
