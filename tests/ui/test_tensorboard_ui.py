"""TensorBoard in a real browser: `make ui-test`, not part of `make test`.

Trains DOWNPOUR and Synchronous-SGD briefly, starts `guide/board.py` on
their runs, opens the scalars in headless Chromium, finds every tag the two
READMEs list and both runs, and saves the chart of the loss and the test
accuracy of the two schemes, overlaid, to docs/tensorboard.png (which
docs/results.md shows).

Needs Debian's chromium and chromium-driver, and Selenium, which
`make ui-test` installs into .venv/ui-packages (tests/ui/requirements.txt).
"""

import io
import os
import re
import shutil
import sys

import pytest

from conftest import PYTHON, REPO, Running, run_together
from test_tensorboard import readme_tags

INSTALL = ("sudo apt-get update && sudo apt-get install chromium "
           "chromium-driver")
SCHEMES = ("DOWNPOUR", "Synchronous-SGD")
WORKERS = 2
SCREENSHOT = os.path.join(REPO, "docs", "tensorboard.png")
SHOWN_TAGS = ["loss", "test_accuracy"]  # the two charts in the screenshot

# Resolves with what is still missing from the dashboard: a card (chart)
# for each tag of arguments[0]; and in each card of arguments[1], a row for
# each run of arguments[2] in its table and a line drawn for each (with
# forceSVG, a path of real coordinates). A MutationObserver sees each change
# of the page, so nothing polls; after arguments[3] ms it gives up.
WAIT_FOR_CARDS = """
const [tags, shown, runs, limit] = arguments;
const done = arguments[arguments.length - 1];
const card = tag => {
  const title = document.querySelector(`tb-truncated-path[title="${tag}"]`);
  return title && title.closest('scalar-card');
};
const lines = chart => [...chart.querySelectorAll('line-chart path')].filter(
  path => /opacity: 1/.test(path.getAttribute('style') || '') &&
          /[1-9]/.test(path.getAttribute('d') || '')).length;
const missing = () => [
  ...tags.filter(tag => !card(tag)),
  ...shown.flatMap(tag => runs.filter(run => !(card(tag) &&
      card(tag).textContent.includes(run))).map(run => `${run} in ${tag}`)),
  ...shown.filter(tag => card(tag) && lines(card(tag)) < runs.length).map(
      tag => `${runs.length} lines in ${tag}`)];
if (missing().length === 0) { done([]); return; }
const observer = new MutationObserver(() => {
  if (missing().length === 0) { observer.disconnect(); done([]); }
});
observer.observe(document.body, {subtree: true, childList: true,
                                 characterData: true, attributes: true});
setTimeout(() => { observer.disconnect(); done(missing()); }, limit);
"""


# Resolves once an element matches the selector arguments[0] (or after
# arguments[1] ms, with false).
WAIT_FOR_ELEMENT = """
const [selector, limit] = arguments, done = arguments[arguments.length - 1];
if (document.querySelector(selector)) { done(true); return; }
const observer = new MutationObserver(() => {
  if (document.querySelector(selector)) { observer.disconnect(); done(true); }
});
observer.observe(document.body, {subtree: true, childList: true});
setTimeout(() => { observer.disconnect(); done(false); }, limit);
"""
TAG_FILTER = "input[placeholder^='Filter tags']"


def selenium():
    """Selenium's webdriver, By and Keys, from .venv/ui-packages."""
    sys.path.append(os.path.join(sys.prefix, "ui-packages"))
    try:
        from selenium import webdriver
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys
    except ImportError:
        pytest.fail("Selenium is not installed: run `make ui-test`, which puts "
                    "tests/ui/requirements.txt into .venv/ui-packages")
    return webdriver, By, Keys


def chromium_paths():
    """Debian's chromium and its chromedriver; fails saying how to install
    them when either is missing."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.fail("this test needs Debian's chromium and chromium-driver, "
                    f"missing here: {INSTALL}")
    return chromium, chromedriver


def headless_chromium(webdriver, profile_dir):
    chromium, chromedriver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=1200,760",
                 f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    return webdriver.Chrome(
        options=options, service=webdriver.ChromeService(chromedriver))


def expected_tags():
    tags = set()
    for folder in SCHEMES:
        for tag in readme_tags(folder):
            tags |= ({tag.replace("<i>", str(index)) for index in range(WORKERS)}
                     if "<i>" in tag else {tag})
    return sorted(tags)


def save_small_png(png, path):
    """The screenshot in 64 colours: a chart needs no more, and the
    repository stays small."""
    from PIL import Image
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, optimize=True)


def check_dashboard(url, runs, profile_dir, screenshot):
    """Opens TensorBoard at `url` in headless Chromium: a chart for every
    tag of the READMEs, both `runs` drawn in the loss and test accuracy
    charts, which it saves as a `screenshot`."""
    webdriver, By, Keys = selenium()
    driver = headless_chromium(webdriver, profile_dir)
    try:
        driver.set_script_timeout(300)
        # forceSVG: lines a test can see (a canvas would hide them).
        driver.get(url + "?forceSVG=true#timeseries")
        assert driver.execute_async_script(WAIT_FOR_ELEMENT, TAG_FILTER, 120_000)
        tag_filter = driver.find_element(By.CSS_SELECTOR, TAG_FILTER)

        def show(tags, shown=(), limit_ms=60_000):
            """Filters the dashboard down to `tags`; what is missing."""
            # Keys.NULL lets go of Control once the old filter is selected.
            tag_filter.send_keys(Keys.CONTROL, "a", Keys.NULL, Keys.BACK_SPACE,
                                 f"^({'|'.join(map(re.escape, tags))})$",
                                 Keys.ESCAPE)
            return driver.execute_async_script(
                WAIT_FOR_CARDS, list(tags), list(shown), runs, limit_ms)

        # The first card waits for TensorBoard to load the runs; the cards
        # are drawn only when in view, so one tag at a time.
        for index, tag in enumerate(expected_tags()):
            missing = show([tag], limit_ms=240_000 if index == 0 else 60_000)
            assert not missing, f"not on the scalars dashboard: {missing}"

        # The screenshot: the two charts, both runs drawn, settings closed.
        for toggle in driver.find_elements(
                By.CSS_SELECTOR, "button.settings-button.checked"):
            toggle.click()
        missing = show(SHOWN_TAGS, SHOWN_TAGS)
        assert not missing, f"not in the charts: {missing}"
        save_small_png(driver.get_screenshot_as_png(), screenshot)
    finally:
        driver.quit()


@pytest.mark.timeout(1800)
def test_scalars_of_two_schemes_in_headless_chromium(run_dir):
    # Before any training: fail at once, saying how to install what is missing.
    selenium()
    chromium_paths()
    root = run_dir / "examples"
    outcomes = run_together({
        folder: ["bash", f"{folder}/run.sh", "--train_steps", "400",
                 "--eval_every", "50", "--log_every", "20",
                 "--logdir", str(root / folder / "runs" / "run")]
        for folder in SCHEMES}, timeout=600)
    for code, output in outcomes.values():
        assert code == 0, output[-3000:]

    board = Running([PYTHON, "guide/board.py", "--root", str(root)])
    try:
        url = board.wait_for_line(
            r"TensorBoard \S+ at (http://127\.0\.0\.1:\d+/)", timeout=300).group(1)
        check_dashboard(url, [f"{folder}/run" for folder in SCHEMES],
                        run_dir / "chromium", SCREENSHOT)
    finally:
        board.kill()
    assert os.path.getsize(SCREENSHOT) < 300_000
