"""glTF accessors -> numpy arrays, in every layout the glTF 2.0 spec allows.

Supported: component types BYTE/UNSIGNED_BYTE/SHORT/UNSIGNED_SHORT/UNSIGNED_INT/FLOAT, ``normalized``,
``byteOffset`` on the accessor and on its bufferView, ``byteStride`` (interleaved data), types SCALAR,
VEC2-4 and MAT2-4 (with the 4-byte column alignment the spec requires for 1- and 2-byte components),
sparse accessors (over a bufferView, or over zeros when there is none) and accessors with neither
bufferView nor sparse (all zeros).

Shapes: SCALAR -> (count,), VECn -> (count, n), MATn -> (count, n, n) indexed ``[k, column, row]``,
i.e. as glTF stores them (column-major); callers transpose to skeletal's row-major convention.

Zero-copy: the raw array is an ``np.ndarray`` over the bufferView's memory (a view of the GLB's bytes,
read-only), strided when the data is interleaved; it is copied only when misaligned. A FLOAT accessor
that is not sparse is returned as that view.

Safety: every range is checked before any array is made: ``byteOffset + stride*(count-1) + element
size`` must fit the bufferView, sparse indices and values must fit theirs, and an accessor that no
bufferView backs (zeros, or sparse over zeros) may not be bigger than :func:`zero_fill_limit` allows.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from skeletal.io.buffers import BinaryData
from skeletal.io.jsonobj import JsonObject, codes, plain_ints

BYTE, UNSIGNED_BYTE, SHORT, UNSIGNED_SHORT, UNSIGNED_INT, FLOAT = 5120, 5121, 5122, 5123, 5125, 5126

#: componentType -> little-endian numpy dtype (glTF binary data is always little-endian).
COMPONENT_DTYPES: dict[int, np.dtype] = {
    BYTE: np.dtype("i1"),
    UNSIGNED_BYTE: np.dtype("u1"),
    SHORT: np.dtype("<i2"),
    UNSIGNED_SHORT: np.dtype("<u2"),
    UNSIGNED_INT: np.dtype("<u4"),
    FLOAT: np.dtype("<f4"),
}
COMPONENT_NAMES = {
    BYTE: "BYTE", UNSIGNED_BYTE: "UNSIGNED_BYTE", SHORT: "SHORT",
    UNSIGNED_SHORT: "UNSIGNED_SHORT", UNSIGNED_INT: "UNSIGNED_INT", FLOAT: "FLOAT",
}

#: type -> (columns, rows): vectors are one column of n rows, MATn is n columns of n rows.
TYPE_SHAPES: dict[str, tuple[int, int]] = {
    "SCALAR": (1, 1), "VEC2": (1, 2), "VEC3": (1, 3), "VEC4": (1, 4),
    "MAT2": (2, 2), "MAT3": (3, 3), "MAT4": (4, 4),
}

#: Normalised integer decoding, glTF 2.0 spec "Animations"/"Meshes": f = max(c / (2^(b-1) - 1), -1)
#: for signed, f = c / (2^b - 1) for unsigned components.
NORMALIZATION_DIVISORS = {BYTE: 127.0, UNSIGNED_BYTE: 255.0, SHORT: 32767.0, UNSIGNED_SHORT: 65535.0}

#: Arrays that no bufferView backs may use at most this many bytes regardless of the file's size...
ZERO_FILL_FLOOR = 16 << 20
#: ...or this many times the binary data read so far, whichever is larger.
ZERO_FILL_RATIO = 64


def zero_fill_limit(loaded_bytes: int) -> int:
    """The most bytes an accessor with no bufferView (zeros or sparse-over-zeros) may occupy.

    Such an accessor's ``count`` is not justified by data in the file, so it is bounded: 16 MiB, or 64
    times the binary data loaded so far when that is larger. Real files use these for morph targets and
    the like, whose size matches other, data-backed accessors of the same file.
    """
    return max(ZERO_FILL_FLOOR, ZERO_FILL_RATIO * loaded_bytes)


def _align4(n: int) -> int:
    return (n + 3) & ~3


@dataclass(frozen=True)
class AccessorInfo:
    """The validated header of one accessor (what it holds, not its data)."""

    index: int
    component_type: int
    type: str
    count: int
    normalized: bool

    @property
    def where(self) -> str:
        return f"accessors[{self.index}]"

    @property
    def dtype(self) -> np.dtype:
        return COMPONENT_DTYPES[self.component_type]

    @property
    def components(self) -> int:
        columns, rows = TYPE_SHAPES[self.type]
        return columns * rows

    @property
    def column_stride(self) -> int:
        """Bytes from one matrix column to the next: matrix columns start on 4-byte boundaries."""
        columns, rows = TYPE_SHAPES[self.type]
        size = rows * self.dtype.itemsize
        return _align4(size) if columns > 1 else size

    @property
    def element_size(self) -> int:
        """Bytes of one element, padding included (MAT2 of BYTE: 8, MAT3 of BYTE: 12, MAT3 of SHORT: 24)."""
        columns, _rows = TYPE_SHAPES[self.type]
        return columns * self.column_stride

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one element in the returned arrays."""
        columns, rows = TYPE_SHAPES[self.type]
        if self.type == "SCALAR":
            return ()
        return (rows,) if columns == 1 else (columns, rows)

    def describe(self) -> str:
        norm = " normalized" if self.normalized else ""
        return f"{self.type} of {COMPONENT_NAMES[self.component_type]}{norm}"


