"""The first hour, second pass (issue 28): what a new user meets at the command line."""

from __future__ import annotations

from click.testing import CliRunner

from skeletal.cli import cli


def test_top_level_help_names_more_than_gltf():
    text = CliRunner().invoke(cli, ["--help"]).output
    first = text.split("Options:")[0]
    assert "rigged glTF characters" not in first
    for word in ("BVH", "FBX", "USD", "render", "edit", "retarget"):
        assert word in first, word
