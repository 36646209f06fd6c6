"""The fast glTF load paths (issue 17) give exactly what the one-by-one paths give.

The reader reads an animation's channels in bulk (``_packed_channels``) and the nodes in bulk
(``_plain_nodes`` / ``_plain_node``); anything unusual falls back to the checked path. These tests
load the generated fixture models both ways and compare everything, check that the deferred objects
(channels, tracks, mesh instances) appear on first use and follow later edits, and that the JSON
parser choice changes neither results nor error messages.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle

import numpy as np
import pytest

import skeletal
from skeletal.errors import ModelError
from skeletal.io import glb
from skeletal.io import gltf as gltf_reader

from fixtures.gltf_builder import GltfBuilder
from fixtures.models import FIXTURES, build


def _slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn every bulk path off: the reader goes channel by channel and node by node."""
    monkeypatch.setattr(gltf_reader._GltfReader, "_packed_channels", lambda *args: None)
    monkeypatch.setattr(gltf_reader._GltfReader, "_plain_nodes", lambda *args: None)
    monkeypatch.setattr(gltf_reader._GltfReader, "_plain_node", lambda *args: None)


def _load_slow(path, monkeypatch: pytest.MonkeyPatch) -> skeletal.Asset:
    """``skeletal.load(path)`` with every bulk path off (see :func:`_slow`)."""
    with monkeypatch.context() as m:
        _slow(m)
        return skeletal.load(path)