def _strided_array(info: AccessorInfo, data: memoryview, offset: int, stride: int, count: int) -> np.ndarray:
    """``count`` elements of ``info``'s layout at ``offset`` in ``data``, ``stride`` bytes apart.

    The caller has checked the range. The result is a view of ``data`` (copied only if misaligned).
    """
    itemsize = info.dtype.itemsize
    columns, _rows = TYPE_SHAPES[info.type]
    shape = (count, *info.shape)
    if info.type == "SCALAR":
        strides: tuple[int, ...] = (stride,)
    elif columns == 1:
        strides = (stride, itemsize)
    else:
        strides = (stride, info.column_stride, itemsize)
    array = np.ndarray(shape, dtype=info.dtype, buffer=data, offset=offset, strides=strides)
    if not array.flags.aligned:
        array = array.copy()  # numba kernels and fast numpy paths want aligned data
    return array


def decode_float32(raw: np.ndarray, info: AccessorInfo) -> np.ndarray:
    """Accessor data as float32: FLOAT as is, normalised integers decoded per spec, other integers cast."""
    if info.component_type == FLOAT:
        return raw if raw.dtype == np.float32 else raw.astype(np.float32)
    out = raw.astype(np.float32)
    if info.normalized:
        out /= np.float32(NORMALIZATION_DIVISORS[info.component_type])
        if info.component_type in (BYTE, SHORT):
            np.maximum(out, np.float32(-1.0), out=out)  # -128/127 and -32768/32767 clamp to -1
    return out


#: Accessor types whose elements are tightly packed at any stride, of any component type (no column
#: padding: MAT4 columns are 4, 8 or 16 bytes, MAT2/MAT3 of 1- and 2-byte components pad): components.
_PLAIN_FLOAT_COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


