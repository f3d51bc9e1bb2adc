"""The web page in a real headless Chromium: type a question, see the answer highlighted."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from serve_helpers import free_port, post, start_server, wait_ready

CHROMEDRIVER = "/usr/bin/chromedriver"
CONTEXT = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.\n"
    "It crosses the bay in three arches of grey granite."
)
QUESTION = "Who designed the Verrin Bay Bridge?"


@pytest.mark.slow
def test_the_page_highlights_the_answer(tiny_model_dir: Path, tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser = shutil.which("chromium")
    if browser is None or not Path(CHROMEDRIVER).is_file():
        pytest.skip("needs Debian's chromium and chromium-driver")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tiny_model_dir, port)
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = None
    try:
        wait_ready(base, server)
        _, expected = post(
            f"{base}/v1/answer", {"question": QUESTION, "context": CONTEXT, "top_k": 5}
        )
        driver = webdriver.Chrome(
            service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options
        )
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
