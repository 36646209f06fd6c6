"""FBX, Collada and the other Assimp formats (:mod:`skeletal.io.assimp`).

* measured correctness: glTF characters converted by the ``assimp export`` command (Debian
  ``assimp-utils``) to ASCII FBX and Collada, loaded by skeletal and baked: skinned positions and
  world matrices of every joint match the glTF's bake within 1e-4 of the model's size at every sample
  time (the built-in demo character in the core suite; Fox, Soldier and Mannequin from ../shared);
* quirks: FBX pivot helper nodes collapsed and posed correctly, bones that are not nodes, FBX unit
  scale, ticks per second 0 -> 25 (synthetic files);
* bad input: truncated or lying binary FBX, ASCII FBX and Collada give one ModelError naming the file
  and offset/line, never a crash inside Assimp; reads stay inside the model's folder; CLI one line.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import skeletal
from skeletal.cli import cli
from skeletal.demo import demo_asset

from fixtures.assimp_convert import (
    assimp_command,
    compare_bakes,
    convert_clip,
    keyed_together,
    prepare_for_fbx,
)

from fixtures.shared_assets import ASSETS

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-4  # of the model's size


def _library_or_skip():
    try:
        from skeletal.io.assimp_ffi import library

        library()
    except skeletal.ModelError as exc:
        pytest.skip(f"the Assimp library is not installed: {exc}")


def _command_or_skip():
    _library_or_skip()
    if assimp_command() is None:
        pytest.skip("the assimp command (Debian package assimp-utils) converts the glTF test files")


def _convert(asset, clip_name, folder: Path, suffix: str):
    """(glTF clip, converted asset) for one clip of ``asset`` written as ``suffix``."""
    clip = keyed_together(asset, clip_name)
    source, source_clip = prepare_for_fbx(asset, clip) if suffix == ".fbx" else (asset, clip)
    path = convert_clip(source, source_clip, folder / f"{re.sub(r'[^A-Za-z0-9]', '_', clip_name)}{suffix}")
    return clip, skeletal.load(path)


def _check_round_trip(asset, clip_name, tmp_path, suffix):
    clip, converted = _convert(asset, clip_name, tmp_path, suffix)
    assert len(converted.clips) == 1
    assert converted.clips[0].duration == pytest.approx(clip.duration, abs=1e-3)
    scale = converted.document.asset_info.get("unit_scale", 1.0)
    assert scale == (0.01 if suffix == ".fbx" else 1.0)  # Assimp's FBX exporter writes centimetres
    worst = compare_bakes(asset, clip, converted, converted.clips[0], scale=scale)
    print(f"{asset.name} {clip_name} {suffix}: {worst}")
    assert worst["samples"] >= 2 and worst["nodes"] > 0
    assert worst["positions"] < TOLERANCE and worst["world"] < TOLERANCE, worst
    return worst


# ---------------------------------------------------------------------------------------------
# measured correctness


@pytest.mark.parametrize("suffix", [".fbx", ".dae"])
def test_demo_round_trip(suffix, tmp_path):
    _command_or_skip()
    demo = demo_asset()
    _check_round_trip(demo, "walk", tmp_path, suffix)


@pytest.mark.parametrize("model", ["Fox.glb", "Soldier.glb", "Mannequin.glb"])
@pytest.mark.parametrize("suffix", [".fbx", ".dae"])
def test_shared_characters_round_trip(model, suffix, tmp_path):
    _command_or_skip()
    path = ASSETS / model
    if not path.is_file():
        pytest.skip(f"{path} not found (the shared test assets are not checked out beside the repository)")
    asset = skeletal.load(path)
    name = next(c.name for c in asset.clips if c.duration > 0)
    _check_round_trip(asset, name, tmp_path, suffix)


def test_converted_fbx_has_all_influences_and_every_channel_time(tmp_path):
    """The FBX keeps per-channel key times (translation and rotation keyed differently) and a
    skin's full influence sets."""
    _command_or_skip()
    demo = demo_asset()
    glb = tmp_path / "walk.glb"
    skeletal.export(demo, glb, ["walk"])
    from fixtures.assimp_convert import convert

    fbx = convert(glb, tmp_path / "walk.fbx")
    asset = skeletal.load(fbx)
    clip = asset.clips[0]
    counts = {(t.node, t.path): t.key_count for t in clip.tracks}
    assert len(set(counts.values())) > 1  # different key counts per channel survive
    assert all(p.joints.shape[1] % 4 == 0 for m in asset.skinned_instances for p in m.primitives)
    assert asset.rig.names[asset.rig.parents[asset.rig.find("hips")]] == "root"


