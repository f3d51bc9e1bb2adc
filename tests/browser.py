"""Headless Chromium for the slow page tests, and a text selection made with real mouse
events (press, move, release), as a user drags across characters."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium(tmp_path: Path, width: int = 1200) -> Any:
    """A headless Chromium driver, ``width`` x 900 (skips the test without selenium or Debian's
    chromium)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    browser = shutil.which("chromium")
    if browser is None or not Path(CHROMEDRIVER).is_file():
        pytest.skip("needs Debian's chromium and chromium-driver")
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
        f"--window-size={width},900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(
        service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options
    )


def units(text: str, points: int) -> int:
    """A code-point offset of ``text`` as the browser counts it (UTF-16 units)."""
    return len(text[:points].encode("utf-16-le")) // 2


# The on-screen box of one character of a box's text: (left, right, middle y), viewport px.
CHARACTER_BOX = """
const [id, at] = arguments, box = document.getElementById(id);
const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
let node, seen = 0;
while ((node = walker.nextNode())) {
  if (at < seen + node.length) {
    const range = document.createRange();
    range.setStart(node, at - seen);
    range.setEnd(node, at - seen + 1);
    const r = range.getClientRects()[0];
    return [r.left, r.right, (r.top + r.bottom) / 2];
  }
  seen += node.length;
}
return null;
"""


def drag_select(driver: Any, box_id: str, text: str, start: int, end: int) -> None:
    """Select ``text[start:end]`` (code points) in element ``box_id`` by dragging the mouse
    from the first character's left edge to the last one's right edge."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, box_id)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    first = driver.execute_script(CHARACTER_BOX, box_id, units(text, start))
    last = driver.execute_script(CHARACTER_BOX, box_id, units(text, end) - 1)
    rect = driver.execute_script("return arguments[0].getBoundingClientRect().toJSON()", box)
    centre_x, centre_y = rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2
    # Selenium's offsets count from the element's centre.
    (
        ActionChains(driver)
        .move_to_element_with_offset(box, int(first[0] + 1 - centre_x), int(first[2] - centre_y))
        .click_and_hold()
        .move_to_element_with_offset(box, int(last[1] - 1 - centre_x), int(last[2] - centre_y))
        .release()
        .perform()
    )
