"""The glTF reader's one-by-one animation readers: channels (node TRS and morph weights),
KHR_animation_pointer channels and named float curves, every count, order and value checked.

Each animation is first offered to the fast twins (:mod:`skeletal.io.gltf_fast`); what they decline
is read here, which words the error naming the file and the object. Key times are float32 seconds,
strictly increasing; rotation values xyzw quaternions; a CUBICSPLINE sampler stores 3 rows per key
(in-tangent, value, out-tangent).

Example::

    >>> from skeletal.io.gltf import read_gltf
    >>> doc = read_gltf("Fox.glb")  # doctest: +SKIP
    >>> doc.animations[0].channels[0].interpolation  # doctest: +SKIP
    'LINEAR'
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from skeletal.document import Animation, Channel, Mesh, Node, PropertyTrack
from skeletal.errors import ModelError
from skeletal.io.accessors import AccessorInfo
from skeletal.io.gltf_checks import (
    _PATH_WIDTH,
    EXPECT_KEY_TIMES,
    EXPECT_OUTPUT,
    EXPECT_POINTER,
    INTERPOLATIONS,
    _extras,
)
from skeletal.io.gltf_fast import _FastReader
from skeletal.io.jsonobj import JsonObject
from skeletal.io.pointer import NODE_TRACK_PATHS, PointerTarget, curve_pointer, parse_pointer, pointer_target

KHR_ANIMATION_POINTER = "KHR_animation_pointer"


class _AnimationReader(_FastReader):
    """The one-by-one animation readers of :class:`skeletal.io.gltf._GltfReader` (a mixin of it: one
    instance per read), after the fast twins of :class:`~skeletal.io.gltf_fast._FastReader`."""

    # -- animations -----------------------------------------------------------------------------
    def _animation(self, a_index: int, obj: JsonObject, nodes: list[Node], meshes: list[Mesh]) -> Animation:
        name = obj.string("name", f"animation_{a_index}")
        samplers = obj.objects("samplers", required=True)
        n_nodes, n_accessors = len(nodes), len(self.accessors)
        channel_objects = obj.objects("channels", required=True)
        packed = self._packed_channels(channel_objects.raw, samplers.raw, nodes, meshes)
        if packed is not None:
            return Animation.from_packed(name, packed, _extras(obj))
        channels: list[Channel] = []
        properties: list[PropertyTrack] = []
        for c_index, c_raw in enumerate(channel_objects.raw):
            plain = self._plain_channel(c_raw, samplers.raw, n_nodes, n_accessors)
            if plain is not None:
                channels.append(plain)
                continue
            c = channel_objects[c_index]
            s_index = c.int("sampler")
            if s_index >= len(samplers):
                c.fail(f"refers to sampler {s_index}, but animation {name!r} has {len(samplers)} samplers", "sampler")
            target = c.object("target", required=True)
            path = target.string("path")
            if path == "pointer" and target.extension(KHR_ANIMATION_POINTER) is not None:
                read = self._pointer_channel(c, target, name, s_index, samplers[s_index], nodes, meshes)
                if isinstance(read, Channel):
                    channels.append(read)
                elif read is not None:
                    properties.append(read)
                continue
            if not target.has("node"):
                continue  # the spec allows this: the target is defined by an extension we do not implement
            node = target.index("node", "nodes", len(nodes))
            if path in _PATH_WIDTH:
                width = _PATH_WIDTH[path]
            elif path == "weights":
                mesh = nodes[node].mesh
                width = 0 if mesh is None else len(meshes[mesh].primitives[0].targets)
                if width == 0:
                    target.fail(f"a weights channel targets nodes[{node}], which has no mesh with morph targets")
            else:
                target.fail(f"unknown path {path!r} (expected translation, rotation, scale or weights)", "path")
            channels.append(self._channel(c, name, s_index, samplers[s_index], node, path, width))
        animation = Animation(name=name, channels=channels, extras=_extras(obj))
        animation.properties = properties
        return animation

    def _pointer_channel(self, c: JsonObject, target: JsonObject, anim_name: str, s_index: int, sampler: JsonObject,
                         nodes: list[Node], meshes: list[Mesh]) -> Channel | PropertyTrack | None:
        """A KHR_animation_pointer channel: a node's TRS or weights as an ordinary :class:`Channel`,
        a supported property (see :data:`skeletal.properties.POINTER_KINDS`) as a
        :class:`PropertyTrack` (its rest value noted in ``pointer_rest``), anything else None after one
        warning per pointer."""
        ext = target.extension(KHR_ANIMATION_POINTER)
        assert ext is not None
        pointer = ext.string("pointer")
        parsed = parse_pointer(pointer)
        if parsed is not None and parsed[0] == "node" and parsed[2] in NODE_TRACK_PATHS:
            node, path = parsed[1], parsed[2]
            if node >= len(nodes):
                ext.fail(f"{pointer} names nodes[{node}], which does not exist (the file has {len(nodes)})", "pointer")
            if path == "weights":
                mesh = nodes[node].mesh
                width = 0 if mesh is None else len(meshes[mesh].primitives[0].targets)
                if width == 0:
                    ext.fail(f"{pointer}: nodes[{node}] has no mesh with morph targets", "pointer")
            else:
                width = _PATH_WIDTH[path]
            return self._channel(c, anim_name, s_index, sampler, node, path, width)
        found = pointer_target(pointer)
        if found is None:
            if pointer not in self._pointers_warned:
                self._pointers_warned.add(pointer)
                warnings.warn(f"{os.path.basename(self.file)}: {c.where}: KHR_animation_pointer {pointer} is not a "
                              "property skeletal animates; channel ignored", stacklevel=5)
            return None
        rest = self._pointer_rest(ext, pointer, found)
        about = f"animation {anim_name!r}, samplers[{s_index}]"
        interpolation = sampler.string("interpolation", "LINEAR")
        if interpolation not in INTERPOLATIONS:
            raise ModelError(self.file, c.where, f"{about}: unknown interpolation {interpolation!r} "
                                                  f"(expected {', '.join(INTERPOLATIONS)})")
        input_info = self._accessor(sampler, "input", EXPECT_KEY_TIMES)
        output_info = self._accessor(sampler, "output", EXPECT_POINTER[found.width])
        keys = input_info.count
        rows = 3 * keys if interpolation == "CUBICSPLINE" else keys
        if output_info.count != rows:
            raise ModelError(self.file, c.where, f"{about}: output accessors[{output_info.index}] has "
                                                  f"{output_info.count} elements, expected {rows} for {keys} keys of {pointer}")
        times = self.accessors.floats(input_info.index)
        if input_info.index not in self._checked_times:
            self._check_times(c, about, input_info, times)
            self._checked_times.add(input_info.index)
        values = np.asarray(self.accessors.floats(output_info.index), np.float32).reshape(rows, found.width)
        if not np.isfinite(values).all():
            k = int(np.argmin(np.isfinite(values).all(axis=1)))
            raise ModelError(self.file, c.where, f"{about}: output accessors[{output_info.index}] element {k} is not finite")
        if found.property == "extensions/KHR_node_visibility/visible":
            # a boolean: switched, never blended (as three.js's BooleanKeyframeTrack); any non-zero is true
            values = (values[1::3] if interpolation == "CUBICSPLINE" else values) != 0
            interpolation = "STEP"
        self.pointer_rest.setdefault(pointer, rest)
        return PropertyTrack(pointer, interpolation, times, values)

    def _curves(self, obj: JsonObject) -> list[PropertyTrack]:
        """An animation's named float curves (see :mod:`skeletal.io.pointer`, ``curve/<name>``): samplers
        no channel uses whose ``extras.curve`` names them (SCALAR outputs), and the inline ones of the
        animation's ``extras.curves`` (``{name: {"times": [...], "values": [...], "interpolation": ...}}``)."""
        raw_samplers = obj.raw("samplers")
        raw_channels = obj.raw("channels")
        if not (isinstance(obj.raw("extras"), dict) and "curves" in obj.raw("extras")) and not (
                isinstance(raw_samplers, list) and any(isinstance(s, dict) and isinstance(s.get("extras"), dict)
                                                       and "curve" in s["extras"] for s in raw_samplers)):
            return []  # the common case: no curves, nothing to look at
        curves: list[PropertyTrack] = []
        used = {c.get("sampler") for c in raw_channels if isinstance(c, dict)} if isinstance(raw_channels, list) else set()
        for s_index, sampler in enumerate(obj.objects("samplers")):
            extras = sampler.raw("extras")
            if s_index in used or not isinstance(extras, dict) or "curve" not in extras:
                continue
            name = sampler.object("extras").string("curve")
            interpolation = sampler.string("interpolation", "LINEAR")
            if interpolation not in INTERPOLATIONS:
                sampler.fail(f"unknown interpolation {interpolation!r}", "interpolation")
            input_info = self._accessor(sampler, "input", EXPECT_KEY_TIMES)
            output_info = self._accessor(sampler, "output", EXPECT_POINTER[1])
            rows = input_info.count * (3 if interpolation == "CUBICSPLINE" else 1)
            if output_info.count != rows:
                sampler.fail(f"curve {name!r}: {output_info.count} values for {input_info.count} keys ({interpolation})", "output")
            times = self.accessors.floats(input_info.index)
            self._check_times(sampler, f"curve {name!r}", input_info, times)
            curves.append(self._curve(sampler, name, interpolation, times, self.accessors.floats(output_info.index)))
        inline = obj.object("extras").raw("curves", {})
        if not isinstance(inline, dict):
            obj.object("extras").fail("expected an object of named curves", "curves")
        holder = obj.object("extras").object("curves")
        for name in inline:
            curve = holder.object(name)
            interpolation = curve.string("interpolation", "LINEAR")
            if interpolation not in INTERPOLATIONS:
                curve.fail(f"unknown interpolation {interpolation!r}", "interpolation")
            seconds = curve.numbers("times")
            if np.abs(seconds).max(initial=0.0) > float(np.finfo(np.float32).max):
                curve.fail("a key time is too large for float32", "times")
            times = seconds.astype(np.float32)
            values = curve.numbers("values")
            if not len(times) or len(values) != len(times) * (3 if interpolation == "CUBICSPLINE" else 1):
                curve.fail(f"{len(values)} values for {len(times)} keys ({interpolation})", "values")
            if (np.diff(times) <= 0).any():
                curve.fail("key times are not strictly increasing (as float32)", "times")
            curves.append(self._curve(curve, name, interpolation, times, values))
        return curves

    def _curve(self, where: JsonObject, name: str, interpolation: str, times, values) -> PropertyTrack:
        values = np.asarray(values)
        if values.dtype == np.float64 and np.abs(values).max(initial=0.0) > float(np.finfo(np.float32).max):
            where.fail(f"curve {name!r} has a value too large for float32")
        values = values.astype(np.float32).reshape(-1, 1)
        if not np.isfinite(values).all():
            where.fail(f"curve {name!r} has a value that is not finite")
        pointer = curve_pointer(name)
        self.pointer_rest.setdefault(pointer, np.zeros(1))
        return PropertyTrack(pointer, interpolation, times, values)

    def _pointer_rest(self, ext: JsonObject, pointer: str, found: PointerTarget) -> np.ndarray:
        """The value ``pointer`` names before animation: the file's, or the schema default when the
        property is absent. The object it belongs to (material, light, camera, node, and the
        ``perspective``/``orthographic``/``spot`` part) must exist."""
        table = {"node": ("nodes", self.tables.nodes), "material": ("materials", self.tables.materials),
                 "camera": ("cameras", self.tables.cameras)}.get(found.kind)
        if table is None:  # a light
            lights = self.root.data.get("extensions", {}).get("KHR_lights_punctual", {}).get("lights", [])
            table = ("KHR_lights_punctual lights", len(lights) if isinstance(lights, list) else 0)
            holder: object = lights
        else:
            holder = self.root.data.get(table[0], [])
        if found.index >= table[1]:
            ext.fail(f"{pointer} names {table[0]}[{found.index}], which does not exist (the file has {table[1]})", "pointer")
        value: object = holder[found.index]  # type: ignore[index]
        parts = found.property.split("/")
        for depth, part in enumerate(parts):
            if not isinstance(value, dict):
                ext.fail(f"{pointer}: {'/'.join(parts[:depth])} is not an object", "pointer")
            if part not in value:
                if found.kind in ("camera", "light") and part in ("perspective", "orthographic", "spot"):
                    # the camera's projection, the light's spot cone: the pointer names what is not there
                    ext.fail(f"{pointer}: {table[0]}[{found.index}] has no {part}", "pointer")
                return np.array(found.default, np.float64)  # absent (or its extension object is): the default
            value = value[part]
        if isinstance(value, bool):
            return np.array([1.0 if value else 0.0])
        numbers = value if isinstance(value, list) else [value]
        if len(numbers) != found.width or not all(type(v) in (int, float) for v in numbers) \
                or not all(map(math.isfinite, numbers)):
            ext.fail(f"{pointer}: the file's value {value!r} is not {found.width} finite number(s)", "pointer")
        return np.array(numbers, np.float64)

    def _channel(self, c: JsonObject, anim_name: str, s_index: int, sampler: JsonObject,
                 node: int, path: str, width: int) -> Channel:
        """One channel: its sampler's key times and values, every count and order checked."""
        about = f"animation {anim_name!r}, samplers[{s_index}]"
        interpolation = sampler.string("interpolation", "LINEAR")
        if interpolation not in INTERPOLATIONS:
            raise ModelError(self.file, c.where, f"{about}: unknown interpolation {interpolation!r} "
                                                  f"(expected {', '.join(INTERPOLATIONS)})")
        input_info = self._accessor(sampler, "input", EXPECT_KEY_TIMES)
        output_info = self._accessor(sampler, "output", EXPECT_OUTPUT[path])
        keys = input_info.count
        rows = 3 * keys if interpolation == "CUBICSPLINE" else keys
        expected = rows * (width if path == "weights" else 1)
        if output_info.count != expected:
            raise ModelError(self.file, c.where, (
                f"{about}: output accessors[{output_info.index}] has {output_info.count} elements, expected "
                f"{expected} for {keys} keys of {path}" + (" (CUBICSPLINE stores 3 per key)" if rows != keys else "")
            ))
        times = self.accessors.floats(input_info.index)
        if input_info.index not in self._checked_times:  # samplers often share one input accessor
            self._check_times(c, about, input_info, times)
            self._checked_times.add(input_info.index)
        values = self.accessors.floats(output_info.index).reshape(rows, width)
        finite = np.isfinite(values).all(axis=1)
        if not finite.all():  # NaN/inf key values would poison every pose sampled near them (found by fuzzing)
            k = int(np.argmin(finite))
            raise ModelError(self.file, c.where, f"{about}: output accessors[{output_info.index}] element {k} is not "
                                                  f"finite ({', '.join(f'{v:g}' for v in values[k])})")
        return Channel(node=node, path=path, interpolation=interpolation, times=times, values=values)

    def _check_times(self, c: JsonObject, about: str, info: AccessorInfo, times: np.ndarray) -> None:
        finite = np.isfinite(times)
        if not finite.all():
            k = int(np.argmin(finite))
            raise ModelError(self.file, c.where, f"{about}: input accessors[{info.index}] key {k} time is {times[k]}")
        steps = np.diff(times)
        if steps.size and not (steps > 0).all():
            k = int(np.argmin(steps > 0)) + 1
            raise ModelError(self.file, c.where, (
                f"{about}: key times of input accessors[{info.index}] are not strictly increasing: "
                f"key {k} (t={float(times[k])}) follows key {k - 1} (t={float(times[k - 1])})"
            ))