# ---------------------------------------------------------------------------------------------
# quirks (synthetic ASCII FBX edited from a converted file)


@pytest.fixture(scope="module")
def demo_fbx_text(tmp_path_factory) -> str:
    _command_or_skip()
    folder = tmp_path_factory.mktemp("demo_fbx")
    demo = demo_asset()
    clip = keyed_together(demo, "walk")
    source, source_clip = prepare_for_fbx(demo, clip)
    return convert_clip(source, source_clip, folder / "walk.fbx").read_text()


def _model_block(text: str, name: str) -> tuple[int, int]:
    start = text.index(f'"Model::{name}", "LimbNode" {{')
    props = text.index("Properties70:  {", start)
    return start, props + len("Properties70:  {")


def test_fbx_pivots_and_pre_rotation_collapse(demo_fbx_text, tmp_path):
    """A pre-rotation and a rotation pivot on the hips: Assimp makes $AssimpFbx$ helper nodes, skeletal
    folds them back into ``hips`` and poses it as FBX defines: T * Roff * Rp * Rpre * R * Rp^-1 * S."""
    plain = tmp_path / "plain.fbx"
    plain.write_text(demo_fbx_text)
    _start, at = _model_block(demo_fbx_text, "hips")
    extra = ('\n\t\t\tP: "PreRotation", "Vector3D", "Vector", "", 0, 30, 0'
             '\n\t\t\tP: "RotationPivot", "Vector3D", "Vector", "", 0, 0, 0')
    pivoted = tmp_path / "pivot.fbx"
    pivoted.write_text(demo_fbx_text[:at] + extra + demo_fbx_text[at:])
    a, b = skeletal.load(plain), skeletal.load(pivoted)
    assert not any("$AssimpFbx$" in n for n in b.rig.names)
    assert a.rig.names == b.rig.names
    times = np.linspace(0, a.clips[0].duration, 7)
    wa = skeletal.bake(a, 0, times)["node_world"]
    wb = skeletal.bake(b, 0, times)["node_world"]
    hips = a.rig.node_of[a.rig.find("hips")]
    parent = a.rig.node_of[a.rig.parents[a.rig.find("hips")]]
    pre = np.eye(4)
    c, s = np.cos(np.radians(30)), np.sin(np.radians(30))
    pre[:3, :3] = [[c, 0, s], [0, 1, 0], [-s, 0, c]]
    for k in range(len(times)):
        local_a = np.linalg.inv(wa[k, parent]) @ wa[k, hips]
        expected = local_a.copy()
        expected[:3, :3] = pre[:3, :3] @ local_a[:3, :3]
        np.testing.assert_allclose(np.linalg.inv(wb[k, parent]) @ wb[k, hips], expected, atol=2e-5)


