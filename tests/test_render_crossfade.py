"""``skeletal render --crossfade FROM:TO@START:DURATION``: a transition in a video (posed by the Mixer)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from skeletal.render.errors import RenderError
from skeletal.render.output import parse_crossfade


def test_parse_crossfade():
    assert parse_crossfade("Walk:Run@1.0:0.5") == ("Walk", "Run", 1.0, 0.5)
    assert parse_crossfade("mixamo:Walk:Run@2") == ("mixamo:Walk", "Run", 2.0, 0.3)
    for bad in ("Walk@1", "Walk:Run", "Walk:Run@x:1", "Walk:Run@-1:0.5"):
        with pytest.raises(RenderError, match="--crossfade"):
            parse_crossfade(bad)


def test_render_crossfade_video(tmp_path, ctx, imageio):
    from skeletal.cli.render import render

    out = tmp_path / "fade.gif"
    result = CliRunner().invoke(
        render, ["--crossfade", "walk:wave@0.2:0.3", "--out", str(out), "--size", "96x72", "--fps", "10", "--seconds", "0.8"]
    )
    assert result.exit_code == 0, result.output
    frames = imageio.imread(out, index=None)
    assert frames.shape[0] == 8
    # The figure moves throughout: consecutive frames differ, before, during and after the fade.
    diffs = [np.abs(frames[i + 1].astype(int) - frames[i].astype(int)).sum() for i in range(7)]
    assert all(d > 0 for d in diffs)
    from skeletal.cli import cli

    bad = CliRunner().invoke(cli, ["render", "--crossfade", "walk:dance@0.2", "--out", str(tmp_path / "x.png")])
    assert bad.exit_code == 2 and "no clip named 'dance'" in bad.output