class Accessors:
    """Reads the accessors of one document; arrays are cached so shared accessors are read once."""

    def __init__(self, root: JsonObject, binary: BinaryData):
        self.file = root.file
        self.objects = root.objects("accessors")
        self.binary = binary
        self._info: dict[int, AccessorInfo] = {}
        self._raw: dict[int, np.ndarray] = {}
        self._float: dict[int, np.ndarray] = {}
        self._table: PlainFloatTable | None | bool = False  # False: not built yet
        self._floats_of: dict[int, np.ndarray | None] = {}  # buffer -> its float32 view (see buffer_floats)

    def __len__(self) -> int:
        return len(self.objects)

    def info(self, index: int) -> AccessorInfo:
        """The checked header of accessor ``index`` (the caller has checked that it exists)."""
        cached = self._info.get(index)
        if cached is not None:
            return cached
        raw = self.objects.raw[index]
        component_type, type_, count = raw.get("componentType"), raw.get("type"), raw.get("count")
        normalized = raw.get("normalized", False)
        if (type(component_type) is int and component_type in COMPONENT_DTYPES and type(type_) is str
                and type_ in TYPE_SHAPES and type(count) is int and count >= 1 and type(normalized) is bool
                and not (normalized and component_type in (FLOAT, UNSIGNED_INT))):
            info = AccessorInfo(index, component_type, type_, count, normalized)  # plain and valid
            self._info[index] = info
            return info
        obj = self.objects[index]
        component_type = obj.int("componentType", minimum=None)
        if component_type not in COMPONENT_DTYPES:
            obj.fail(f"unknown componentType {component_type}", "componentType")
        type_ = obj.string("type")
        if type_ not in TYPE_SHAPES:
            obj.fail(f"unknown type {type_!r}", "type")
        count = obj.int("count", minimum=1)
        normalized = obj.boolean("normalized", False)
        if normalized and component_type in (FLOAT, UNSIGNED_INT):
            obj.fail(f"normalized must not be true for {COMPONENT_NAMES[component_type]} components", "normalized")
        info = AccessorInfo(index, component_type, type_, count, normalized)
        self._info[index] = info
        return info

    def raw(self, index: int) -> np.ndarray:
        """Accessor ``index``'s data in its stored component type, shaped as the module doc says.

        A view of the file's bytes when possible (read-only); sparse and zero accessors are new arrays.
        """
        cached = self._raw.get(index)
        if cached is not None:
            return cached
        info = self.info(index)
        plain = self._plain_dense(index, info)
        if plain is not None:
            return plain
        obj = self.objects[index]
        sparse = obj.object("sparse") if obj.has("sparse") else None
        if obj.has("bufferView"):
            array = self._read_dense(obj, info)
        else:
            if obj.has("byteOffset"):
                obj.fail("byteOffset is given but there is no bufferView", "byteOffset")
            self._check_zero_fill(obj, info)
            array = np.zeros((info.count, *info.shape), dtype=info.dtype)
        if sparse is not None:
            # the dense copy is memory the file does not back (its base is zeros or a view of the file)
            self.binary.budget.charge(info.count * info.element_size, info.where,
                                      f"sparse count {info.count} of {info.describe()} made dense")
            array = self._apply_sparse(sparse, info, array)
        self._raw[index] = array
        return array

    def floats(self, index: int) -> np.ndarray:
        """Accessor ``index`` as float32, normalised integers decoded per spec."""
        cached = self._float.get(index)
        if cached is None:
            cached = self._plain_float(index)
            if cached is None:
                cached = decode_float32(self.raw(index), self.info(index))
            self._float[index] = cached
        return cached

    def _plain_float(self, index: int) -> np.ndarray | None:
        """The common case in a few operations: a dense, tightly packed FLOAT accessor over a plain
        bufferView (see :meth:`_plain_dense`). Animations have one accessor (and often one bufferView)
        per channel, so this is most of a model's accessors."""
        info = self.info(index)
        if info.component_type != FLOAT or info.normalized:
            return None
        table = self._table
        if isinstance(table, PlainFloatTable) and table.ok[index]:  # its range was checked with the others
            floats = self.buffer_floats(int(table.buffer[index]))
            if floats is not None:
                start, count, components = int(table.start[index]), info.count, int(table.components[index])
                array = floats[start : start + components * count]
                if components > 1:
                    array = array.reshape((count, 4, 4) if components == 16 else (count, components))
                self._raw[index] = array
                return array
        return self._plain_dense(index, info)

    def buffer_floats(self, buffer: int) -> np.ndarray | None:
        """Buffer ``buffer``'s bytes as float32 (a view; None when the buffer has no data or is not
        4-byte aligned), made once per buffer. Loading the buffer raises as :meth:`BinaryData.buffer`."""
        cached = self._floats_of.get(buffer, False)
        if cached is False:
            data = self.binary.buffer(buffer)
            cached = None
            if data is not None:
                cached = np.frombuffer(data, np.float32, len(data) // 4)
                if not cached.flags.aligned:
                    cached = None
            self._floats_of[buffer] = cached
        return cached  # type: ignore[return-value]

    def _plain_dense(self, index: int, info: AccessorInfo) -> np.ndarray | None:
        """Accessor ``index``'s data when it is dense and tightly packed (SCALAR, VEC2-4 or MAT4, no
        sparse) inside a plain bufferView, aligned for its component type: a view
        of the file's bytes, remembered as its raw array. What :meth:`raw` and :meth:`BinaryData.view`
        would check is checked here with plain dict reads; anything unusual (or wrong) returns None so
        that the full path reads it and words the error."""
        components = _PLAIN_FLOAT_COMPONENTS.get(info.type, 0)
        itemsize = info.dtype.itemsize
        if components == 0:
            return None
        obj = self.objects.raw[index]
        view_index = obj.get("bufferView")
        offset = obj.get("byteOffset", 0)
        if "sparse" in obj or type(view_index) is not int or type(offset) is not int or offset < 0 or offset % itemsize:
            return None
        data = self.binary.plain_view(view_index)
        if data is None:
            return None
        count = info.count
        if offset + itemsize * components * count > len(data):
            return None
        array = np.frombuffer(data, info.dtype, components * count, offset)
        if components > 1:
            array = array.reshape((count, 4, 4) if components == 16 else (count, components))
        if not array.flags.aligned:
            array = array.copy()
        self._raw[index] = array
        return array

    def plain_float_table(self) -> PlainFloatTable | None:
        """Where every accessor of the common kind lies (see :class:`PlainFloatTable`), worked out for
        all accessors at once with a few list passes and numpy; built on first use, None when the
        document has a value numpy cannot hold (then callers read accessor by accessor)."""
        if self._table is False:
            self._table = _plain_float_table(self.objects.raw, self.binary.views.raw, self.binary.buffers.raw)
        return self._table  # type: ignore[return-value]

    def uints(self, index: int) -> np.ndarray:
        """Accessor ``index`` as uint32 (indices, joints); a view when stored as UNSIGNED_INT."""
        return self.raw(index).astype(np.uint32, copy=False)

    # -- internals ------------------------------------------------------------------------------
    def _read_dense(self, obj: JsonObject, info: AccessorInfo) -> np.ndarray:
        view_index = obj.index("bufferView", "bufferViews", len(self.binary.views))
        offset = obj.int("byteOffset", 0)
        view = self.binary.view(view_index)
        element = info.element_size
        stride = element if view.stride is None else view.stride
        if stride < element:
            obj.fail(f"bufferViews[{view_index}] byteStride {stride} is smaller than one {info.describe()} element ({element} bytes)")
        needed = offset + stride * (info.count - 1) + element
        if needed > len(view.data):
            obj.fail(f"count {info.count} at byteOffset {offset} needs {needed} bytes, "
                     f"bufferViews[{view_index}] has {len(view.data)}")
        return _strided_array(info, view.data, offset, stride, info.count)

    def _check_zero_fill(self, obj: JsonObject, info: AccessorInfo) -> None:
        size = info.count * info.element_size
        limit = zero_fill_limit(self.binary.loaded_bytes)
        if size > limit:
            obj.fail(f"count {info.count} of {info.describe()} with no bufferView would need {size} bytes of zeros; "
                     f"refusing more than {limit} for a file with {self.binary.loaded_bytes} bytes of binary data")
        if obj.has("sparse"):
            return  # charged once, for the dense copy the sparse values are written into
        self.binary.budget.charge(size, info.where, f"count {info.count} of {info.describe()} with no bufferView (zeros)")

    def _sparse_part(self, part: JsonObject, info: AccessorInfo, count: int, index_type: int | None) -> np.ndarray:
        """The tightly packed ``indices`` (index_type given) or ``values`` of a sparse accessor."""
        view_index = part.index("bufferView", "bufferViews", len(self.binary.views))
        offset = part.int("byteOffset", 0)
        view = self.binary.view(view_index)
        if index_type is not None:
            layout = AccessorInfo(info.index, index_type, "SCALAR", count, False)
        else:
            layout = info
        needed = offset + count * layout.element_size
        if needed > len(view.data):
            part.fail(f"sparse count {count} at byteOffset {offset} needs {needed} bytes, "
                      f"bufferViews[{view_index}] has {len(view.data)}")
        # Sparse data is tightly packed whatever the view's byteStride (which the spec forbids here).
        return _strided_array(layout, view.data, offset, layout.element_size, count)

    def _apply_sparse(self, sparse: JsonObject, info: AccessorInfo, base: np.ndarray) -> np.ndarray:
        count = sparse.int("count", minimum=1)
        if count > info.count:
            sparse.fail(f"sparse count {count} is more than the accessor's count {info.count}", "count")
        indices_obj = sparse.object("indices", required=True)
        index_type = indices_obj.int("componentType", minimum=None)
        if index_type not in (UNSIGNED_BYTE, UNSIGNED_SHORT, UNSIGNED_INT):
            indices_obj.fail(f"componentType {index_type} must be UNSIGNED_BYTE, UNSIGNED_SHORT or UNSIGNED_INT", "componentType")
        indices = self._sparse_part(indices_obj, info, count, index_type)
        values = self._sparse_part(sparse.object("values", required=True), info, count, None)
        bad = np.flatnonzero(indices >= info.count)
        if bad.size:
            indices_obj.fail(f"sparse index {int(indices[bad[0]])} (entry {int(bad[0])}) is out of range for count {info.count}")
        out = np.array(base, copy=True)  # the base may be a read-only view of the file
        out[indices] = values
        return out


@dataclass(frozen=True)
class PlainFloatTable:
    """Per accessor: whether it is a dense, tightly packed, non-sparse FLOAT accessor of type SCALAR,
    VEC2-4 or MAT4 (``ok``) lying 4-byte aligned inside a plain bufferView (no byteStride, no
    extension, in range of its buffer's declared byteLength); then its ``buffer``, its first float
    ``start`` (byte offset / 4 from the buffer's start), ``components`` per element and ``count``.
    These are exactly the accessors :meth:`Accessors.floats` reads by its plain path; for the others
    ``ok`` is False and the other columns mean nothing. The buffer's data is not looked at."""

    ok: np.ndarray  # (A,) bool
    buffer: np.ndarray  # (A,) int64
    start: np.ndarray  # (A,) int64
    components: np.ndarray  # (A,) int64
    count: np.ndarray  # (A,) int64


#: Larger offsets and counts than this are left to the one-by-one path (they cannot fit a real file,
#: and keeping them out keeps the int64 arithmetic below exact).
_TABLE_LIMIT = 1 << 40


def _int_column(values: list | tuple, default: int = -1) -> np.ndarray | None:
    """A list of JSON values as int64, anything not a plain int (or too large) as ``default``."""
    column = plain_ints(values)
    if column is None:
        values = [v if type(v) is int else default for v in values]
        try:
            column = np.array(values, dtype=np.int64).reshape(-1)
        except OverflowError:
            return None
    if column.size and (column.max() > _TABLE_LIMIT or column.min() < -1):
        column = np.where((column > _TABLE_LIMIT) | (column < -1), default, column)
    return column


def _key_column(objects: list[dict], key: str, absent: int, keys: set) -> np.ndarray | None:
    """Field ``key`` of every object as an int64 column (see :func:`_int_column`), ``absent`` where an
    object lacks it. ``keys``: every key any of the objects has; a key none has costs no pass."""
    if key not in keys:
        return np.full(len(objects), absent, dtype=np.int64)
    try:  # the usual case, every object has the key (glTF requires most of these)
        values = list(map(operator.itemgetter(key), objects))
    except KeyError:
        values = list(map(dict.get, objects, repeat(key), repeat(absent)))
    return _int_column(values)


def _field(objects: list[dict], key: str, default: object = None) -> list:
    """``[o.get(key, default) for o in objects]``, without a Python loop."""
    return list(map(dict.get, objects, repeat(key), repeat(default)))


def _flag(objects: list[dict], key: str, keys: set) -> np.ndarray:
    """Whether each object has ``key``, as a bool array (``keys``: every key any of them has)."""
    if key not in keys:
        return np.zeros(len(objects), dtype=bool)
    return np.fromiter(map(operator.contains, objects, repeat(key)), dtype=bool, count=len(objects))


#: componentType -> 1 for FLOAT (0 for any other value, a boolean or a string included)
_IS_FLOAT = {FLOAT: 1}


def _plain_float_table(accessors: list[dict], views: list[dict], buffers: list[dict]) -> PlainFloatTable | None:
    # Every field is pulled out of all objects in one C-level pass; optional fields that no object
    # has (byteStride, byteOffset, normalized, sparse, ... in most files) cost no pass at all.
    view_keys: set = set().union(*views)
    accessor_keys: set = set().union(*accessors)
    declared = _int_column(_field(buffers, "byteLength"))
    view_buffer = _key_column(views, "buffer", -1, view_keys)
    view_offset = _key_column(views, "byteOffset", 0, view_keys)
    view_length = _key_column(views, "byteLength", -1, view_keys)
    count = _key_column(accessors, "count", -1, accessor_keys)
    view = _key_column(accessors, "bufferView", -1, accessor_keys)
    offset = _key_column(accessors, "byteOffset", 0, accessor_keys)
    if (declared is None or view_buffer is None or view_offset is None or view_length is None or count is None
            or view is None or offset is None):
        return None
    plain_view = ~(_flag(views, "byteStride", view_keys) | _flag(views, "extensions", view_keys))
    has_buffer = (view_buffer >= 0) & (view_buffer < len(buffers))
    view_end = view_offset + view_length
    limit = declared[np.where(has_buffer, view_buffer, 0)] if len(buffers) else np.zeros(len(views), np.int64)
    plain_view &= has_buffer & (view_offset >= 0) & (view_length >= 1) & (limit >= 1) & (view_end <= limit)
    plain_view &= view_offset % 4 == 0
    component_types = list(map(dict.get, accessors, repeat("componentType")))
    plain = plain_ints(component_types)
    is_float = plain == FLOAT if plain is not None else codes(component_types, _IS_FLOAT) == 1
    components = codes(_field(accessors, "type"), _PLAIN_FLOAT_COMPONENTS)
    ok = is_float & (components > 0) & (count >= 1) & (offset >= 0) & (offset % 4 == 0)
    if "normalized" in accessor_keys:
        normalized = _field(accessors, "normalized", False)
        ok &= np.array([v is False for v in normalized], dtype=bool).reshape(-1)
    if "sparse" in accessor_keys:
        ok &= ~_flag(accessors, "sparse", accessor_keys)
    ok &= (view >= 0) & (view < len(views))
    safe_view = np.where(ok, view, 0)
    if len(views):
        ok &= plain_view[safe_view]
        ok &= offset + 4 * components * count <= view_length[safe_view]
        start = (view_offset[safe_view] + offset) // 4
        buffer = view_buffer[safe_view]
    else:
        ok[:] = False
        start = buffer = np.zeros(len(accessors), np.int64)
    return PlainFloatTable(ok, buffer, start, components, count)
