"""Screenshots of ``memread explore`` for the docs: one PNG per reader family, docs/images/explore-*.png.

Trains a tiny run of each family on generated data (as tests/test_explore.py does, a few more steps), serves
it on 127.0.0.1, reads the test's input in headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
driven by Selenium) and saves the page:

    python scripts/explore_screenshots.py [--out docs/images] [--steps 40] [FAMILY ...]

Families: lstmn (LSTMN LM intra-attention), window (short-attention LM, with Figure 3b), nse (NSE read/write
weights of a sentence classifier), iaa (IAA cloze reader, every inference step), as_reader (AS Reader).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import memread  # noqa: E402
from memread.explore.server import serve  # noqa: E402
from test_explore import FAMILIES, INPUTS, train_tiny  # noqa: E402


def driver(width: int = 1200, height: int = 1500):
    from selenium import webdriver

    binary = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if binary is None or shutil.which("chromedriver") is None:
        sys.exit("explore_screenshots: needs headless Chromium (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=webdriver.ChromeService(shutil.which("chromedriver")), options=options)


def shoot(browser, model, item, path: Path, steps_forward: int = 2) -> None:
    import json

    from selenium.webdriver.common.by import By

    srv = serve(model)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        browser.get(srv.url)
        box = browser.find_element(By.ID, "input")
        box.send_keys(item if isinstance(item, str) else json.dumps(item))
        browser.find_element(By.ID, "submit").click()
        end = time.time() + 60
        while not browser.execute_script("return +document.body.dataset.rendered >= 1") and time.time() < end:
            time.sleep(0.05)
        for _ in range(steps_forward):
            buttons = browser.find_elements(By.CSS_SELECTOR, ".panel button.next")
            if buttons:
                buttons[0].click()
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1200, min(max(height + 40, 600), 2400))
        path.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(path))
        print(path)
    finally:
        srv.shutdown()
        srv.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*", metavar="FAMILY", help=f"default: all of {sorted(FAMILIES)}")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    ap.add_argument("--steps", type=int, default=40, help="training steps of each tiny run")
    args = ap.parse_args(argv)
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; choose from {sorted(FAMILIES)}")
    args.families = args.families or list(FAMILIES)
    browser = driver()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for family in args.families:
                root = Path(tmp) / family
                root.mkdir()
                model = memread.load(train_tiny(root, family, args.steps), data_root=root)
                shoot(browser, model, INPUTS[family], args.out / f"explore-{family.replace('_', '-')}.png")
    finally:
        browser.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
