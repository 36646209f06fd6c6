"""The glTF reader's fast path: the twins of the one-by-one node and animation readers.

Each reads the common case (plain nodes; translation/rotation/scale/weights channels over FLOAT
accessors) with plain dict reads and numpy checks over all objects at once, and returns None for
anything unusual or wrong; the one-by-one reader (:mod:`skeletal.io.gltf`,
:mod:`skeletal.io.gltf_animation`) then reads the same objects and words the error. Both paths give
the same Nodes and Channels (tests/test_load_fast.py compares them).

Conventions as :mod:`skeletal.io.gltf`: quaternions xyzw; key times float32 seconds, strictly increasing.

Example::

    >>> _spans(np.array([10, 20]), np.array([2, 3])).tolist()
    [10, 11, 20, 21, 22]
"""

from __future__ import annotations

import math
import operator
from itertools import chain, repeat

import numpy as np

from skeletal.document import Animation, Channel, Mesh, Node, PackedChannels
from skeletal.errors import ModelError
from skeletal.io.accessors import FLOAT
from skeletal.io.gltf_checks import _PATH_WIDTH, INTERPOLATIONS, _ReaderState, bounded_extras
from skeletal.io.jsonobj import codes, plain_ints

_PATH_TYPE = {"translation": "VEC3", "rotation": "VEC4", "scale": "VEC3"}
_SAMPLER, _TARGET, _NODE, _PATH = (operator.itemgetter(k) for k in ("sampler", "target", "node", "path"))
_INPUT, _OUTPUT = operator.itemgetter("input"), operator.itemgetter("output")
_MISSING = object()
#: Node fields :meth:`_FastReader._plain_node` reads (plus ones no reader uses); any other goes the full way.
_PLAIN_NODE_KEYS = frozenset({"name", "children", "translation", "rotation", "scale", "mesh", "skin", "extras",
                              "extensions"})
_NODE_TRS = (("translation", 3, (0.0, 0.0, 0.0)), ("rotation", 4, (0.0, 0.0, 0.0, 1.0)), ("scale", 3, (1.0, 1.0, 1.0)))
_NUMBER_TYPES = frozenset({int, float})
_NAME_TYPES = frozenset({str, type(None)})  # None: absent (an explicit null is told apart)
_LIST_TYPES = frozenset({list, tuple})  # tuple: the defaults
_NO_CHILDREN = ()
_PATH_CODES = {"translation": 0, "rotation": 1, "scale": 2, "weights": 3}  # as skeletal.clip.PATH_CODE
_INTERP_NAMES = ("STEP", "LINEAR", "CUBICSPLINE")  # codes as skeletal.clip.INTERP_CODE
_INTERP_CODES = {name: i for i, name in enumerate(_INTERP_NAMES)}
_CUBIC = _INTERP_CODES["CUBICSPLINE"]
_PATH_CODES_1 = {name: code + 1 for name, code in _PATH_CODES.items()}  # for _codes: 0 is "none of these"
_INTERP_CODES_1 = {name: code + 1 for name, code in _INTERP_CODES.items()}
_PATH_WIDTHS = np.array([3, 4, 3, 0], dtype=np.int64)  # by path code; weights: the node's mesh's targets