def _errors_both_ways(path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The ModelError messages of loading ``path`` with the bulk paths and without them."""
    with pytest.raises(ModelError) as fast:
        skeletal.load(path)
    with pytest.raises(ModelError) as slow:
        _load_slow(path, monkeypatch)
    return str(fast.value), str(slow.value)


def _same_clips(fast: skeletal.Asset, slow: skeletal.Asset) -> None:
    assert [c.name for c in fast.clips] == [c.name for c in slow.clips]
    for a, b in zip(fast.clips, slow.clips):
        assert a.duration == b.duration and a.track_count == b.track_count
        for key in ("key_start", "value_start", "times", "values", "width", "interp", "path", "node"):
            x, y = getattr(a, key), getattr(b, key)
            assert x.dtype == y.dtype and np.array_equal(x, y), key
        for s, t in zip(a.tracks, b.tracks):
            assert (s.node, s.path, s.interpolation) == (t.node, t.path, t.interpolation)
            assert s.times.dtype == t.times.dtype == np.float32 and s.values.shape == t.values.shape
            assert np.array_equal(s.times, t.times) and np.array_equal(s.values, t.values)
            assert s.times.flags.c_contiguous and s.values.flags.c_contiguous


def _same_documents(fast: skeletal.Asset, slow: skeletal.Asset) -> None:
    for x, y in zip(fast.document.animations, slow.document.animations):
        assert len(x.channels) == len(y.channels)
        for a, b in zip(x.channels, y.channels):
            assert (a.node, a.path, a.interpolation) == (b.node, b.path, b.interpolation)
            assert a.times.dtype == b.times.dtype and a.values.dtype == b.values.dtype
            assert a.values.shape == b.values.shape
            assert np.array_equal(a.times, b.times) and np.array_equal(a.values, b.values)
    assert len(fast.document.nodes) == len(slow.document.nodes)
    for a, b in zip(fast.document.nodes, slow.document.nodes):
        for key in ("name", "children", "mesh", "skin", "parent", "extras", "weights", "matrix"):
            assert repr(getattr(a, key)) == repr(getattr(b, key)), key
        for key in ("translation", "rotation", "scale"):
            x, y = getattr(a, key), getattr(b, key)
            assert x.dtype == y.dtype == np.float64 and x.shape == y.shape and np.array_equal(x, y), key
    assert fast.rig.names == slow.rig.names
    assert np.array_equal(fast.rig.parents, slow.rig.parents) and np.array_equal(fast.rig.rest, slow.rig.rest)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_bulk_paths_match_the_checked_paths(name, tmp_path, monkeypatch):
    path = build(name, tmp_path)
    fast = skeletal.load(path)
    slow = _load_slow(path, monkeypatch)
    assert all(a.packed is None for a in slow.document.animations)
    _same_clips(fast, slow)
    _same_documents(fast, slow)
    for a, b in zip(fast.mesh_instances, slow.mesh_instances):
        for p, q in zip(a.primitives, b.primitives):
            assert np.array_equal(p.weights, q.weights) if p.weights is not None else q.weights is None


def test_cubic_arm_is_read_in_bulk(tmp_path):
    """The fixture with STEP/LINEAR/CUBICSPLINE float channels takes the bulk path for every clip."""
    asset = skeletal.load(build("cubic_spline_arm", tmp_path))
    assert asset.clips and all(a.packed is not None for a in asset.document.animations)


def _walk(tmp_path, times=(0.0, 0.5, 1.0), extra_node: dict | None = None, edit=None):
    """Two nodes, one LINEAR translation and one STEP rotation channel sharing their key times
    (``times`` written over the file's keys afterwards, as the builder refuses bad ones); ``edit``
    changes the JSON document before it is written."""
    b = GltfBuilder()
    root = b.add_node(name="root", translation=[0.0, 1.0, 0.0])
    child = b.add_node(name="child", rotation=[0.0, 0.0, 0.0, 1.0])
    b.add_children(root, [child])
    b.add_scene([root])
    t = np.arange(len(times), dtype=np.float32) / 2
    b.add_animation([
        {"node": root, "path": "translation", "times": t, "values": np.arange(len(t) * 3, dtype=np.float32).reshape(-1, 3),
         "interpolation": "LINEAR"},
        {"node": child, "path": "rotation", "times": t, "values": np.tile(np.float32([0, 0, 0, 1]), (len(t), 1)),
         "interpolation": "STEP"},
    ], name="walk")
    if extra_node is not None:
        b.doc["nodes"][child].update(extra_node)
    accessor = b.doc["accessors"][b.doc["animations"][0]["samplers"][0]["input"]]
    start = b.doc["bufferViews"][accessor["bufferView"]].get("byteOffset", 0) + accessor.get("byteOffset", 0)
    b.bin[start : start + 4 * len(times)] = np.array(times, np.float32).tobytes()
    if edit is not None:
        edit(b.doc)
    return b.write_glb(tmp_path / "walk.glb")


def test_channels_and_tracks_are_made_on_first_use(tmp_path):
    asset = skeletal.load(_walk(tmp_path))
    anim, clip = asset.document.animations[0], asset.clips[0]
    assert not anim.channels_made and "tracks" not in clip.__dict__
    assert clip.track_count == 2 and "tracks" not in clip.__dict__  # counted without making them
    assert repr(clip) == "Clip('walk', duration=1s, tracks=2)"
    channels = anim.channels
    assert anim.channels_made and anim.channels is channels
    assert channels[0].times is channels[1].times  # one input accessor: one shared array, as before
    assert not channels[0].values.flags.writeable  # views of the file's bytes, as before
    assert [t.path for t in clip.tracks] == ["translation", "rotation"]
    assert clip.tracks[0].values.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert clip.interpolations == ["STEP", "LINEAR"]
    assert clip.values.flags.writeable and clip.values.flags.c_contiguous  # what the kernels are compiled for


def test_lazy_clip_copies_and_pickles(tmp_path):
    clip = skeletal.load(_walk(tmp_path)).clips[0]
    for other in (copy.copy(clip), copy.deepcopy(clip), pickle.loads(pickle.dumps(clip))):
        assert other.track_count == 2 and len(other.tracks) == 2
        assert np.array_equal(other.tracks[1].times, [0.0, 0.5, 1.0])
        assert np.array_equal(other.times, clip.times)
    with pytest.raises(AttributeError):
        clip.no_such_attribute  # noqa: B018


def test_asset_follows_edited_channels(tmp_path):
    """An edit of the document's channels after reading is what the asset's clip then shows."""
    document = gltf_reader.read_gltf(_walk(tmp_path))
    unchanged = skeletal.Asset(document)
    channels = document.animations[0].channels  # made now: the packed layout still stands for them
    again = skeletal.Asset(document)
    assert np.array_equal(again.clips[0].values, unchanged.clips[0].values)
    channels[0].values = np.ascontiguousarray(channels[0].values) * 2
    edited = skeletal.Asset(document)
    assert edited.clips[0].tracks[0].values.tolist() == [[0, 2, 4], [6, 8, 10], [12, 14, 16]]
    assert np.array_equal(edited.clips[0].values[:9], np.arange(9) * 2)
    assert not np.shares_memory(again.clips[0].values, unchanged.clips[0].values)  # each asset its own copy
    del channels[1]
    assert skeletal.Asset(document).clips[0].track_count == 1


@pytest.mark.parametrize("times, expected", [
    ((0.0, 0.5, 0.5), "key times of input accessors[0] are not strictly increasing: key 2 (t=0.5) follows key 1 (t=0.5)"),
    ((0.0, float("nan"), 1.0), "input accessors[0] key 1 time is nan"),
])
def test_bad_key_times_read_the_same_both_ways(tmp_path, monkeypatch, times, expected):
    path = _walk(tmp_path, times)
    fast, slow = _errors_both_ways(path, monkeypatch)
    assert fast == slow
    assert expected in fast and "animations[0].channels[0]" in fast


@pytest.mark.parametrize("node, message", [
    ({"name": None}, "nodes[1].name: expected a string, found null"),
    ({"mesh": -1}, "nodes[1].mesh: -1 is below the minimum 0"),
    ({"translation": [True, 0, 0]}, "nodes[1].translation: expected an array of numbers"),
    ({"children": [1]}, "nodes[1].children: nodes[1] lists itself as a child"),
    ({"children": [0]}, "the node hierarchy has a cycle"),
    ({"skin": 0}, "nodes[1].skin: refers to skins[0], which does not exist"),
])
def test_bad_nodes_read_the_same_both_ways(tmp_path, monkeypatch, node, message):
    path = _walk(tmp_path, extra_node=node)
    fast, slow = _errors_both_ways(path, monkeypatch)
    assert fast == slow and message in fast


_LOADS = None  # the file loads: an integral float (3.0) is an integer to the checked path too


@pytest.mark.parametrize("keys, value, message", [
    (("accessors", 1, "count"), True, "accessors[1].count: expected an integer, found a boolean"),
    (("accessors", 1, "count"), 3.0, _LOADS),
    (("accessors", 0, "componentType"), 5126.0, _LOADS),
    (("accessors", 1, "componentType"), True, "accessors[1].componentType: expected an integer, found a boolean"),
    (("accessors", 1, "bufferView"), False, "accessors[1].bufferView: expected an integer, found a boolean"),
    (("accessors", 1, "byteOffset"), True, "accessors[1].byteOffset: expected an integer, found a boolean"),
    (("accessors", 1, "normalized"), 0, "accessors[1].normalized: expected true or false, found the number 0"),
    (("bufferViews", 1, "buffer"), False, "bufferViews[1].buffer: expected an integer, found a boolean"),
    (("bufferViews", 1, "byteOffset"), True, "bufferViews[1].byteOffset: expected an integer, found a boolean"),
    (("bufferViews", 1, "byteLength"), True, "bufferViews[1].byteLength: expected an integer, found a boolean"),
    (("animations", 0, "channels", 0, "sampler"), True,
     "animations[0].channels[0].sampler: expected an integer, found a boolean"),
    (("animations", 0, "channels", 1, "target", "node"), False,
     "animations[0].channels[1].target.node: expected an integer, found a boolean"),
    (("animations", 0, "samplers", 0, "input"), True, "animations[0].samplers[0].input: expected an integer, found a boolean"),
    (("animations", 0, "samplers", 1, "output"), 2.0, _LOADS),
    (("animations", 0, "samplers", 0, "interpolation"), True,
     "animations[0].samplers[0].interpolation: expected a string, found a boolean"),
    (("animations", 0, "channels", 0, "target", "path"), ["translation"],
     "animations[0].channels[0].target.path: expected a string, found an array"),
])
def test_field_types_read_the_same_both_ways(tmp_path, monkeypatch, keys, value, message):
    """A boolean where an integer belongs (true is 1 to numpy and to array("q")), an integral float, a
    list for a name: the bulk columns hand these to the checked path, which words them as before."""
    def edit(doc):
        target = doc
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    path = _walk(tmp_path, edit=edit)
    outcomes = []
    for slow in (False, True):
        with monkeypatch.context() as m:
            if slow:
                _slow(m)
            try:
                clip = skeletal.load(path).clips[0]
                outcomes.append([t.values.tolist() for t in clip.tracks])
            except ModelError as exc:
                outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    if message is _LOADS:
        assert outcomes[0][0] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    else:
        assert outcomes[0] == f"walk.glb: {message}"


def test_plain_ints_and_codes():
    from skeletal.io.jsonobj import codes, plain_ints

    assert plain_ints([5] * 20 + [1, 0]).tolist() == [5] * 20 + [1, 0]
    assert plain_ints([5] * 20 + [True]) is None  # a boolean among a few small values
    assert plain_ints([0] * 20 + [False]) is None  # ... among many (every value looked at)
    for bad in ([1, 2.0], [1, None], [1, "2"], [1, [2]], [1, {}], [1, 2**63]):
        assert plain_ints(bad) is None
    assert plain_ints([]).tolist() == []
    table = {"STEP": 1, "LINEAR": 2}
    assert codes(["LINEAR", "STEP", True, 1, None, "x"], table).tolist() == [2, 1, 0, 0, 0, 0]
    assert codes(["STEP", ["LINEAR"], {"a": 1}], table).tolist() == [1, 0, 0]  # unhashable values


def test_image_bytes_are_copied_when_first_read(tmp_path):
    from skeletal.document import Image

    data = bytearray(b"\x89PNG\r\n\x1a\nrest")
    image = Image("dot", memoryview(data), None)
    assert image._data is not None and type(image._data) is memoryview  # not copied yet
    assert image.data == b"\x89PNG\r\n\x1a\nrest" and type(image.data) is bytes
    data[0] = 0  # a copy now: later changes of the source do not show
    assert image.data[0] == 0x89
    for other in (copy.copy(image), copy.deepcopy(image), pickle.loads(pickle.dumps(image))):
        assert other == image and other.data == image.data and other.name == "dot"
    assert Image("dot", memoryview(b"ab"), "image/png") != Image("dot", b"ac", "image/png")
    assert repr(Image("i", b"ab", None)) == "Image(name='i', data=b'ab', mime_type=None)"


def test_glb_images_are_views_until_read(tmp_path):
    b = GltfBuilder()
    b.add_scene([b.add_node(name="root")])
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    view = b.add_buffer_view(png)
    b.doc.setdefault("images", []).append({"bufferView": view})  # no mimeType: sniffed from the bytes
    image = skeletal.load(b.write_glb(tmp_path / "img.glb")).document.images[0]
    assert type(image._data) is memoryview and image.mime_type == "image/png"
    assert image.data == png


def test_json_parser_keeps_big_integers_and_errors():
    doc = {"asset": {"version": "2.0"}, "extras": {"id": 123456789012345678901234567890, "x": 0.1234567890123456789012}}
    text = json.dumps(doc).encode()
    parsed = glb.parse_json(text, "m.gltf")
    assert parsed == json.loads(text) and type(parsed["extras"]["id"]) is int  # exact, not a float
    assert glb.parse_json(b"\xef\xbb\xbf" + text + b"  \x00\x00", "m.gltf") == doc  # BOM and GLB padding
    with pytest.raises(ModelError, match=r"m.gltf: JSON: not valid JSON: NaN is not valid JSON"):
        glb.parse_json(b'{"a": NaN}', "m.gltf")
    with pytest.raises(ModelError, match=r"not valid JSON: Expecting ',' delimiter at line 1 column 10"):
        glb.parse_json(b'{"a": [1 2]}', "m.gltf")
    with pytest.raises(ModelError, match="the top level of a glTF file must be a JSON object"):
        glb.parse_json(b"[1]", "m.gltf")


def test_gc_state_is_restored(tmp_path):
    path = _walk(tmp_path)
    assert gc.isenabled()
    skeletal.load(path)
    assert gc.isenabled()
    with pytest.raises(ModelError):
        skeletal.load(_bad(tmp_path))
    assert gc.isenabled()
    gc.disable()
    try:
        skeletal.load(path)
        assert not gc.isenabled()  # somebody else's choice is kept
    finally:
        gc.enable()


def _bad(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    return _walk(bad, (1.0, 0.0, 2.0))


def _morphing(tmp_path):
    """A two-target morphing triangle on a node with a weights channel and a translation channel."""
    b = GltfBuilder()
    pos = b.add_accessor(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32), min_max=True)
    up = b.add_accessor(np.array([[0, 0, 1]] * 3, np.float32), min_max=True)
    side = b.add_accessor(np.array([[1, 0, 0]] * 3, np.float32), min_max=True)
    mesh = b.add_mesh([b.primitive({"POSITION": pos}, targets=[{"POSITION": up}, {"POSITION": side}])],
                      weights=[0.0, 0.0])
    node = b.add_node(name="face", mesh=mesh)
    b.add_scene([node])
    t = np.array([0.0, 1.0, 2.0], np.float32)
    b.add_animation([
        {"node": node, "path": "weights", "times": t, "values": np.float32([[0, 0], [1, 0.5], [0, 1]]),
         "interpolation": "LINEAR"},
        {"node": node, "path": "translation", "times": t, "values": np.float32([[0, 0, 0], [0, 1, 0], [0, 2, 0]]),
         "interpolation": "STEP"},
    ], name="smile")
    return b.write_glb(tmp_path / "face.glb")


def test_morph_weights_channels_are_read_in_bulk(tmp_path, monkeypatch):
    path = _morphing(tmp_path)
    fast = skeletal.load(path)
    assert fast.document.animations[0].packed is not None
    slow = _load_slow(path, monkeypatch)
    _same_clips(fast, slow)
    _same_documents(fast, slow)
    track = fast.clips[0].tracks[0]
    assert track.path == "weights" and track.values.tolist() == [[0, 0], [1, 0.5], [0, 1]]
    assert fast.clips[0].width.tolist() == [2, 3]


def test_one_unusual_animation_leaves_the_others_in_bulk(tmp_path, monkeypatch):
    """Animations are read together when all are plain; one with quantized keys is read channel by
    channel while the others are still packed, and everything matches the checked path."""
    b = GltfBuilder()
    node = b.add_node(name="spin")
    b.add_scene([node])
    t = np.array([0.0, 1.0], np.float32)
    b.add_animation([{"node": node, "path": "translation", "times": t,
                      "values": np.float32([[0, 0, 0], [1, 0, 0]]), "interpolation": "LINEAR"}], name="slide")
    b.add_animation([{"node": node, "path": "rotation", "times": t, "normalized": True,
                      "values": np.int16([[0, 0, 0, 32767], [0, 32767, 0, 0]]), "interpolation": "LINEAR"}], name="turn")
    b.add_animation([{"node": node, "path": "scale", "times": t,
                      "values": np.float32([[1, 1, 1], [2, 2, 2]]), "interpolation": "STEP"}])
    path = b.write_glb(tmp_path / "three.glb")
    fast = skeletal.load(path)
    assert [a.packed is not None for a in fast.document.animations] == [True, False, True]
    assert [c.name for c in fast.clips] == ["slide", "turn", "animation_2"]
    slow = _load_slow(path, monkeypatch)
    _same_clips(fast, slow)
    _same_documents(fast, slow)
