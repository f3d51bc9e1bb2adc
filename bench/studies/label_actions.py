"""User actions per saved question on the labeling page: by hand, and with the model's
proposals (accepted in one click when one is the intended answer, else corrected by hand).

    .venv/bin/python bench/studies/label_actions.py --data ../shared/data/squad-v1.1-dev.json \\
        --model outputs/minilm-31k-400steps --questions 30

A real article's paragraphs become the documents (one file each); its questions, with their
gold answers as the answers a person means, are labelled twice in headless Chromium, driven
with real keystrokes, clicks and mouse drags, into two outputs. Counts every action (a
script's clock is not a person's, so actions are the measure) and checks that both outputs
hold the intended answer text for every question. Prints a markdown table and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Run as a script from the repository root: `bench`, `qa_finetune` and the tests' browser
# helpers (headless Chromium, a mouse drag over characters) importable.
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser import chromium, drag_select  # noqa: E402
from serve_helpers import free_port, get  # noqa: E402

from bench._machine import machine_line  # noqa: E402


def article_questions(data: Path, wanted: int) -> tuple[list[str], list[tuple[int, str, str]]]:
    """The paragraphs of the first article with ``wanted`` answerable questions, and those
    questions as (paragraph, question, answer) in order."""
    for article in json.loads(data.read_text(encoding="utf-8"))["data"]:
        paragraphs, questions = [], []
        for paragraph in article["paragraphs"]:
            paragraphs.append(paragraph["context"])
            for qa in paragraph["qas"]:
                if qa["answers"] and len(questions) < wanted:
                    questions.append(
                        (len(paragraphs) - 1, qa["question"], qa["answers"][0]["text"])
                    )
            if len(questions) == wanted:
                return paragraphs, questions
    raise SystemExit(f"no article in {data} has {wanted} answerable questions")


def start_label(docs: Path, output: Path, port: int, model: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "qa_finetune.cli.app", "label", str(docs)]
    return subprocess.Popen(
        [*command, "--output", str(output), "--port", str(port), "--model", model],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def wait_for(condition: Any, seconds: float = 600) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            found = condition()
        except Exception:  # the page or the server is still starting
            found = None
        if found:
            return found
        time.sleep(0.1)
    raise SystemExit("the labeling page did not respond in time")


def saved_count(driver: Any) -> int:
    return int(driver.execute_script("return document.querySelectorAll('#questions li').length"))


def open_document(driver: Any, number: int, text: str, actions: Counter) -> None:
    """Click the document's entry in the list (one click) and wait for its text."""
    from selenium.webdriver.common.by import By

    entries = driver.find_elements(By.CSS_SELECTOR, "#documents li")
    (entries[number].find_elements(By.TAG_NAME, "button") or [entries[number]])[0].click()
    actions["clicks"] += 1
    wait_for(lambda: driver.find_element(By.ID, "doc").get_attribute("textContent") == text)


def by_hand(driver: Any, text: str, answer: str, actions: Counter) -> None:
    """Drag over the answer's first occurrence, then Save."""
    from selenium.webdriver.common.by import By

    start = text.index(answer)
    drag_select(driver, "doc", text, start, start + len(answer))
    actions["drags"] += 1
    before = saved_count(driver)
    driver.find_element(By.ID, "save").click()
    actions["clicks"] += 1
    wait_for(lambda: saved_count(driver) == before + 1)


def with_proposals(driver: Any, text: str, answer: str, actions: Counter) -> bool:
    """Ask for proposals; accept the intended one in a click, else label by hand. True when a
    proposal was accepted."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "propose").click()
    actions["clicks"] += 1
    rows = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#proposals li"))
    for row in rows:
        shown = " ".join(row.text.split())
        if shown.startswith(" ".join(answer.split()) + " (score "):
            before = saved_count(driver)
            row.find_element(By.CSS_SELECTOR, ".accept").click()
            actions["clicks"] += 1
            wait_for(lambda before=before: saved_count(driver) == before + 1)
            return True
    by_hand(driver, text, answer, actions)
    return False


def label_all(
    driver: Any, base: str, paragraphs: list[str], questions: list[tuple[int, str, str]], mode: str
) -> tuple[Counter, int]:
    from selenium.webdriver.common.by import By

    actions: Counter = Counter()
    accepted, current = 0, -1
    driver.get(f"{base}/")
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#documents li"))
    for number, question, answer in questions:
        if number != current:
            open_document(driver, number, paragraphs[number], actions)
            current = number
        driver.find_element(By.ID, "question").send_keys(question)
        actions["keystrokes"] += len(question)
        if mode == "proposals":
            accepted += with_proposals(driver, paragraphs[number], answer, actions)
        else:
            by_hand(driver, paragraphs[number], answer, actions)
    return actions, accepted


def check_output(output: Path, questions: list[tuple[int, str, str]]) -> None:
    payload = json.loads(output.read_text(encoding="utf-8"))
    saved = {
        qa["question"]: (qa["answers"][0]["text"], qa["answers"][0]["answer_start"], p["context"])
        for article in payload["data"]
        for p in article["paragraphs"]
        for qa in p["qas"]
    }
    for _, question, answer in questions:
        text, start, context = saved[question]
        assert text == answer and context[start : start + len(text)] == text, question


def run(args: argparse.Namespace, work: Path) -> None:
    paragraphs, questions = article_questions(args.data, args.questions)
    docs = work / "docs"
    docs.mkdir()
    for number, text in enumerate(paragraphs):
        (docs / f"paragraph-{number:02d}.txt").write_text(text, encoding="utf-8")
    rows = []
    for mode in ("hand", "proposals"):
        output, port = work / f"{mode}.json", free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_label(docs, output, port, args.model)
        driver = chromium(work / mode)
        try:
            wait_for(lambda base=base: get(f"{base}/api/documents")[0] == 200)
            started = time.perf_counter()
            actions, accepted = label_all(driver, base, paragraphs, questions, mode)
            seconds = time.perf_counter() - started
        finally:
            driver.quit()
            server.terminate()
            server.wait(timeout=60)
        check_output(output, questions)
        rows.append((mode, actions, accepted, seconds))
    count = len(questions)
    print(f"{count} questions on {len(paragraphs)} paragraphs of one article ({args.data.name})\n")
    print(
        "| mode | keystrokes | clicks | mouse drags | pointer actions per question "
        "| proposals accepted | script seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, actions, accepted, seconds in rows:
        pointer = (actions["clicks"] + actions["drags"]) / count
        shown = f"{accepted} / {count}" if mode == "proposals" else "-"
        print(
            f"| {mode} | {actions['keystrokes']} | {actions['clicks']} | {actions['drags']} | "
            f"{pointer:.2f} | {shown} | {seconds:.0f} |"
        )
    print(f"\n{machine_line()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="SQuAD JSON with a real article")
    parser.add_argument("--model", required=True, help="run whose proposals the page shows")
    parser.add_argument("--questions", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="label-actions-") as work:
        run(args, Path(work))


if __name__ == "__main__":
    main()
