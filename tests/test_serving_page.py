"""The web page: its script on a small fake DOM under Node (fast), and in a real headless
Chromium (slow): type a question, see the answer highlighted and scrolled to, see a failure
replace it with its one-line error."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from browser import chromium
from serve_helpers import free_port, post, start_server, wait_ready

CONTEXT = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.\n"
    "It crosses the bay in three arches of grey granite."
)
QUESTION = "Who designed the Verrin Bay Bridge?"
PAGE = Path(__file__).parents[1] / "qa_finetune" / "serving" / "web" / "index.html"
HARNESS = Path(__file__).parent / "page_harness.js"


def run_page_script(tmp_path: Path, scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Click Ask once per reply; the page's state after each (see page_harness.js)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node.js")
    (tmp_path / "scenario.json").write_text(json.dumps(scenario), encoding="utf-8")
    done = subprocess.run(
        [node, str(HARNESS), str(PAGE), str(tmp_path / "scenario.json")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout))


def test_the_page_scrolls_to_the_answer_and_a_failure_clears_it(tmp_path: Path) -> None:
    context = "x" * 40 + " Alma Stroud " + "y" * 40
    answers = [
        {"answer": "Alma Stroud", "score": 0.75, "start": 41, "end": 52},
        {"answer": "Alma", "score": 0.25, "start": 41, "end": 45},
    ]
    good = {"status": 200, "body": json.dumps({"answers": answers, "took_ms": 12.0})}
    scenario = {
        "context": context,
        "markTop": 5000,  # the answer 5000 px down a box 300 px high
        "replies": [
            good,
            {"status": 422, "body": json.dumps({"error": "question: must\nnot be empty"})},
            good,
            {"status": 502, "statusText": "Bad Gateway", "body": "<html>proxy error</html>"},
            good,
            {"network": True},
        ],
    }
    states = run_page_script(tmp_path, scenario)
    answered = {
        "display": "block",
        "highlighted": context,
        "mark": "Alma Stroud",
        # Centred in the box: 5000 - (300 - 20) / 2, with the box shown before it scrolled.
        "scrollTop": 4860,
        "boxScrolled": True,
        "shownWhenScrolled": "block",
        "others": 2,
        "answer": "Alma Stroud",
        "score": "0.750",
        "error": "",
    }
    cleared = {
        "display": "none",
        "highlighted": "",
        "mark": None,
        "others": 0,
        "answer": "",
        "score": "",
    }
    assert states[0] == answered
    errors = [
        "question: must not be empty",
        "HTTP 502 Bad Gateway",
        "cannot reach the server (Failed to fetch)",
    ]
    for state, error in zip(states[1::2], errors, strict=True):
        assert {key: state[key] for key in cleared} == cleared
        assert state["error"] == error
    assert states[2] == states[4] == answered  # the next answer shows again, error gone


# A document's name and text as an attacker might write them: they must stay text.
DOCUMENT = "docs/<img src=x onerror=alert(1)>.md"
PASSAGE = "🙂 The keeper <b>was</b> Tomas Ebbe, of Osk."


def document_answer(passage_start: int = 120) -> dict[str, Any]:
    start = PASSAGE.index("Tomas Ebbe")
    return {
        "answer": "Tomas Ebbe",
        "score": 0.8,
        "document": DOCUMENT,
        "start": passage_start + start,
        "end": passage_start + start + len("Tomas Ebbe"),
        "passage": 3,
        "passage_start": passage_start,
        "passage_end": passage_start + len(PASSAGE),
        "passage_text": PASSAGE,
        "retrieval_rank": 1,
        "retrieval_score": 2.5,
        "reader_score": 7.25,
    }


def test_with_an_index_an_empty_context_searches_the_documents(tmp_path: Path) -> None:
    item = document_answer()
    scenario = {
        "context": "",
        "markTop": 0,
        "model": {"index": {"name": "docs", "documents": 3, "passages": 9}},
        "replies": [
            {"status": 200, "body": json.dumps({"answers": [item], "took_ms": 3.0})},
            {"status": 200, "body": json.dumps({"answers": [], "took_ms": 2.0})},
        ],
    }
    found, nothing = run_page_script(tmp_path, scenario)
    assert found["sent"] == {"question": "Who?", "top_k": 2}  # no context: search
    assert found["label"] == "Context (optional: leave it empty to search 3 documents)"
    assert "leave this empty" in found["placeholder"]
    # The passage is shown, the answer marked at its code-point offset (after an emoji).
    assert found["highlighted"] == PASSAGE and found["mark"] == "Tomas Ebbe"
    assert found["markedAt"] == PASSAGE[: PASSAGE.index("Tomas Ebbe")]
    assert found["nodes"] == ["#text", "mark", "#text"]  # text nodes only: no markup made
    assert found["source"] == f"from {DOCUMENT}, chars {item['start']}-{item['end']}"
    assert found["answer"] == "Tomas Ebbe" and found["score"] == "0.800"
    assert nothing["answer"] == "no answer in these documents"
    assert nothing["display"] == "block" and nothing["highlighted"] == ""
    assert nothing["source"] == "" and nothing["others"] == 0 and nothing["mark"] is None


def test_with_an_index_a_given_context_is_sent_and_marked_as_before(tmp_path: Path) -> None:
    context = "x Alma Stroud y"
    answer = {"answer": "Alma Stroud", "score": 0.5, "start": 2, "end": 13}
    scenario = {
        "context": context,
        "markTop": 0,
        "model": {"index": {"name": "docs", "documents": None, "passages": 9}},
        "replies": [{"status": 200, "body": json.dumps({"answers": [answer], "took_ms": 1.0})}],
    }
    [state] = run_page_script(tmp_path, scenario)
    assert state["sent"] == {"question": "Who?", "top_k": 2, "context": context}
    assert state["label"] == "Context (optional: leave it empty to search the server's documents)"
    assert state["highlighted"] == context and state["mark"] == "Alma Stroud"
    assert state["source"] == ""


def test_the_page_shows_the_confidence_and_not_sure_apart_from_no_answer(tmp_path: Path) -> None:
    sure = {"answer": "Alma Stroud", "score": 0.75, "start": 2, "end": 13, "confidence": 0.344}
    unsure = {
        **sure,
        "answer": "",
        "start": 0,
        "end": 0,
        "not_sure": True,
        "best_candidate": {"answer": "Alma Stroud", "start": 2, "end": 13},
    }
    plain = {"answer": "", "score": 0.9, "start": 0, "end": 0}
    replies = [
        {"status": 200, "body": json.dumps({"answers": [item], "took_ms": 1.0})}
        for item in (sure, unsure, plain)
    ]
    states = run_page_script(
        tmp_path, {"context": "A Alma Stroud B", "markTop": 0, "replies": replies, "sure": True}
    )
    assert [(s["answer"], s["sure"]) for s in states] == [
        ("Alma Stroud", "confidence 34%"),
        ("(not sure)", 'not sure: confidence 34%, below the minimum; best candidate "Alma Stroud"'),
        ("(no answer)", "(uncalibrated)"),
    ]


def test_the_page_never_writes_markup_from_answers() -> None:
    """Documents are untrusted: the page builds what it shows from text nodes."""
    page = PAGE.read_text(encoding="utf-8")
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write", page)
    assert 'createElement("mark")' in page and "createTextNode(" in page
    assert "item.passage_text" in page and "item.document" in page


@pytest.mark.slow
def test_the_page_highlights_the_answer(tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tiny_model_dir, port)
    driver = None
    try:
        wait_ready(base, server)
        _, expected = post(
            f"{base}/v1/answer", {"question": QUESTION, "context": CONTEXT, "top_k": 5}
        )
        driver = chromium(tmp_path, width=1100)
        driver.get(f"{base}/")
        driver.find_element(By.ID, "context").send_keys(CONTEXT)
        driver.find_element(By.ID, "question").send_keys(QUESTION)
        driver.find_element(By.ID, "ask").click()
        mark = WebDriverWait(driver, 60).until(
            expected_conditions.presence_of_element_located((By.ID, "answer-mark"))
        )
        best = expected["answers"][0]
        assert mark.text == CONTEXT[best["start"] : best["end"]] == best["answer"]
        # The marked text sits exactly at the answer's offsets in the shown context.
        shown = driver.find_element(By.ID, "highlighted").get_attribute("textContent")
        assert shown == CONTEXT
        before = driver.execute_script(
            "return document.getElementById('answer-mark').previousSibling.textContent"
        )
        assert before == CONTEXT[: best["start"]]
        assert driver.find_element(By.ID, "score").text == f"{best['score']:.3f}"
        others = driver.find_elements(By.CSS_SELECTOR, "#others li")
        assert len(others) == len(expected["answers"]) == 5
        driver.save_screenshot(str(tmp_path / "page.png"))
        (tmp_path / "expected.json").write_text(json.dumps(expected, indent=1))
        assert (tmp_path / "page.png").stat().st_size > 0
        # The API docs render offline too (Swagger UI served by the app, not a CDN).
        driver.get(f"{base}/docs")
        path = WebDriverWait(driver, 60).until(
            expected_conditions.presence_of_element_located(
                (By.CSS_SELECTOR, '.opblock-summary-path[data-path="/v1/answer:batch"]')
            )
        )
        assert path.text.replace("\u200b", "") == "/v1/answer:batch"
        driver.save_screenshot(str(tmp_path / "docs.png"))
    finally:
        if driver is not None:
            driver.quit()
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0


# Blank lines carry no tokens: every candidate answer lies in the text at the bottom.
LONG_CONTEXT = "\n" * 300 + CONTEXT
# Where the mark is drawn, against its scrolling box and the window.
GEOMETRY = """
const box = document.getElementById('highlighted').getBoundingClientRect();
const mark = document.getElementById('answer-mark').getBoundingClientRect();
return {scrollTop: document.getElementById('highlighted').scrollTop,
        markTop: mark.top, markBottom: mark.bottom, boxTop: box.top, boxBottom: box.bottom,
        windowHeight: window.innerHeight};
