"""Renamed and wrong files: skeletal.load says what the file looks like and what to do (issue 21, item 3)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile

import pytest

import skeletal
from skeletal.io.sniff import check_kind, sniff

BVH = b"HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xposition Yposition Zposition\n End Site\n {\n  OFFSET 0 1 0\n }\n}\nMOTION\nFrames: 1\nFrame Time: 0.033333\n0 0 0\n"
GLTF_JSON = json.dumps({"asset": {"version": "2.0"}}).encode()


def glb(json_bytes: bytes = GLTF_JSON) -> bytes:
    json_bytes += b" " * (-len(json_bytes) % 4)
    return struct.pack("<III", 0x46546C67, 2, 20 + len(json_bytes)) + struct.pack("<II", len(json_bytes), 0x4E4F534A) + json_bytes


def usdz_bytes(tmp_path) -> bytes:
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("scene.usdc", b"PXR-USDC")
    return path.read_bytes()


@pytest.mark.parametrize("head, kind", [
    (b"glTF\x02\x00\x00\x00", "glb"),
    (b'  {"asset": {}}', "json"),
    (b"\xef\xbb\xbfHIERARCHY\r\nROOT", "bvh"),
    ("HIERARCHY\nROOT Hips".encode("utf-16"), "bvh"),
    (b"Kaydara FBX Binary  \x00\x1a\x00", "fbx"),
    (b"; FBX 7.4.0 project file\n", "fbx"),
    (b'<?xml version="1.0"?>\n<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema">', "collada"),
    (b'<?xml version="1.0"?>\n<svg>', "xml"),
    (b"<!DOCTYPE html><html>", "html"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "png"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "jpeg"),
    (b"GIF89a", "gif"),
    (b"PXR-USDC\x00", "usdc"),
    (b"#usda 1.0\n(", "usda"),
    (b"\x1f\x8b\x08\x00", "gzip"),
    (b"%PDF-1.7", "pdf"),
    (b"# made by hand\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n", "obj"),
    (b"hello world\n", "text"),
    (b"\x00\x01\x02\x03" * 16, "binary"),
    (b"", "empty"),
])
def test_sniff_kinds(head, kind):
    assert sniff(head) == kind


def test_sniff_zip_kinds(tmp_path):
    assert sniff(usdz_bytes(tmp_path)[:512]) == "usdz"
    plain = tmp_path / "p.zip"
    with zipfile.ZipFile(plain, "w") as z:
        z.writestr("Soldier.glb", b"glTF")
    assert sniff(plain.read_bytes()[:512]) == "zip"


@pytest.mark.parametrize("name, data, message", [
    ("walk.glb", BVH, "walk.glb: looks like a BVH motion capture file, not glTF; rename it to .bvh"),
    ("walk.gltf", BVH, "walk.gltf: looks like a BVH motion capture file, not glTF; rename it to .bvh"),
    ("notes.glb", b"just some notes\n", "notes.glb: looks like a text file, not glTF"),
    ("picture.gltf", b"\x89PNG\r\n\x1a\n" + bytes(64), "picture.gltf: looks like a PNG image, not a model"),
    ("photo.glb", b"\xff\xd8\xff\xe0" + bytes(64), "photo.glb: looks like a JPEG image, not a model"),
    ("model.bvh", glb(), "model.bvh: looks like a GLB (binary glTF) file, not BVH; rename it to .glb"),
    ("model.fbx", glb(), "model.fbx: looks like a GLB (binary glTF) file, not FBX; rename it to .glb"),
    ("model.dae", b"Kaydara FBX Binary  \x00", "model.dae: looks like an FBX file, not Collada; rename it to .fbx"),
    ("model.glb", b"Kaydara FBX Binary  \x00", "model.glb: looks like an FBX file, not glTF; rename it to .fbx"),
    ("scene.glb", b'<?xml version="1.0"?><COLLADA>', "scene.glb: looks like a Collada (XML) file, not glTF; rename it to .dae"),
    ("walk.txt", BVH, "walk.txt: looks like a BVH motion capture file, not a model skeletal reads; rename it to .bvh"),
    ("model.3ds", glb(), "model.3ds: looks like a GLB (binary glTF) file, not a .3ds model; rename it to .glb"),
    ("page.glb", b"<!DOCTYPE html>\n<html>", "page.glb: looks like an HTML page, not a model (a download that saved the web page?)"),
    ("noise.glb", bytes(range(256)), "noise.glb: looks like binary data of no format skeletal knows, not glTF"),
    ("empty.glb", b"", "empty.glb: the file is empty (0 bytes)"),
    ("pack.glb", b"PK\x03\x04" + bytes(40), "pack.glb: looks like a zip archive (unpack it and load the model inside)"),
])
def test_load_names_what_the_file_looks_like(tmp_path, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(skeletal.ModelError) as info:
        skeletal.load(path)
    assert str(info.value) == message


def test_usdz_named_glb_is_told_to_rename(tmp_path):
    path = tmp_path / "scene.glb"
    path.write_bytes(usdz_bytes(tmp_path))
    with pytest.raises(skeletal.ModelError, match=r"looks like a USDZ package, not glTF; rename it to \.usdz"):
        skeletal.load(path)


@pytest.mark.parametrize("name, data", [
    ("ok.glb", glb()), ("ok.gltf", GLTF_JSON), ("json.glb", GLTF_JSON), ("binary.gltf", glb()),
    ("walk.bvh", BVH), ("noext", glb()), ("ascii.fbx", b"; FBX 7.4.0 project file\n"),
    ("odd.fbx", b"FBXHeaderExtension:  {\n"), ("other.ply", b"ply\nformat ascii 1.0\n"),
])
def test_right_files_pass_the_check(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    check_kind(path, other_reader=name.endswith((".fbx", ".ply")))


def test_folder_is_one_line(tmp_path):
    with pytest.raises(skeletal.ModelError, match="is a folder, not a model file"):
        skeletal.load(tmp_path)


@pytest.mark.parametrize("command", [["info"], ["bake", "--out", "x.npz"], ["export", "--out", "x.glb"], ["compress", "--out", "x.glb"]])
def test_cli_folder_as_model_is_one_line(tmp_path, command):
    run = subprocess.run([sys.executable, "-m", "skeletal", command[0], str(tmp_path), *command[1:]],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [f"skeletal: error: {tmp_path.name}: is a folder, not a model file (give the model file inside it)"]


def test_cli_renamed_bvh(tmp_path):
    path = tmp_path / "walk.glb"
    path.write_bytes(BVH)
    run = subprocess.run([sys.executable, "-m", "skeletal", "info", str(path)], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr == "skeletal: error: walk.glb: looks like a BVH motion capture file, not glTF; rename it to .bvh\n"