def test_fbx_unit_scale_and_ticks(demo_fbx_text, tmp_path):
    """UnitScaleFactor 100 (metres) keeps the lengths; the Assimp default (cm) scales by 0.01."""
    metres = tmp_path / "metres.fbx"
    metres.write_text(demo_fbx_text.replace('P: "UnitScaleFactor", "double", "Number", "", 1',
                                            'P: "UnitScaleFactor", "double", "Number", "", 100'))
    cm = skeletal.load(tmp_path / "metres.fbx")
    assert cm.document.asset_info["unit_scale"] == 1.0
    path = tmp_path / "cm.fbx"
    path.write_text(demo_fbx_text)
    small = skeletal.load(path)
    np.testing.assert_allclose(np.asarray(small.bind_bounds) * 100, np.asarray(cm.bind_bounds), rtol=1e-5, atol=1e-6)
    from skeletal.io.assimp import read_assimp

    raw = skeletal.Asset(read_assimp(path, unit_scale=None))
    np.testing.assert_allclose(np.asarray(raw.bind_bounds), np.asarray(cm.bind_bounds), rtol=1e-5, atol=1e-6)


def test_ticks_per_second_zero_means_25(tmp_path):
    """A tiny .x file whose AnimTicksPerSecond is 0: keys 0..10 ticks last 10/25 s."""
    _library_or_skip()
    text = X_FILE.replace("AnimTicksPerSecond { 30; }", "AnimTicksPerSecond { 0; }")
    (tmp_path / "zero.x").write_text(text)
    (tmp_path / "thirty.x").write_text(X_FILE)
    zero, thirty = skeletal.load(tmp_path / "zero.x"), skeletal.load(tmp_path / "thirty.x")
    assert thirty.clips[0].duration == pytest.approx(10 / 30)
    assert zero.clips[0].duration == pytest.approx(10 / 25)


X_FILE = """xof 0303txt 0032
Frame Root {
  FrameTransformMatrix { 1.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,1.0;; }
  Frame Bone {
    FrameTransformMatrix { 1.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,1.0,0.0,1.0;; }
  }
  Mesh Tri {
    3; 0.0;0.0;0.0;, 1.0;0.0;0.0;, 0.0;1.0;0.0;;
    1; 3;0,1,2;;
    SkinWeights { "Bone"; 3; 0,1,2; 1.0,1.0,1.0;
      1.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,-1.0,0.0,1.0;; }
  }
}
AnimTicksPerSecond { 30; }
AnimationSet Move {
  Animation { {Bone}
    AnimationKey { 2; 2; 0;3; 0.0,1.0,0.0;;, 10;3; 1.0,1.0,0.0;;; }
  }
}
"""


def test_x_file_skin_and_bone_nodes(tmp_path):
    """A DirectX .x file: bones, skin weights and a translation animation come through."""
    _library_or_skip()
    (tmp_path / "tri.x").write_text(X_FILE)
    asset = skeletal.load(tmp_path / "tri.x")
    assert "Bone" in asset.rig.names and len(asset.skins) == 1
    out = skeletal.bake(asset, 0, [0.0, asset.clips[0].duration])
    pos = out[next(k for k in out if k.startswith("positions_"))]
    np.testing.assert_allclose(pos[1] - pos[0], np.tile([1.0, 0.0, 0.0], (3, 1)), atol=1e-5)


def test_bone_that_is_not_a_node(tmp_path):
    """A skin naming a bone with no frame of that name: a static node is made at its bind pose, so
    the vertices stay where the mesh puts them."""
    _library_or_skip()
    (tmp_path / "ghost.x").write_text(X_FILE.replace('SkinWeights { "Bone"', 'SkinWeights { "Ghost"'))
    asset = skeletal.load(tmp_path / "ghost.x")
    ghost = asset.rig.find("Ghost")
    assert asset.rig.names[asset.rig.parents[ghost]] == "Root"
    assert asset.skins[0].joints.tolist() == [ghost]
    out = skeletal.bake(asset, 0, [0.0, 0.3])
    pos = out[next(k for k in out if k.startswith("positions_"))]
    np.testing.assert_allclose(pos[0], [[0, 0, 0], [1, 0, 0], [0, 1, 0]], atol=1e-6)
    np.testing.assert_allclose(pos[1], pos[0], atol=1e-6)


