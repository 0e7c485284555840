"""The report in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by Selenium) opens report.html from a local HTTP server and sees its tables, pictures and
trajectory viewer work. Chromium runs with the flags that keep it off the network."""

from __future__ import annotations

import functools
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs headless Chromium: apt-get install chromium chromium-driver (.ci/run installs them)")

FLAGS = [
    "--headless=new", "--no-sandbox", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    # Running as root in a container: no setuid sandbox (above), no GPU, /dev/shm may be tiny.
    "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-default-apps", "--disable-extensions", "--no-default-browser-check", "--metrics-recording-only",
    "--window-size=1280,2000",
]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture()
def served_run(small_run):
    """The small run's directory over HTTP on 127.0.0.1 (a free port); yields its base URL."""
    handler = functools.partial(_Quiet, directory=str(small_run))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    # Selenium Manager would look for a driver online; name the installed one.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_report_renders_and_its_trajectory_viewer_expands(browser, served_run, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(f"{served_run}/report.html")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert browser.title.startswith("websailor-gym run")

    # Tables: the results (one row per policy), the synthesis statistics, the configuration.
    for cls, at_least in (("results", 4), ("synthesis", 4), ("config", 5), ("stages", 7)):
        rows = browser.find_elements(By.CSS_SELECTOR, f"table.{cls} tbody tr")
        assert len(rows) >= at_least, cls
        assert rows[0].is_displayed(), cls
    policies = [r.find_element(By.TAG_NAME, "td").text
                for r in browser.find_elements(By.CSS_SELECTOR, "table.results tbody tr")]
    assert sorted(policies) == ["fewshot", "grpo", "grpo-greedy", "heuristic", "random", "sft", "sft-greedy"]

    # Every picture decoded (naturalWidth > 0); the ones outside the viewer are on screen.
    images = browser.find_elements(By.TAG_NAME, "img")
    assert len(images) >= 4
    for img in images:
        WebDriverWait(browser, 10).until(lambda d, i=img: d.execute_script("return arguments[0].complete", i))
        assert browser.execute_script("return arguments[0].naturalWidth", img) > 0
    curves = [i for i in images if "learning curves" in (i.get_attribute("alt") or "")]
    assert curves and all(i.is_displayed() for i in curves)

    # The viewer: one trajectory shown at a time; pick another, expand its first step.
    picker = Select(browser.find_element(By.ID, "task-picker"))
    assert len(picker.options) >= 4  # 2 held-out tasks x 4 policies
    assert len([s for s in browser.find_elements(By.CSS_SELECTOR, "section.traj") if s.is_displayed()]) == 1
    picker.select_by_index(len(picker.options) - 1)
    key = picker.first_selected_option.get_attribute("value")
    shown = browser.find_element(By.CSS_SELECTOR, "section.traj.shown")
    assert shown.get_attribute("data-task") == key and shown.is_displayed()
    step = shown.find_element(By.CSS_SELECTOR, "details.step")
    body = step.find_element(By.CSS_SELECTOR, "div")
    assert step.get_attribute("open") is None and not body.is_displayed()
    summary = step.find_element(By.TAG_NAME, "summary")
    browser.execute_script("arguments[0].scrollIntoView()", summary)
    summary.click()
    WebDriverWait(browser, 10).until(lambda d: body.is_displayed())
    assert step.get_attribute("open") is not None
    assert "Thought" in body.text and "Reward" in body.text

    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    from PIL import Image  # matplotlib's own dependency

    with Image.open(shot) as image:
        assert image.format == "PNG" and image.width >= 800 and image.height >= 600
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 20  # text, tables and plots, not a blank page
    assert max(count for count, _ in colors) < 0.98 * image.width * image.height
