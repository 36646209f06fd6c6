"""The README's and the documentation site's Python examples run (issue 21, item 2).

Every ```python block of README.md and of the docs pages (docs/*.md, docs/guides/*.md) is run here on
its own, as a reader pastes it (issue 28): each in an empty namespace (a block that forgets
``import skeletal`` fails with the reader's NameError), in its own temporary working folder:

* a block with no marker runs as pasted and must not need any file: the first block ("Ten lines of
  API") is what a new user pastes first, so it uses ``skeletal.examples.path("demo.glb")``, and it
  prints what it computes;
* ``<!-- readme-test: needs: A B -->`` above a block: the block runs with the shared models A, B
  (from ``$SKELETAL_ASSETS``) linked into the working folder, and skips, naming them, when they are
  absent; the block's code names each file it needs, so a reader sees it;
* a block that imports an optional package (torch, usd-core...) skips, naming it, when it is not
  installed.

There are no fragments: a block that could not run as pasted is a block a reader cannot use.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from skeletal.errors import SkeletalError

from fixtures.shared_assets import ASSETS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The pages whose examples are run: the README, then the docs site's pages (the guides hold the long
#: examples the README links to).
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "guides").glob("*.md"))]
_MARKER = re.compile(r"<!--\s*readme-test:\s*(needs|fragment):\s*(.*?)\s*-->")
#: Optional packages a block may import: missing, the block skips saying which extra installs it.
OPTIONAL = {"torch": "skeletal[torch]", "pxr": "skeletal[usd]", "anywidget": "skeletal[notebook]",
            "ray": "skeletal[ray]", "imgui_bundle": "skeletal[edit]"}


def readme_blocks(text: str) -> list[tuple[int, str, str, str]]:
    """(line number, kind, detail, code) of every ```python block; kind is run, needs or fragment."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            marker = _MARKER.search(lines[i - 1]) if i > 0 else None
            kind, detail = (marker.group(1), marker.group(2)) if marker else ("run", "")
            blocks.append((start + 1, kind, detail, "\n".join(lines[start:end]) + "\n"))
            i = end
        i += 1
    return blocks


README_BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
#: (page, line, kind, detail, code) over every page.
BLOCKS = [(page.relative_to(ROOT).as_posix(), *block) for page in PAGES
          for block in readme_blocks(page.read_text(encoding="utf-8"))]


def test_the_readme_has_its_blocks_and_the_first_one_runs_as_pasted():
    assert len(README_BLOCKS) >= 1
    assert len(BLOCKS) >= 15
    line, kind, _, code = README_BLOCKS[0]
    assert kind == "run", "the README's first example must run as pasted, with no marker"
    assert "skeletal.examples.path(" in code
    assert code.count("print(") >= 3, "the README's first example shows its results"


@pytest.mark.parametrize("page, line, kind, detail, code", BLOCKS, ids=[f"{b[0]}:{b[1]}" for b in BLOCKS])
def test_readme_block(page, line, kind, detail, code, tmp_path, monkeypatch):
    compiled = compile(code, f"{page}:{line}", "exec")
    assert kind != "fragment", f"{page}:{line}: a fragment cannot be pasted: make the block run on its own"
    monkeypatch.chdir(tmp_path)
    if kind == "needs":
        names = detail.split()
        unnamed = [n for n in names if n not in code]
        assert not unnamed, f"{page}:{line}: the block needs {unnamed} without naming them in its code"
        folder = shared_asset_dir()
        missing = [n for n in names if folder is None or not (Path(folder) / n).is_file()]
        if missing:
            pytest.skip(f"{page}:{line} needs the shared models {', '.join(missing)} "
                        f"($SKELETAL_ASSETS, default ../shared/assets)")
        for name in names:
            os.symlink(Path(folder) / name, tmp_path / name)
    try:
        exec(compiled, {"__name__": "__readme__"})  # nothing imported: the block's own imports only
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in OPTIONAL:
            raise
        pytest.skip(f"{page}:{line} needs {top} (pip install '{OPTIONAL[top]}')")
    except SkeletalError as exc:  # an optional part's own "pip install ..." line: not installed here
        if "pip install" not in str(exc):
            raise
        pytest.skip(f"{page}:{line}: {exc}")


def shared_asset_dir() -> Path | None:
    """``$SKELETAL_ASSETS`` when set, else ``../shared/assets`` beside the repository, if it exists."""
    folder = Path(os.environ["SKELETAL_ASSETS"]) if os.environ.get("SKELETAL_ASSETS") else ASSETS
    return folder if folder.is_dir() else None


def test_the_readme_example_prints_what_the_readme_says(tmp_path, monkeypatch, capsys):
    """The ten lines print, and what they print is what the README shows under "It prints:"."""
    text = README.read_text(encoding="utf-8")
    shown = re.search(r"It prints:\n\n```\n(.*?)```", text, re.S)
    assert shown, "the README shows the example's output under 'It prints:'"
    monkeypatch.chdir(tmp_path)
    exec(compile(README_BLOCKS[0][3], "README.md", "exec"), {"__name__": "__readme__"})
    assert capsys.readouterr().out == shown.group(1)