# ---------------------------------------------------------------------------------------------
# bad input


def _binary_fbx(records: bytes, version: int = 7400) -> bytes:
    return b"Kaydara FBX Binary  \x00\x1a\x00" + struct.pack("<I", version) + records


def _record(name: bytes, props: bytes, n_props: int, children: bytes = b"", start: int = 27,
            end: int | None = None) -> bytes:
    header = 13 + len(name)
    body = props + children + (b"\x00" * 13 if children else b"")
    end = start + header + len(body) if end is None else end
    return struct.pack("<IIIB", end, n_props, len(props), len(name)) + name + body


BAD_BINARY = {
    "truncated": _binary_fbx(_record(b"Objects", b"I\x01\x00\x00\x00", 1))[:40],
    "end offset past the file": _binary_fbx(_record(b"Objects", b"I\x01\x00\x00\x00", 1, end=10**6) + b"\x00" * 13),
    "lying array length": _binary_fbx(_record(b"Vertices", b"d" + struct.pack("<III", 10**9, 0, 16) + b"\x00" * 16, 1) + b"\x00" * 13),
    "zlib bomb claim": _binary_fbx(_record(b"Vertices", b"d" + struct.pack("<III", 10**9, 1, 16) + b"\x00" * 16, 1) + b"\x00" * 13),
    "property list length lies": _binary_fbx(struct.pack("<IIIB", 27 + 13 + 7 + 5, 1, 99, 7) + b"Objects" + b"I\x01\x00\x00\x00" + b"\x00" * 13),
    "unknown property type": _binary_fbx(_record(b"Objects", b"Q\x01\x00\x00\x00", 1) + b"\x00" * 13),
    "no closing null record": _binary_fbx(_record(b"Objects", b"I\x01\x00\x00\x00", 1)),
}


def _deep_binary(depth: int) -> bytes:
    """``depth`` nested records, each closed by its null record."""
    inner = b""
    for level in reversed(range(depth)):
        start = 27 + 14 * level
        name = b"N"
        end = start + 14 + len(inner) + 13
        inner = struct.pack("<IIIB", end, 0, 0, 1) + name + inner + b"\x00" * 13
    return _binary_fbx(inner + b"\x00" * 13)


@pytest.mark.parametrize("case", sorted(BAD_BINARY) + ["nested 10,000 deep"])
def test_bad_binary_fbx(case, tmp_path):
    data = _deep_binary(10_000) if case.startswith("nested") else BAD_BINARY[case]
    path = tmp_path / "bad.fbx"
    path.write_bytes(data)
    with pytest.raises(skeletal.ModelError, match=r"^bad\.fbx: (offset \d+|header)") as info:
        skeletal.load(path)
    print(case, "->", info.value)


@pytest.fixture(scope="module")
def demo_binary_fbx(demo_fbx_text) -> bytes:
    from fixtures.fbx_binary import ascii_to_binary

    return ascii_to_binary(demo_fbx_text)


def test_binary_fbx_reads_like_ascii(demo_binary_fbx, demo_fbx_text, tmp_path):
    """A real-size binary FBX (the converted demo re-encoded by ``fixtures.fbx_binary``) passes the
    validator and bakes exactly like the ASCII file: nodes, meshes, skins and the clip; and so
    within 1e-4 of the glTF original."""
    (tmp_path / "b.fbx").write_bytes(demo_binary_fbx)
    (tmp_path / "a.fbx").write_text(demo_fbx_text)
    binary, text = skeletal.load(tmp_path / "b.fbx"), skeletal.load(tmp_path / "a.fbx")
    assert binary.rig.names == text.rig.names
    assert len(binary.skins) == len(text.skins) > 0 and len(binary.clips) == len(text.clips) == 1
    x, y = skeletal.bake(binary, 0, fps=30), skeletal.bake(text, 0, fps=30)
    assert set(x) == set(y)
    for key in x:
        np.testing.assert_allclose(x[key], y[key], atol=1e-7, err_msg=key)
    demo = demo_asset()
    worst = compare_bakes(demo, keyed_together(demo, "walk"), binary, binary.clips[0], scale=0.01)
    print("binary FBX demo walk:", worst)
    assert worst["positions"] < TOLERANCE and worst["world"] < TOLERANCE


