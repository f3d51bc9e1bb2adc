"""The labeling page in a real headless Chromium: pick a document, type a question, select
the answer with the mouse, save; reload; mark a question unanswerable; kill the server and
start it again (with a model): everything saved is there, and a proposal is one click."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, drag_select
from serve_helpers import free_port, get

import qa_finetune

DOCUMENT = (
    'Notes 🚀 on <script>window.pwned = 1</script> and <img src=x onerror="window.pwned = 2">.'
    "\r\nThe lighthouse keeper was Ann Loe, café owner.\r\nEnd."
)
OTHER = "Nothing here but 東京.\n"


def start_label(docs: Path, output: Path, port: int, *options: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(qa_finetune.__file__).parents[1])}
    command = [sys.executable, "-m", "qa_finetune.cli.app", "label", str(docs)]
    return subprocess.Popen(
        [*command, "--output", str(output), "--port", str(port), *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_up(base: str, process: subprocess.Popen[str], seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        try:
            if get(f"{base}/api/documents")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("the labeling page did not start")


def _wait(driver: Any, condition: Any, seconds: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds).until(condition)


def _questions(driver: Any) -> list[str]:
    # Read in one script: the list is rebuilt after each save, so element handles go stale.
    script = "return [...document.querySelectorAll('#questions li')].map((li) => li.innerText)"
    return [" ".join(text.split()) for text in driver.execute_script(script)]


def _open_first(driver: Any, base: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/")
    _wait(driver, lambda d: d.find_element(By.ID, "doc").get_attribute("textContent") == DOCUMENT)


def _saved(output: Path) -> list[tuple[str, list[dict[str, Any]], str]]:
    payload = json.loads(output.read_bytes())
    return [
        (qa["question"], qa["answers"], paragraph["context"])
        for article in payload["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def _label_by_hand(driver: Any, question: str, answer: str, screenshot: Path | None = None) -> None:
    from selenium.webdriver.common.by import By

    start = DOCUMENT.index(answer)
    driver.find_element(By.ID, "question").send_keys(question)
    drag_select(driver, "doc", DOCUMENT, start, start + len(answer))
    # The page hears of the selection on its next "selectionchange" event, not at once.
    wanted = f"«{answer}» at character {start}"
    _wait(driver, lambda d: d.find_element(By.ID, "selection").text == wanted)
    assert driver.find_element(By.ID, "selection").text == wanted
    count = len(_questions(driver))
    if screenshot:
        driver.save_screenshot(str(screenshot))
    driver.find_element(By.ID, "save").click()
    _wait(driver, lambda d: len(_questions(d)) == count + 1)


@pytest.mark.slow
def test_label_by_mouse_survive_a_kill_and_accept_a_proposal(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from selenium.webdriver.common.by import By

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_bytes(DOCUMENT.encode())
    (docs / "b.txt").write_bytes(OTHER.encode())
    output = tmp_path / "out.json"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_label(docs, output, port)
    driver = chromium(tmp_path)
    try:
        wait_up(base, server)
        _open_first(driver, base)
        # The document's markup is text: no element made, no script run.
        assert driver.execute_script("return window.pwned === undefined")
        assert driver.find_elements(By.CSS_SELECTOR, "#doc img, #doc script") == []
        _label_by_hand(driver, "Who kept the lighthouse?", "Ann Loe")
        driver.refresh()
        _wait(driver, lambda d: _questions(d) == ["Who kept the lighthouse? Ann Loe Edit Delete"])
        driver.find_element(By.ID, "question").send_keys("Who painted it?")
        driver.find_element(By.ID, "unanswerable").click()
        _wait(driver, lambda d: len(_questions(d)) == 2)
        screenshot = tmp_path / "label-page.png"  # taken with the span selected, before saving
        _label_by_hand(driver, "What else was Ann Loe?", "café owner", screenshot)
        assert (
            "3 questions, 1 unanswerable; 1 of 2 documents"
            in driver.find_element(By.ID, "counts").text
        )
        server.send_signal(signal.SIGKILL)  # no clean shutdown: the journal must hold it all
        server.wait(timeout=30)
        assert [(q, a) for q, a, _ in _saved(output)] == [
            ("Who kept the lighthouse?", [{"text": "Ann Loe", "answer_start": 116}]),
            ("Who painted it?", []),
            ("What else was Ann Loe?", [{"text": "café owner", "answer_start": 125}]),
        ]
        server = start_label(docs, output, port, "--model", str(tiny_model_dir))
        wait_up(base, server)
        _open_first(driver, base)
        assert _questions(driver) == [
            "Who kept the lighthouse? Ann Loe Edit Delete",
            "Who painted it? (unanswerable) Edit Delete",
            "What else was Ann Loe? café owner Edit Delete",
        ]
        driver.find_element(By.ID, "question").send_keys("Who owned the café?")
        driver.find_element(By.ID, "propose").click()
        accept = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#proposals .accept"))
        proposed = " ".join(driver.find_element(By.CSS_SELECTOR, "#proposals li").text.split())
        accept[0].click()
        _wait(driver, lambda d: len(_questions(d)) == 4)
    finally:
        driver.quit()
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0
    saved = _saved(output)
    assert [q for q, _, _ in saved] == [
        "Who kept the lighthouse?",
        "Who painted it?",
        "What else was Ann Loe?",
        "Who owned the café?",
    ]
    _, (answer,), context = saved[3]
    assert context == DOCUMENT  # CRLF kept
    assert proposed.startswith(" ".join(answer["text"].split()) + " (score ")
    start = answer["answer_start"]
    assert context[start : start + len(answer["text"])] == answer["text"]
