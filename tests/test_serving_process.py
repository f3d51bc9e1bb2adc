"""`qa-finetune serve` as a real process: startup errors, answering, SIGTERM with work in flight."""

from __future__ import annotations

import json
import re
import signal
import socket
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import free_port, get, post, start_server, wait_ready
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.modeling.cpu_threads import usable_cores

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
QUESTION = "Who designed the Verrin Bay Bridge?"


# Among the slowest of the fast suite (a tiny model trained or served end to end): make test-slow.
@pytest.mark.slow
def test_sigterm_finishes_the_request_in_flight_then_exits_0(tiny_model_dir: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # A long batching wait keeps a request in flight while the signal arrives.
    process = start_server(tiny_model_dir, port, "--max-wait-ms", "1500", "--max-batch", "64")
    try:
        wait_ready(base, process)
        status, body = post(f"{base}/v1/answer", {"question": QUESTION, "context": CONTEXT})
        assert status == 200
        best = body["answers"][0]
        assert CONTEXT[best["start"] : best["end"]] == best["answer"]

        result: dict[str, Any] = {}
        payload = {"question": QUESTION, "context": CONTEXT, "top_k": 2}
        thread = threading.Thread(
            target=lambda: result.update(r=post(f"{base}/v1/answer", payload))
        )
        thread.start()
        deadline = time.monotonic() + 30
        while not re.search(r"^qa_queue_depth 1\.0$", get(f"{base}/metrics")[1], re.M):
            assert time.monotonic() < deadline, "the request never reached the queue"
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        thread.join(60)
        assert result["r"][0] == 200
        assert result["r"][1]["answers"][0]["answer"] == best["answer"]
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, output
        assert "Finished server process" in output
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_the_server_says_ready_and_logs_each_request_once(tiny_model_dir: Path) -> None:
    """What a deployer sees: a Ready line with the URL, one access line per request with its
    id, the id echoed, no 404 for the browser's favicon request."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start_server(tiny_model_dir, port, "--access-log", "--passes", "2")
    try:
        wait_ready(base, process)
        request = urllib.request.Request(
            f"{base}/v1/answer",
            json.dumps({"question": QUESTION, "context": CONTEXT}).encode(),
            {"Content-Type": "application/json", "X-Request-ID": "deploy-check-1"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.headers["X-Request-ID"] == "deploy-check-1"
            assert json.loads(response.read())["request_id"] == "deploy-check-1"
        assert get(f"{base}/favicon.ico") == (204, "")
        model = json.loads(get(f"{base}/v1/model")[1])
        assert (model["model"], model["backend"]) == (tiny_model_dir.name, "tf")
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    lines = output.splitlines()
    ready = [n for n, line in enumerate(lines) if "Ready:" in line]
    assert len(ready) == 1, output
    assert re.fullmatch(
        rf"INFO: +Ready: {re.escape(base)} \(model {re.escape(tiny_model_dir.name)}, backend tf\)",
        lines[ready[0]],
    )
    threads = max(1, usable_cores() // 2)
    assert re.search(
        rf"serving with --max-batch \d+, --passes 2 \({threads} threads? each\)", output
    ), output
    listening = next(n for n, line in enumerate(lines) if "Uvicorn running on" in line)
    assert listening < ready[0]
    answered = [line for line in lines if "deploy-check-1" in line]
    assert len(answered) == 1, output
    assert re.fullmatch(
        r'INFO: +127\.0\.0\.1:\d+ "POST /v1/answer" 200 \d+\.\d ms request_id=deploy-check-1',
        answered[0],
    )
    assert len([line for line in lines if '"GET /favicon.ico" 204' in line]) == 1
    assert " 404 " not in output
    # uvicorn's own access lines are off: the app's are the only ones.
    assert '"POST /v1/answer HTTP/1.1"' not in output


def test_serve_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi now raises ImportError
    result = CliRunner().invoke(app, ["serve", "some-model"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: serve needs fastapi: install the serve extra with pip install 'qa-finetune[serve]'"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--backend", "gpu"], "--backend must be one of auto, tf, onnx, got 'gpu'"),
        (["--max-batch", "0"], "--max-batch must be 1 to 4096 windows, got 0"),
        (["--max-context-chars", "0"], "--max-context-chars must be at least 1, got 0"),
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        (["--passes", "0"], "--passes must be 1 to 64, got 0"),
        (["--port", "70000"], "--port must be 1 to 65535, got 70000"),
        (["--max-queue", "-1"], "--max-queue must be 0 (no bound) or more, got -1"),
        (
            ["--cors-origin", "http://localhost:3000", "--cors-origin", "localhost:3000"],
            "--cors-origin must be * or an origin such as https://app.example.com (scheme and "
            "host, optional port, no path), got 'localhost:3000'",
        ),
    ],
)
def test_bad_options_fail_before_the_model_loads(
    tiny_model_dir: Path, options: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["serve", str(tiny_model_dir), *options])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {message}"


def test_a_busy_port_fails_before_the_model_loads(tiny_model_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", str(tiny_model_dir), "--port", str(port)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: cannot listen on 127.0.0.1:{port} (Address already in use): "
        "pick another --port or --host"
    )


def test_a_missing_model_fails_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--port", str(free_port())])
    assert result.exit_code == 1
    assert result.output.strip().startswith(f"error: {tmp_path} holds no model (no config.json)")


@pytest.mark.slow
def test_two_workers_share_the_port_answer_alike_and_stop_on_sigterm(
    tiny_model_dir: Path,
) -> None:
    """`--workers 2`: two processes, each with its own model, behind one port."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start_server(tiny_model_dir, port, "--workers", "2")
    try:
        wait_ready(base, process)
        pids = set()
        deadline = time.monotonic() + 120
        # Each request opens a new connection; the kernel hands them to either worker.
        while len(pids) < 2 and time.monotonic() < deadline:
            status, text = get(f"{base}/healthz")
            assert status == 200
            pids.add(json.loads(text)["pid"])
        assert len(pids) == 2, "only one worker ever answered"
        assert process.pid not in pids  # the parent supervises; workers answer
        answers = set()
        for _ in range(12):
            status, body = post(f"{base}/v1/answer", {"question": QUESTION, "context": CONTEXT})
            assert status == 200
            best = body["answers"][0]
            assert CONTEXT[best["start"] : best["end"]] == best["answer"]
            answers.add((best["answer"], best["start"]))
        assert len(answers) == 1  # both workers load the same model and answer alike
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
        # Each worker says it is ready once its model is loaded (the parent listens already).
        ready = re.findall(
            rf"Ready: {re.escape(base)} \(model .+, backend tf\) \[worker (\d+)\]", output
        )
        assert {int(pid) for pid in ready} == pids
        # Worker processes run side by side already: each one pass, unless --passes says.
        assert len(re.findall(r"serving with --max-batch \d+, --passes 1 \(", output)) == 2
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