def test_real_binary_fbx_truncated_or_lying(demo_binary_fbx, tmp_path):
    """The real binary file cut at many offsets, or with an array length inflated: one ModelError
    naming the offset each time, never a crash or a huge allocation inside Assimp."""
    data = demo_binary_fbx
    path = tmp_path / "cut.fbx"
    for cut in np.linspace(30, len(data) - 30, 25).astype(int).tolist():  # (the last 29 bytes: null record, footer)
        path.write_bytes(data[:cut])
        with pytest.raises(skeletal.ModelError, match=r"^cut\.fbx: offset \d+"):
            skeletal.load(path)
    at = data.index(b"Vertices") + len(b"Vertices") + 1  # the 'd' array header after the name
    assert data[at - 1:at] == b"d"
    lying = data[:at] + struct.pack("<I", 10**9) + data[at + 4:]
    path.write_bytes(lying)
    with pytest.raises(skeletal.ModelError, match=r"offset \d+ \(record 'Vertices'\): property 0: array of 1000000000"):
        skeletal.load(path)


def test_binary_validator_accepts_nesting_and_null_records():
    from skeletal.io.fbx_check import check_binary_fbx

    check_binary_fbx(_deep_binary(20), "ok.fbx")
    with pytest.raises(skeletal.ModelError, match="nest more than"):
        check_binary_fbx(_deep_binary(100), "deep.fbx")