class _FastReader(_ReaderState):
    """The fast twins of :class:`skeletal.io.gltf._GltfReader`'s node and animation readers (a mixin
    of it: one instance per read)."""

    def _plain_nodes(self, raw: list[dict]) -> list[Node] | None:
        """Every node at once, when all are the common kind :meth:`_plain_node` reads and the children
        lists are sound (indices in range, nobody its own child, one parent each): fields pulled out with
        one C-level pass each, numbers checked with numpy. None otherwise; then the nodes are read one
        by one, which words the error. The parents are filled in; the cycle check is the caller's."""
        count = len(raw)
        keys = set().union(*raw)  # every key any node has: one pass, and no pass for keys none has
        if not count or not keys <= _PLAIN_NODE_KEYS:
            return None
        names = list(map(dict.get, raw, repeat("name"), repeat(None)))
        children = list(map(dict.get, raw, repeat("children"), repeat(_NO_CHILDREN)))
        refs = [list(map(dict.get, raw, repeat(key), repeat(-1))) for key in ("mesh", "skin")]
        if (not set(map(type, names)) <= _NAME_TYPES or not set(map(type, children)) <= _LIST_TYPES
                or not set(map(type, refs[0] + refs[1])) <= {int}):
            return None
        if None in names and any(d.get("name", "") is None for d in raw):
            return None  # an explicit null name: the full path reports it
        lengths = list(map(len, children))
        flat = list(chain.from_iterable(children))
        if not set(map(type, flat)) <= {int}:
            return None
        try:
            child = np.array(flat, dtype=np.int64)
            mesh = np.array(refs[0], dtype=np.int64)
            skin = np.array(refs[1], dtype=np.int64)
        except OverflowError:
            return None
        owner = np.repeat(np.arange(count), lengths)
        if child.size and (child.min() < 0 or child.max() >= count or (child == owner).any()
                           or np.bincount(child, minlength=count).max() > 1):
            return None
        # -1 stands for "absent": an explicit negative index (which the full path reports) shows as a
        # node that has the key but no index >= 0.
        if (mesh.min() < -1 or mesh.max() >= self.tables.meshes or skin.min() < -1 or skin.max() >= self.tables.skins
                or sum(map(operator.contains, raw, repeat("mesh"))) != int((mesh >= 0).sum())
                or sum(map(operator.contains, raw, repeat("skin"))) != int((skin >= 0).sum())):
            return None
        trs = []
        for key, length, default in _NODE_TRS:
            if key not in keys:
                trs.append(list(np.tile(np.array(default), (count, 1))))  # one row view per node
                continue
            values = list(map(dict.get, raw, repeat(key), repeat(default)))
            if not set(map(type, values)) <= _LIST_TYPES or set(map(len, values)) != {length}:
                return None
            flat = list(chain.from_iterable(values))
            if not set(map(type, flat)) <= _NUMBER_TYPES:
                return None
            try:
                array = np.array(flat, dtype=np.float64).reshape(count, length)
            except OverflowError:
                return None
            if not np.isfinite(array).all():
                return None
            trs.append(list(array))  # one row view per node
        parent = np.full(count, -1, dtype=np.int64)
        parent[child] = owner
        names = [f"node_{i}" if name is None else name for i, name in enumerate(names)]
        if "extras" in keys:
            extras = [bounded_extras(e, self.file, f"nodes[{i}]") for i, e in enumerate(map(dict.get, raw, repeat("extras")))]
        else:
            extras = [{} for _ in range(count)]
        meshes = [None if m < 0 else m for m in refs[0]]
        skins = [None if k < 0 else k for k in refs[1]]
        return list(map(Node, names, map(list, children), trs[0], trs[1], trs[2], repeat(None), meshes, skins,
                        repeat(None), parent.tolist(), extras))

    def _plain_node(self, i: int, d: dict, children: list[int]) -> Node | None:
        """The common node (name, TRS of finite numbers, mesh, skin, extras; no matrix, camera or
        weights) read with plain dict reads, to the same Node :meth:`_node` makes; None for anything
        else or anything wrong, which :meth:`_node` then reads and reports."""
        if not d.keys() <= _PLAIN_NODE_KEYS:
            return None
        name = d.get("name", _MISSING)
        if name is _MISSING:
            name = f"node_{i}"
        elif type(name) is not str:
            return None
        trs = []
        for key, length, default in _NODE_TRS:
            value = d.get(key, _MISSING)
            if value is _MISSING:
                trs.append(np.array(default))
                continue
            if type(value) is not list or len(value) != length or not set(map(type, value)) <= _NUMBER_TYPES:
                return None
            try:
                if not all(map(math.isfinite, value)):
                    return None
            except OverflowError:
                return None
            trs.append(np.array(value, dtype=np.float64))
        refs = []
        for key, size in (("mesh", self.tables.meshes), ("skin", self.tables.skins)):
            value = d.get(key, _MISSING)
            if value is _MISSING:
                refs.append(None)
            elif type(value) is int and 0 <= value < size:
                refs.append(value)
            else:
                return None
        extras = d.get("extras")
        return Node(name=name, children=children, translation=trs[0], rotation=trs[1], scale=trs[2],
                    mesh=refs[0], skin=refs[1], extras=bounded_extras(extras, self.file, f"nodes[{i}]"))

    def _packed_animations(self, raw: list[dict], nodes: list[Node], meshes: list[Mesh]) -> list[Animation] | None:
        """Every animation at once, when each one is plain (a string name or none, arrays of objects for
        samplers and channels, at least one channel) and :meth:`_packed_channels` takes all their
        channels together: the numpy checks and gathers then run once for the file rather than once
        per animation, and each animation gets its slice. None otherwise (then animation by animation)."""
        if len(raw) < 2:
            return None  # one animation: the per-animation path is the same work
        names, channels, samplers, counts, sampler_counts = [], [], [], [], []
        for i, obj in enumerate(raw):
            name = obj.get("name", _MISSING)
            chans, samps = obj.get("channels"), obj.get("samplers")
            # (that every channel and sampler is an object, _packed_channels finds as it reads them)
            if type(chans) is not list or type(samps) is not list or not chans:
                return None
            if name is _MISSING:
                name = f"animation_{i}"
            elif type(name) is not str:
                return None
            names.append(name)
            channels += chans
            samplers += samps
            counts.append(len(chans))
            sampler_counts.append(len(samps))
        count = np.array(counts, dtype=np.int64)
        sampler_count = np.array(sampler_counts, dtype=np.int64)
        offsets = np.zeros(len(raw), np.int64)
        np.cumsum(sampler_count[:-1], out=offsets[1:])
        packed = self._packed_channels(channels, samplers, nodes, meshes,
                                       (np.repeat(sampler_count, count), np.repeat(offsets, count)))
        if packed is None:
            return None
        ends = np.cumsum(count)
        bounds = [0, *ends.tolist()]
        key_start = [0, *packed.key_start[ends].tolist()]  # where each animation's keys and values begin
        value_start = [0, *packed.value_start[ends].tolist()]
        animations = []
        for a, obj in enumerate(raw):
            c0, c1 = bounds[a], bounds[a + 1]
            k0, k1, v0, v1 = key_start[a], key_start[a + 1], value_start[a], value_start[a + 1]
            part = PackedChannels(packed.node[c0:c1], packed.path[c0:c1], packed.interp[c0:c1], packed.width[c0:c1],
                                  packed.key_start[c0 : c1 + 1] - k0, packed.value_start[c0 : c1 + 1] - v0,
                                  packed.times[k0:k1], packed.values[v0:v1], packed.source,
                                  packed.time_at[c0:c1], packed.value_at[c0:c1])
            extras = bounded_extras(obj.get("extras"), self.file, f"animations[{a}]")
            animations.append(Animation.from_packed(names[a], part, extras))
        return animations

    def _packed_channels(self, channels: list[dict], samplers: list[dict], node_list: list[Node],
                         meshes: list[Mesh], sampler_range: tuple[np.ndarray, np.ndarray] | None = None,
                         ) -> PackedChannels | None:
        """All channels of one animation at once, when every one is the common kind (translation,
        rotation, scale or morph weights of a node, FLOAT key times and values in plain bufferViews of
        one buffer, finite values, strictly increasing times): the fields are
        pulled out with one list pass each and checked with numpy over all channels together. None
        when anything is unusual or wrong; then the channels are read one by one, which words the error.
        ``sampler_range``: for the channels of several animations, per channel how many samplers its
        animation has and where they start in ``samplers``.
        No Channel object is made here: :class:`PackedChannels` makes them if anybody asks (views of the
        buffer, a shared input accessor giving one shared times array, as the one-by-one path gives them)."""
        n = len(channels)
        table = self.accessors.plain_float_table() if n and samplers else None
        if table is None:
            return None
        try:
            targets = list(map(_TARGET, channels))
            # path and interpolation names -> codes + 1 (0: anything else, which goes the one-by-one way)
            path = codes(list(map(_PATH, targets)), _PATH_CODES_1) - 1
            interp = codes(list(map(dict.get, samplers, repeat("interpolation"), repeat("LINEAR"))), _INTERP_CODES_1) - 1
            sampler = plain_ints(list(map(_SAMPLER, channels)))
            node = plain_ints(list(map(_NODE, targets)))
            sampler_input = plain_ints(list(map(_INPUT, samplers)))
            sampler_output = plain_ints(list(map(_OUTPUT, samplers)))
        except (KeyError, TypeError, IndexError):
            return None
        if (sampler is None or node is None or sampler_input is None or sampler_output is None
                or path.min() < 0 or interp.min() < 0):
            return None
        n_accessors, n_nodes = len(table.ok), len(node_list)
        if sampler_range is None:  # one animation: its channels name its samplers
            if sampler.min() < 0 or sampler.max() >= len(samplers):
                return None
        else:  # several animations' channels and samplers, one after another: each names its own
            limit, offset = sampler_range
            if sampler.min() < 0 or (sampler >= limit).any():
                return None
            sampler = sampler + offset
        if node.min() < 0 or node.max() >= n_nodes:
            return None
        inp, out = sampler_input[sampler], sampler_output[sampler]
        if min(inp.min(), out.min()) < 0 or max(inp.max(), out.max()) >= n_accessors:
            return None
        interp = interp[sampler]
        weights = path == _PATH_CODES["weights"]
        width = _PATH_WIDTHS[path]
        if weights.any():  # a morph weights channel is as wide as its node's mesh has targets
            for c in np.flatnonzero(weights).tolist():
                mesh = node_list[int(node[c])].mesh
                targets_count = 0 if mesh is None else len(meshes[mesh].primitives[0].targets)
                if not targets_count:
                    return None
                width[c] = targets_count
        keys = table.count[inp]
        rows = keys * np.where(interp == _CUBIC, 3, 1)
        buffer = table.buffer[inp]
        # weights are SCALAR accessors of rows * width elements, the others VECn of rows elements
        if not (table.ok[inp].all() and table.ok[out].all() and (table.components[inp] == 1).all()
                and (table.components[out] == np.where(weights, 1, width)).all()
                and (table.count[out] == rows * np.where(weights, width, 1)).all()
                and (buffer == buffer[0]).all() and (table.buffer[out] == buffer[0]).all()):
            return None
        try:
            floats = self.accessors.buffer_floats(int(buffer[0]))
        except ModelError:
            return None  # the one-by-one path meets (and reports) it in its own order
        if floats is None:
            return None
        # Every channel's keys and values gathered into two flat arrays with one index array each.
        times = _gather(floats, table.start[inp], keys)
        values = _gather(floats, table.start[out], rows * width)
        key_start = np.zeros(n + 1, np.int64)
        np.cumsum(keys, out=key_start[1:])
        steps = times[1:] > times[:-1]
        steps[key_start[1:-1] - 1] = True  # from one channel's last key to the next one's first
        if not (np.isfinite(values).all() and np.isfinite(times).all() and steps.all()):
            return None
        value_start = np.zeros(n + 1, np.int64)
        np.cumsum(rows * width, out=value_start[1:])
        return PackedChannels(node, path, interp, width,
                              key_start, value_start, times, values, floats, table.start[inp], table.start[out])

    def _plain_channel(self, c: dict, samplers: list[dict], n_nodes: int, n_accessors: int) -> Channel | None:
        """The common channel (a translation, rotation or scale of a node, LINEAR/STEP/CUBICSPLINE over
        FLOAT accessors) read with plain dict reads and the same checks as :meth:`_channel`; None for
        anything else or anything wrong, which the full path then reads and reports."""
        s_index = c.get("sampler")
        target = c.get("target")
        if type(s_index) is not int or not 0 <= s_index < len(samplers) or type(target) is not dict:
            return None
        node, path = target.get("node"), target.get("path")
        if type(node) is not int or not 0 <= node < n_nodes or type(path) is not str or path not in _PATH_WIDTH:
            return None
        sampler = samplers[s_index]
        interpolation = sampler.get("interpolation", "LINEAR")
        input_index, output_index = sampler.get("input"), sampler.get("output")
        if (type(interpolation) is not str or interpolation not in INTERPOLATIONS
                or type(input_index) is not int or not 0 <= input_index < n_accessors
                or type(output_index) is not int or not 0 <= output_index < n_accessors):
            return None
        accessors = self.accessors
        input_info, output_info = accessors.info(input_index), accessors.info(output_index)
        keys = input_info.count
        if (input_info.component_type != FLOAT or input_info.type != "SCALAR" or input_info.normalized
                or output_info.component_type != FLOAT or output_info.type != _PATH_TYPE[path]
                or output_info.count != (3 * keys if interpolation == "CUBICSPLINE" else keys)):
            return None
        times = accessors.floats(input_index)
        if input_index not in self._checked_times:
            if not (np.isfinite(times[0]) and np.isfinite(times[-1]) and (times[1:] > times[:-1]).all()):
                return None  # not finite or not increasing: the full path says which key
            self._checked_times.add(input_index)
        values = accessors.floats(output_index)
        if not np.isfinite(values).all():
            return None  # NaN/inf key values: the full path says which element
        return Channel(node=node, path=path, interpolation=interpolation, times=times, values=values)


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``data[starts[i] : starts[i] + lengths[i]]`` of every span, one after another, as a new array:
    one copy when the spans follow each other in ``data`` (channels written in order), else a gather."""
    if len(starts) and (starts[1:] == starts[:-1] + lengths[:-1]).all():
        return data[int(starts[0]) : int(starts[-1] + lengths[-1])].copy()
    return data[_spans(starts, lengths)]


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` of every span, one after another."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


