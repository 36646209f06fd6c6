"""Run examples/notebook.ipynb in a real JupyterLab (no server extension besides anywidget's own
prebuilt lab extension) in headless Chromium, check that both widgets come up and follow the
Player, and save a screenshot of the followed widget to docs/images/web_widget.png.

    pip install jupyterlab "skeletal[notebook]" selenium; apt-get install chromium chromium-driver
    PYTHONPATH=src python tools/web_jupyterlab.py [--out docs/images/web_widget.png]

Not part of the test suite (it starts a Jupyter server and takes about a minute); tests/test_web.py
covers the widget with nbclient and with its ES module in Chromium.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "images" / "web_widget.png"))
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from test_web import _make_driver

    folder = Path(tempfile.mkdtemp(prefix="skeletal-lab-"))
    shutil.copy(REPO / "examples" / "notebook.ipynb", folder / "notebook.ipynb")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.token=",
         "--ServerApp.password=", "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={folder}",
         "--LabApp.news_url=", "--ServerApp.disable_check_xsrf=True", "--ServerApp.allow_root=True"],
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = None
    try:
        deadline = time.monotonic() + args.timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("jupyter lab did not start") from None
                time.sleep(0.5)
        driver = _make_driver()
        driver.set_window_size(1100, 1400)
        driver.get(f"http://127.0.0.1:{port}/lab/tree/notebook.ipynb")

        def wait(script: str, what: str):
            while time.monotonic() < deadline:
                value = driver.execute_script(script)
                if value:
                    return value
                time.sleep(0.5)
            driver.save_screenshot(str(folder / "timeout.png"))
            raise SystemExit(f"timed out waiting for {what} (screenshot: {folder / 'timeout.png'})")

        wait("return document.querySelectorAll('.jp-Notebook .jp-Cell').length >= 5 && "
             "!!document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-Toolbar')", "the notebook")
        time.sleep(3)  # the kernel starts
        # run every cell as a user would: the first cell selected, Shift+Enter five times
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        wait("return document.querySelector('.jp-Notebook .jp-Cell .jp-InputPrompt')", "the first cell")
        ActionChains(driver).click(driver.find_elements("css selector", ".jp-Notebook .jp-Cell .jp-InputPrompt")[0]).perform()
        ActionChains(driver).send_keys(Keys.ESCAPE).perform()
        for _ in range(5):
            ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
            time.sleep(0.3)
        wait("return document.querySelectorAll('.skeletal-viewer canvas').length >= 2", "two widgets")
        text = wait("""const outs = Array.from(document.querySelectorAll('.jp-OutputArea-output'))
                         .map(e => e.textContent).filter(t => t.includes('widget pose matches the player'));
                       return outs.length ? outs[0] : false;""", "the last cell")
        print(text.strip())
        state = driver.execute_script(
            "const v = window.skeletalViewer; return v ? [v.ready, v.failed, v.error, v.nodeNames().length] : null")
        print("viewer:", state)
        if not state or not state[0] or "True" not in text:
            raise SystemExit("the widget did not come up or did not follow the player")
        viewers = driver.find_elements("css selector", ".skeletal-viewer")
        target = driver.execute_script("return arguments[0].closest('.jp-Cell')", viewers[-1]) or viewers[-1]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", target)
        time.sleep(1)
        target.screenshot(args.out)
        print("wrote", args.out)
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