def test_bad_ascii_fbx_and_collada(demo_fbx_text, tmp_path):
    cases = {
        "huge.fbx": re.sub(r"Vertices: \*\d+", "Vertices: *1000000000", demo_fbx_text, count=1),
        "deep.fbx": "; FBX 7.4.0 project file\n" + "A: {\n" * 10_000 + "}\n" * 10_000,
        "unbalanced.fbx": "; FBX 7.4.0 project file\n}\n",
        "truncated.fbx": demo_fbx_text[: len(demo_fbx_text) // 3],
        "garbage.fbx": "; FBX 7.4.0 project file\nObjects: {\n  Model: 1, \"Model::x\", \"LimbNode\" { Properties70: { P: 1,2 } }\n",
        "huge.dae": '<?xml version="1.0"?><COLLADA><library_geometries><float_array count="1000000000">1 2 3</float_array>'
                    "</library_geometries></COLLADA>",
        "entity.dae": '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><COLLADA>&a;</COLLADA>',
        "truncated.dae": '<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1"><asset>',
        "deep.dae": '<?xml version="1.0"?><COLLADA>' + "<node>" * 5000 + "</node>" * 5000 + "</COLLADA>",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(skeletal.ModelError) as info:
            asset = skeletal.load(path)
            if name == "truncated.fbx" and not asset.clips:
                raise skeletal.ModelError(path, None, "accepted")  # Assimp may read what is there
        message = str(info.value)
        assert message.startswith(name + ":"), message
        print(name, "->", message)


def test_reads_stay_in_the_models_folder(tmp_path):
    """Side files (OBJ materials, textures) outside the model's folder are never opened."""
    _library_or_skip()
    secret = tmp_path / "secret.mtl"
    secret.write_text("newmtl stolen\nKd 1 0 0\n")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tri.obj").write_text("mtllib ../secret.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl stolen\nf 1 2 3\n")
    from skeletal.io import assimp_ffi
    from skeletal.io.assimp import read_assimp

    opened = []
    original = assimp_ffi._FileSystem._on_open

    def spy(self, io, name, mode):
        result = original(self, io, name, mode)
        opened.append((self.ffi.string(name).decode(), result != self.ffi.NULL))
        return result

    assimp_ffi._FileSystem._on_open = spy
    try:
        doc = read_assimp(folder / "tri.obj", isolate=False)  # in this process, so that the spy sees the calls
    finally:
        assimp_ffi._FileSystem._on_open = original
    assert not any("secret" in name and ok for name, ok in opened), opened
    assert any("secret" in name for name, _ok in opened)  # it was asked for, and refused
    # the material is only a placeholder named by ``usemtl``: not the red the outside file defines
    assert not any(np.allclose(m.base_color_factor[:3], [1, 0, 0]) for m in doc.materials)
    isolated = read_assimp(folder / "tri.obj")  # the child process keeps the same sandbox
    assert not any(np.allclose(m.base_color_factor[:3], [1, 0, 0]) for m in isolated.materials)


def test_missing_library_message(tmp_path, monkeypatch):
    """Without libassimp an FBX load is one ModelError saying what to install; glTF is unaffected."""
    from skeletal.io import assimp_ffi

    monkeypatch.setattr(assimp_ffi, "_library", None)
    monkeypatch.setenv("SKELETAL_ASSIMP_LIBRARY", str(tmp_path / "nope.so"))
    monkeypatch.setattr(assimp_ffi.ctypes.util, "find_library", lambda name: None)
    real_names = ["libassimp.so.5", "libassimp.so", "libassimp.5.dylib", "libassimp.dylib"]
    import cffi

    real_dlopen = cffi.FFI.dlopen
    monkeypatch.setattr(cffi.FFI, "dlopen", lambda self, name, *a: (_ for _ in ()).throw(OSError(name))
                        if name in real_names or "nope" in str(name) else real_dlopen(self, name, *a))
    path = tmp_path / "x.fbx"
    path.write_text("; FBX 7.4.0 project file\n")
    with pytest.raises(skeletal.ModelError, match=r"x\.fbx: .*apt-get install libassimp5.*pip install 'skeletal\[assimp\]'"):
        skeletal.load(path)
    demo = tmp_path / "demo.glb"
    skeletal.export(demo_asset(), demo, ["walk"])
    assert skeletal.load(demo).clips[0].name == "walk"
    monkeypatch.setattr(assimp_ffi, "_library", None)


def test_gltf_load_imports_no_assimp():
    code = ("import sys, skeletal; from skeletal.demo import demo_asset; "
            "print(any(m.startswith('skeletal.io.assimp') or m == 'cffi' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.stdout.strip() == "False", out.stderr


# ---------------------------------------------------------------------------------------------
# CLI


def test_cli_info_bake_render_and_bad_file(demo_fbx_text, tmp_path):
    path = tmp_path / "walk.fbx"
    path.write_text(demo_fbx_text)
    runner = CliRunner()
    result = runner.invoke(cli, ["info", str(path)])
    assert result.exit_code == 0 and "hips" in result.output or "clips" in result.output.lower(), result.output
    out = tmp_path / "walk.npz"
    result = runner.invoke(cli, ["bake", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert np.load(out)["node_world"].shape[1] == len(skeletal.load(path).rig)
    png = tmp_path / "walk.png"
    result = runner.invoke(cli, ["render", str(path), "--out", str(png), "--size", "96x72"])
    if result.exit_code != 0 and "GL" in result.output:
        print("render skipped:", result.output.strip()[-200:])  # no headless GL on this machine
    else:
        assert result.exit_code == 0 and png.is_file(), result.output
    bad = tmp_path / "bad.fbx"
    bad.write_bytes(BAD_BINARY["lying array length"])
    proc = subprocess.run([sys.executable, "-m", "skeletal", "info", str(bad)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO / "src"),
                                            "SKELETAL_QUIET_COMPILE": "1"})  # no compile notice line
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.fbx: offset" in lines[0], proc.stderr