"""


@pytest.mark.slow
def test_the_page_scrolls_to_the_answer_and_clears_it_on_failure(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tiny_model_dir, port)
    driver = None
    try:
        wait_ready(base, server)
        _, expected = post(f"{base}/v1/answer", {"question": QUESTION, "context": LONG_CONTEXT})
        best = expected["answers"][0]
        assert best["start"] >= 300  # in the text below the blank lines
        driver = chromium(tmp_path, width=1100)
        driver.get(f"{base}/")
        set_value = "document.getElementById(arguments[0]).value = arguments[1]"
        driver.execute_script(set_value, "context", LONG_CONTEXT)
        driver.execute_script(set_value, "question", QUESTION)
        driver.find_element(By.ID, "ask").click()
        mark = WebDriverWait(driver, 60).until(
            expected_conditions.presence_of_element_located((By.ID, "answer-mark"))
        )
        assert mark.get_attribute("textContent") == best["answer"]
        seen = driver.execute_script(GEOMETRY)
        assert seen["scrollTop"] > 0
        assert seen["boxTop"] <= seen["markTop"] < seen["markBottom"] <= seen["boxBottom"]
        # The box in the window (to the pixel: positions are fractional, innerHeight is not).
        assert seen["boxTop"] >= 0 and seen["boxBottom"] <= seen["windowHeight"] + 1
        driver.save_screenshot(str(tmp_path / "scrolled.png"))
        # A failing request: the earlier answer and its highlight go, its error shows.
        driver.execute_script(set_value, "question", "   ")
        driver.find_element(By.ID, "ask").click()
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "error").text != "")
        assert (
            driver.find_element(By.ID, "error").text == "question: Value error, must not be empty"
        )
        assert not driver.find_element(By.ID, "result").is_displayed()
        assert driver.find_elements(By.ID, "answer-mark") == []
        assert driver.find_elements(By.CSS_SELECTOR, "#others li") == []
        assert driver.find_element(By.ID, "answer").get_attribute("textContent") == ""
    finally:
        if driver is not None:
            driver.quit()
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0
