"""TensorBoard in a real browser: `make ui-test`, not part of `make test`.

Trains DOWNPOUR and Synchronous-SGD briefly, starts `guide/board.py` on
their runs, opens the scalars in headless Chromium, finds every tag the two
READMEs list and both runs, and saves the chart of the loss and the test
accuracy of the two schemes, overlaid, to docs/tensorboard.png (the top
README shows it).

Needs Debian's chromium and chromium-driver, and Selenium, which
`make ui-test` installs into .venv/ui-packages (tests/ui/requirements.txt).
"""

import io
import os
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

# Resolves with what is still missing from the scalars dashboard: a card
# (chart) for each tag of arguments[0], and in the cards of arguments[1]
# every run of arguments[2] (each card's table has a row per run drawn).
# A MutationObserver sees each change of the page, so nothing polls; after
# arguments[3] ms it gives up and resolves with what is missing.
WAIT_FOR_CARDS = """
const [tags, shown, runs, limit] = arguments;
const done = arguments[arguments.length - 1];
const card = tag => {
  const title = document.querySelector(`tb-truncated-path[title="${tag}"]`);
  return title && title.closest('scalar-card');
};
const missing = () => [
  ...tags.filter(tag => !card(tag)),
  ...shown.flatMap(tag => runs.filter(run => !(card(tag) &&
      card(tag).textContent.includes(run))).map(run => `${run} in ${tag}`))];
if (missing().length === 0) { done([]); return; }
const observer = new MutationObserver(() => {
  if (missing().length === 0) { observer.disconnect(); done([]); }
});
observer.observe(document.body, {subtree: true, childList: true,
                                 characterData: true});
setTimeout(() => { observer.disconnect(); done(missing()); }, limit);
"""


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


def headless_chromium(webdriver, profile_dir):
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.fail("this test needs Debian's chromium and chromium-driver, "
                    f"missing here: {INSTALL}")
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


def test_scalars_of_two_schemes_in_headless_chromium(run_dir):
    webdriver, By, Keys = selenium()
    root = run_dir / "examples"
    outcomes = run_together({
        folder: ["bash", f"{folder}/run.sh", "--train_steps", "400",
                 "--eval_every", "50", "--log_every", "20",
                 "--logdir", str(root / folder / "runs" / "run")]
        for folder in SCHEMES}, timeout=600)
    for code, output in outcomes.values():
        assert code == 0, output[-3000:]
    runs = [f"{folder}/run" for folder in SCHEMES]

    board = Running([PYTHON, "guide/board.py", "--root", str(root)])
    driver = None
    try:
        url = board.wait_for_line(
            r"TensorBoard \S+ at (http://127\.0\.0\.1:\d+/)", timeout=300).group(1)
        driver = headless_chromium(webdriver, run_dir / "chromium")
        driver.set_script_timeout(300)
        driver.get(url + "#timeseries")
        # A chart for every tag of both READMEs; both runs in the two shown.
        missing = driver.execute_async_script(
            WAIT_FOR_CARDS, expected_tags(), SHOWN_TAGS, runs, 240_000)
        assert not missing, f"not on the scalars dashboard: {missing}"

        # The screenshot: only the two charts, the settings pane closed.
        driver.find_element(By.CSS_SELECTOR, "button.settings-button").click()
        tag_filter = driver.find_element(
            By.CSS_SELECTOR, "input[placeholder^='Filter tags']")
        tag_filter.send_keys(f"^({'|'.join(SHOWN_TAGS)})$", Keys.ESCAPE)
        missing = driver.execute_async_script(
            WAIT_FOR_CARDS, SHOWN_TAGS, SHOWN_TAGS, runs, 60_000)
        assert not missing, f"not in the filtered charts: {missing}"
        save_small_png(driver.get_screenshot_as_png(), SCREENSHOT)
    finally:
        if driver is not None:
            driver.quit()
        board.kill()
    assert os.path.getsize(SCREENSHOT) < 300_000
