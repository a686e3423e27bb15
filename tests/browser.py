"""A real headless browser for the viewer tests (and benches/test_viewer_open.py): Debian's
``chromium`` driven through its ``chromium-driver`` by selenium. Nothing is downloaded (selenium's
own driver manager is never asked: the driver's path is given). The browser is a system package,
which ``pip install ".[test]"`` cannot install: where it is not on PATH, the test that needs it
skips and names the Debian packages. A browser that is there but cannot start fails the test."""

from __future__ import annotations

import base64
import io
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DEBIAN = "chromium chromium-driver"
INSTALL = f"apt-get install -y {DEBIAN} (Debian), and pip install selenium"


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless chromium session, quit on exit. Skips the calling test without chromium or its
    driver on PATH; fails it if they are there but the browser cannot start."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        pytest.fail(f"the viewer tests need selenium ({e}): {INSTALL}")
    binary = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        pytest.skip(
            f"needs the Debian packages {DEBIAN} (apt-get install -y {DEBIAN}): "
            f"no chromium ({binary}) or chromedriver ({driver_path}) on PATH"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
    except Exception as e:  # selenium raises several kinds; any means no browser
        pytest.fail(f"headless chromium did not start ({type(e).__name__}: {e}); {INSTALL}")
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, page: Path, timeout: float = 30.0) -> None:
    """Opens a page from disk and waits until the viewer drew its first frame."""
    driver.get(page.resolve().as_uri())
    wait_drawn(driver, 0, timeout)


def wait_drawn(driver: Any, row: int, timeout: float = 30.0) -> None:
    """Waits until the viewer shows `row` and has drawn its frame."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = "const v = window.trajcoreViewer; return v ? [v.row, v.drawnRow] : null"
    WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script) == [row, row])


def canvas_pixels(driver: Any, selector: str = "#frame") -> np.ndarray:
    """A canvas's pixels at its own resolution, (H, W, 3) uint8 (default: the frame's)."""
    from PIL import Image

    url = driver.execute_script("return document.querySelector(arguments[0]).toDataURL('image/png')", selector)
    data = base64.b64decode(url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


CURSOR = (0x1F, 0x6F, 0xEB)  # the plots' cursor colour (viewer.js)


def cursor_columns(driver: Any, plot: str) -> list[int]:
    """The pixel columns of a plot's canvas where its cursor line is drawn."""
    pixels = canvas_pixels(driver, f"[data-plot='{plot}'] canvas")
    hit = np.all(pixels == np.array(CURSOR, np.uint8), axis=2).any(axis=0)
    return [int(x) for x in np.flatnonzero(hit)]


def cell(driver: Any, field: str) -> str:
    """The text shown beside the frame for a value (``reward``, ``observation``, ``info/lives``)."""
    script = "return document.querySelector(`tr[data-field='${arguments[0]}'] td`).textContent"
    text: str = driver.execute_script(script, field)
    return text
