"""Screenshot a leaderboard page in headless Chromium: `python studies/leaderboard_png.py PAGE PNG [WIDTH]`.

`make docs/leaderboard.png` runs it on results/reference/leaderboard.html for the README (not CI). The viewport is
WIDTH (default 1280) pixels wide and as tall as the page, so the image shows the table and every plot. Needs the
Debian packages chromium and chromium-driver (`make test-deps`).
"""
from __future__ import annotations

import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--disable-background-networking", "--no-first-run", "--force-device-scale-factor=1"]


def screenshot(page: Path, png: Path, width: int = 1280) -> None:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.set_window_size(width, 800)
        inner = driver.execute_script("return window.innerWidth")
        driver.get(page.resolve().as_uri())
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(2 * width - inner, height + 200)
        driver.get(page.resolve().as_uri())
        height = driver.execute_script("return document.documentElement.scrollHeight")
        outer = driver.execute_script("return window.outerHeight - window.innerHeight")
        driver.set_window_size(2 * width - inner, height + outer)
        png.parent.mkdir(parents=True, exist_ok=True)
        if not driver.save_screenshot(str(png)):
            raise SystemExit(f"could not write {png}")
    finally:
        driver.quit()
    print(f"wrote {png} ({width} px wide)")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) == 4 else 1280)
