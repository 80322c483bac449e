"""Screenshots of ``memread explore`` for the docs: one PNG per reader family, docs/images/explore-*.png.

Trains a tiny run of each family on generated data (as tests/test_explore.py does, more steps), serves it on
127.0.0.1, reads the test's input in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
Selenium) and saves the page:

    python scripts/explore_screenshots.py [--out docs/images] [--steps 40] [FAMILY ...]
    python scripts/explore_screenshots.py --run RUN_DIR --text "a sentence" --name ptb-lstmn   # a trained run

Families (SHOTS): lstmn (a 2-layer LSTMN LM, a panel per layer), window (short-attention LM, with Figure 3b),
nse (NSE read/write weights of a sentence classifier), mma (MMA-NSE pair: the shared memory apart), document
(hierarchical NSE-NSE reader), fusion (LSTMN deep fusion pair: intra- and inter-attention), translation (LSTM
encoder-decoder: target x source), nse_decoder (NSE-NSE translation: the decoder's reads and writes of the
shared memory), iaa (IAA cloze reader, every inference step), as_reader (AS Reader).
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
from memread.config import experiment_from_dict  # noqa: E402
from memread.experiment import start_run  # noqa: E402
from test_explore import INPUTS, train_tiny  # noqa: E402
from test_own_data import write_parallel  # noqa: E402

# image name -> the family of tests/test_explore.py and its training steps
SHOTS = {"lstmn": ("lstmn", 40), "window": ("window", 40), "nse": ("nse", 40), "mma": ("mma", 40),
         "document": ("document", 40), "fusion": ("deep_fusion", 40), "translation": ("attention_decoder", 400),
         "nse_decoder": ("nse_decoder", 400), "iaa": ("iaa", 40), "as_reader": ("as_reader", 40)}
TRANSLATION = {"attention_decoder": "lstm", "nse_decoder": "nse"}  # head -> encoder


def train_translation(root: Path, head: str, steps: int) -> Path:
    """A small translation run that learns the generated task (each sentence reversed and upper-cased), so that
    its attention aligns: 3,000 pairs, 32 units, a few minutes on a CPU core."""
    for split, n, seed in (("train", 3000, 0), ("valid", 50, 1), ("test", 50, 2)):
        (root / "parallel").mkdir(exist_ok=True)
        write_parallel(root / "parallel", split, n, seed)
    cfg = experiment_from_dict(
        {"data": {"name": "parallel", **{s: f"parallel/{s}" for s in ("train", "valid", "test")}},
         "reader": {"name": TRANSLATION[head], "hidden": 32},
         "head": {"name": head, "emb": 16, "tgt_emb": 16, "input_dropout": 0.0, "output_dropout": 0.0},
         "train": {"batch_size": 32, "max_steps": steps, "optimizer": "adam", "lr": 0.01, "progress": False,
                   "log_every": 100}}, f"{head}.toml")
    with start_run(cfg, root / "run", root) as trainer:
        trainer.fit()
    return root / "run"


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
        # the whole page: its height (measured in a short window: the page is at least the window's height) and
        # the window's own (the screenshot is the viewport)
        browser.set_window_size(1200, 400)
        time.sleep(0.3)
        height = browser.execute_script("return Math.max(document.body.scrollHeight, "
                                        "document.documentElement.scrollHeight)")
        chrome = browser.execute_script("return window.outerHeight - window.innerHeight")
        browser.set_window_size(1200, min(max(height + chrome + 20, 400), 2400))
        time.sleep(0.3)
        path.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(path))
        print(path)
    finally:
        srv.shutdown()
        srv.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*", metavar="FAMILY", help=f"default: all of {sorted(SHOTS)}")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    ap.add_argument("--steps", type=int, default=None, help="training steps of each tiny run (default: SHOTS')")
    ap.add_argument("--run", type=Path, help="a trained run (or archive) to show instead of the tiny runs")
    ap.add_argument("--text", help="with --run: the input typed into the page")
    ap.add_argument("--name", help="with --run: the picture is explore-NAME.png")
    args = ap.parse_args(argv)
    if args.run is not None:
        if args.families or not (args.text and args.name):
            ap.error("--run takes --text and --name, and no FAMILY")
        browser = driver()
        try:
            shoot(browser, memread.load(args.run), args.text, args.out / f"explore-{args.name}.png", steps_forward=0)
        finally:
            browser.quit()
        return 0
    unknown = [f for f in args.families if f not in SHOTS]
    if unknown:
        ap.error(f"unknown families {unknown}; choose from {sorted(SHOTS)}")
    args.families = args.families or list(SHOTS)
    browser = driver()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.families:
                family, steps = SHOTS[name]
                root = Path(tmp) / name
                root.mkdir()
                train = train_translation if family in TRANSLATION else train_tiny
                model = memread.load(train(root, family, args.steps or steps), data_root=root)
                shoot(browser, model, INPUTS[family], args.out / f"explore-{name.replace('_', '-')}.png")
    finally:
        browser.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
