"""Hostile FBX and Collada files named by issue 21 (the BVH ones are in test_bvh.py), each made by a
small generator here: one ``skeletal.ModelError`` naming the file, never a crash, a hang, a huge
allocation, an expanded entity or a read outside the model's folder.

* binary FBX: records pointing backwards or past the end; a real zlib bomb (many arrays each within
  deflate's 1032:1, together 1 GB from 1 MB); 10,000-deep nesting;
* ASCII FBX and Collada: 10,000-deep nesting;
* Collada: entity expansion ("billion laughs"), external entities and DTDs (also after 70 KB of
  comments and in UTF-16), ``init_from`` image paths outside the model's folder, absolute, ``file:``
  and ``http:``;
* each small case is also kept as a fuzz regression file (``tests/fuzz/regressions/``).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

import skeletal
from skeletal.io import fbx_check

FUZZ = Path(__file__).resolve().parent / "fuzz"


def _binary_fbx(records: bytes, version: int = 7400) -> bytes:
    return b"Kaydara FBX Binary  \x00\x1a\x00" + struct.pack("<I", version) + records


def _record(name: bytes, props: bytes, n_props: int, start: int, end: int | None = None) -> bytes:
    end = start + 13 + len(name) + len(props) if end is None else end
    return struct.pack("<IIIB", end, n_props, len(props), len(name)) + name + props


def zlib_bomb(arrays: int = 130, elements: int = 1 << 20) -> bytes:
    """``arrays`` records each holding one zlib ``d`` array of ``elements`` zeros (8 MB each, about
    8 KB compressed): every array is within deflate's ratio, together they claim a gigabyte."""
    packed = zlib.compress(b"\x00" * (8 * elements), 9)
    prop = b"d" + struct.pack("<III", elements, 1, len(packed)) + packed
    out = b""
    pos = 27
    for _ in range(arrays):
        rec = _record(b"Vertices", prop, 1, pos)
        out += rec
        pos += len(rec)
    return _binary_fbx(out + b"\x00" * 13)


def backwards_record() -> bytes:
    """A record whose end offset points before its own header (a loop, for a reader that follows it)."""
    return _binary_fbx(_record(b"Objects", b"I\x01\x00\x00\x00", 1, 27, end=20) + b"\x00" * 13)


def past_the_end_record() -> bytes:
    return _binary_fbx(_record(b"Objects", b"I\x01\x00\x00\x00", 1, 27, end=1 << 31) + b"\x00" * 13)


def deep_binary_fbx(depth: int = 10_000) -> bytes:
    inner = b""
    for level in reversed(range(depth)):
        start = 27 + 14 * level
        end = start + 14 + len(inner) + 13
        inner = struct.pack("<IIIB", end, 0, 0, 1) + b"N" + inner + b"\x00" * 13
    return _binary_fbx(inner + b"\x00" * 13)


COLLADA_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n'
COLLADA_BODY = '<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">{}</COLLADA>\n'
BILLION_LAUGHS = (COLLADA_HEAD + '<!DOCTYPE COLLADA [\n<!ENTITY a "aaaaaaaaaa">\n'
                  + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">\n' for i in range(9))
                  + "]>\n" + COLLADA_BODY.format("<asset><contributor><author>&j;</author></contributor></asset>"))
EXTERNAL_ENTITY = (COLLADA_HEAD + '<!DOCTYPE COLLADA [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n'
                   + COLLADA_BODY.format("<asset><contributor><author>&secret;</author></contributor></asset>"))
EXTERNAL_DTD_AFTER_COMMENTS = (COLLADA_HEAD + "<!--" + "x" * 70_000 + "-->\n"
                               + '<!DOCTYPE COLLADA SYSTEM "http://127.0.0.1:9/collada.dtd">\n' + COLLADA_BODY.format(""))

HOSTILE = {
    "backwards.fbx": (backwards_record, r"offset 27 \(record 'Objects'\): end offset 20 is outside"),
    "past_end.fbx": (past_the_end_record, r"offset 27 \(record 'Objects'\): end offset 2147483648 is outside"),
    "zlib_bomb.fbx": (zlib_bomb, r"record 'Vertices'\): property 0: the zlib arrays so far inflate to \d+ bytes.*zlib bomb"),
    "deep_binary.fbx": (deep_binary_fbx, r"records nest more than 64 deep"),
    "deep_ascii.fbx": (lambda: ("; FBX 7.4.0 project file\n" + "A: {\n" * 10_000 + "}\n" * 10_000).encode(),
                       r"line 66: braces nest more than 64 deep"),
    "deep.dae": (lambda: (COLLADA_HEAD + COLLADA_BODY.format("<node>" * 10_000 + "</node>" * 10_000)).encode(),
                 r"elements nest more than 1000 deep"),
    "laughs.dae": (lambda: BILLION_LAUGHS.encode(), r"line 2: <!DOCTYPE is not allowed"),
    "external_entity.dae": (lambda: EXTERNAL_ENTITY.encode(), r"line 2: <!DOCTYPE is not allowed"),
    "late_dtd.dae": (lambda: EXTERNAL_DTD_AFTER_COMMENTS.encode(), r"line 3: <!DOCTYPE is not allowed"),
    "utf16_entity.dae": (lambda: BILLION_LAUGHS.replace('encoding="utf-8"', 'encoding="utf-16"').encode("utf-16"),
                         r"line 2: <!DOCTYPE is not allowed"),
    "utf16_le_entity.dae": (lambda: EXTERNAL_ENTITY.encode("utf-16-le"), r"line 2: <!DOCTYPE is not allowed"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_is_one_model_error(name, tmp_path):
    make, pattern = HOSTILE[name]
    data = make()
    assert len(data) < 2_000_000  # generated small: the hostility is in what the file claims
    with pytest.raises(skeletal.ModelError, match=pattern):
        fbx_check.check(data, name)  # the pre-check alone (needs no Assimp)
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(skeletal.ModelError) as info:
        skeletal.load(path)
    message = str(info.value)
    assert message.startswith(f"{name}: ") and "\n" not in message, message


def test_zlib_arrays_of_real_files_pass():
    """The bomb budget leaves real compression alone: the same arrays, few enough, are accepted, and
    the budget is what the docs say."""
    fbx_check.check_binary_fbx(zlib_bomb(arrays=3), "three.fbx")
    bomb = zlib_bomb()
    claimed = 130 * 8 * (1 << 20)
    assert claimed > fbx_check.MAX_INFLATE_TOTAL * len(bomb) + fbx_check.INFLATE_ALLOWANCE
    assert claimed >= 1 << 30


def test_small_hostile_files_are_kept_as_regressions():
    """Each small case above is in the fuzz regressions (replayed by tests/test_fuzz.py)."""
    for name, (make, _pattern) in HOSTILE.items():
        data = make()
        if len(data) > 100_000:
            continue
        target = "fbx" if name.endswith(".fbx") else "collada"
        kept = FUZZ / "regressions" / target / f"hostile-{name}"
        assert kept.is_file() and kept.read_bytes() == data, f"write {kept} (see tests/fuzz/README.md)"


def _init_from_collada(tmp_path: Path) -> tuple[Path, Path]:
    """The small seed model with images whose ``init_from`` leaves the folder in every way."""
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG\r\n\x1a\n not for the model")
    folder = tmp_path / "model"
    folder.mkdir()
    paths = ["../secret.png", str(secret), secret.as_uri(), "http://127.0.0.1:9/x.png", "https://example.com/x.png",
             "//server/share/x.png", "..\\..\\secret.png"]
    images = "".join(f'<image id="img{i}" name="img{i}"><init_from>{p}</init_from></image>' for i, p in enumerate(paths))
    text = (FUZZ / "seeds" / "collada" / "small.dae").read_text()
    assert "<library_images>\n  </library_images>" in text
    text = text.replace("<library_images>\n  </library_images>", f"<library_images>{images}</library_images>")
    model = folder / "images.dae"
    model.write_text(text)
    return model, secret


def test_collada_init_from_outside_the_folder_is_never_read(tmp_path, monkeypatch):
    """Image paths outside the model's folder, absolute, ``file:`` or ``http:`` are never opened (Assimp
    reads every file through skeletal's folder-bound file system and has no network client)."""
    from skeletal.io import assimp_ffi

    try:
        assimp_ffi.library("probe")
    except skeletal.ModelError as exc:
        pytest.skip(f"libassimp is not installed: {exc}")
    model, secret = _init_from_collada(tmp_path)
    opened = []
    original = assimp_ffi._FileSystem._on_open

    def spy(self, io, name, mode):
        result = original(self, io, name, mode)
        opened.append((self.ffi.string(name).decode("utf-8", "replace"), result != self.ffi.NULL))
        return result

    monkeypatch.setattr(assimp_ffi._FileSystem, "_on_open", spy)
    try:
        asset = skeletal.load(model)
    except skeletal.ModelError as exc:
        assert str(exc).startswith("images.dae: "), exc
    else:
        assert asset.rig.names
    print("asked for:", opened)
    read = [name for name, ok in opened if ok]
    assert all(Path(name).resolve() == model.resolve() for name in read), opened
    assert not any("secret" in name or "http" in name or "//server" in name for name in read), opened
