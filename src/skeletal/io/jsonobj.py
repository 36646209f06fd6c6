"""Typed, path-aware access to a parsed glTF JSON document.

Every read goes through :class:`JsonObject`, which knows where in the document it is
(``"meshes[2].primitives[0]"``) and which file it came from, so that a missing required field, a
value of the wrong type or an index that points at nothing becomes a :class:`~skeletal.errors.ModelError`
naming the object, never a raw ``KeyError``/``TypeError``/``IndexError``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any, NoReturn

import numpy as np

from skeletal.errors import ModelError

#: Sentinel meaning "this field is required".
REQUIRED: Any = object()
_ABSENT: Any = object()


def _describe(value: Any) -> str:
    """A short name of a JSON value's kind, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _as_int(value: Any) -> int | None:
    """``value`` as an int if it is a JSON integer (an integral float such as ``2.0`` counts), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def plain_ints(values: list) -> np.ndarray | None:
    """A list of JSON values as an int64 array when every one is a plain integer (not a boolean, not
    ``2.0``) that int64 holds; None otherwise (then the caller reads the values one by one, which
    words the error).

    One C-level pass converts (``array("q")`` refuses floats, strings, null, arrays and objects, and
    integers past int64); only a boolean gets through it, as 1 or 0, so just the values of 1 or less
    are looked at again.

    >>> plain_ints([3, 0, 7])
    array([3, 0, 7])
    >>> plain_ints([3, True]) is None, plain_ints([3, 2.0]) is None
    (True, True)
    """
    try:
        column = np.frombuffer(array("q", values), dtype=np.int64)
    except (TypeError, OverflowError):
        return None
    small = (column <= 1).nonzero()[0].tolist()  # where a boolean may hide
    if small and not set(map(type, map(values.__getitem__, small) if 2 * len(small) < len(values) else values)) <= {int}:
        return None
    return column


def codes(values: list, table: dict) -> np.ndarray:
    """``table[v]`` for each JSON value ``v`` as an int64 array, 0 for a value not in ``table``
    (hashable or not: an array or object where a name belongs gives 0 too). ``table`` maps names (or
    numbers) to small codes 1-255; 0 means "none of these". A boolean never matches a number key here
    that is not 0 or 1, so keep those out of ``table``.

    >>> codes(["LINEAR", "STEP", 5, ["x"]], {"STEP": 1, "LINEAR": 2})
    array([2, 1, 0, 0])
    """
    try:
        return np.frombuffer(bytes(map(table.get, values, repeat(0))), dtype=np.uint8).astype(np.int64)
    except TypeError:  # an unhashable value
        return np.array([table.get(v, 0) if type(v) in (str, int, float) else 0 for v in values],
                        dtype=np.int64).reshape(-1)


class JsonObject:
    """One JSON object of the glTF document, with its location for error messages.

    ``where`` is the object's path (``""`` for the root, ``"nodes[3]"``, ``"nodes[3].extras"``).
    """

    __slots__ = ("file", "where", "data")

    def __init__(self, file: str, where: str, data: Any):
        if not isinstance(data, dict):
            raise ModelError(file, where or "(root)", f"expected a JSON object, found {_describe(data)}")
        self.file = file
        self.where = where
        self.data: dict[str, Any] = data

    # -- errors ---------------------------------------------------------------------------------
    def at(self, key: str | None = None) -> str:
        """The path of a field of this object (or of the object itself when ``key`` is None)."""
        if key is None:
            return self.where or "(root)"
        return f"{self.where}.{key}" if self.where else key

    def fail(self, detail: str, key: str | None = None) -> NoReturn:
        """Raise a ModelError about this object (or one of its fields)."""
        raise ModelError(self.file, self.at(key), detail)

    # -- raw access -----------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        """The untyped value of a field (``default`` when absent); for pass-through data like extras."""
        return self.data.get(key, default)

    def _get(self, key: str, default: Any) -> tuple[bool, Any]:
        """(present, value); raises when a required field is absent."""
        if key in self.data:
            return True, self.data[key]
        if default is REQUIRED:
            self.fail("required field is missing", key)
        return False, default

    # -- scalars --------------------------------------------------------------------------------
    def int(self, key: str, default: Any = REQUIRED, *, minimum: int | None = 0, maximum: int | None = None) -> Any:
        """An integer field in ``[minimum, maximum]``; ``default`` (returned as is) when absent."""
        value = self.data.get(key, _ABSENT)
        if type(value) is int and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
            return value  # the common case, checked in one go
        present, value = self._get(key, default)
        if not present:
            return value
        number = _as_int(value)
        if number is None:
            self.fail(f"expected an integer, found {_describe(value)}", key)
        if minimum is not None and number < minimum:
            self.fail(f"{number} is below the minimum {minimum}", key)
        if maximum is not None and number > maximum:
            self.fail(f"{number} is above the maximum {maximum}", key)
        return number

    def number(self, key: str, default: Any = REQUIRED) -> Any:
        """A finite number field."""
        present, value = self._get(key, default)
        if not present:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(f"expected a finite number, found {_describe(value)}", key)
        return float(value)

    def string(self, key: str, default: Any = REQUIRED) -> Any:
        present, value = self._get(key, default)
        if present and not isinstance(value, str):
            self.fail(f"expected a string, found {_describe(value)}", key)
        return value

    def boolean(self, key: str, default: Any = REQUIRED) -> Any:
        present, value = self._get(key, default)
        if present and not isinstance(value, bool):
            self.fail(f"expected true or false, found {_describe(value)}", key)
        return value

    # -- arrays ---------------------------------------------------------------------------------
    def array(self, key: str, default: Any = REQUIRED, *, min_length: int = 0) -> Any:
        """An array field as a Python list (``default`` when absent)."""
        present, value = self._get(key, default)
        if not present:
            return value
        if not isinstance(value, list):
            self.fail(f"expected an array, found {_describe(value)}", key)
        if len(value) < min_length:
            self.fail(f"expected at least {min_length} element(s), found {len(value)}", key)
        return value

    def numbers(self, key: str, default: Any = REQUIRED, *, length: int | None = None) -> Any:
        """An array of finite numbers as a float64 array (``default`` when absent)."""
        present, value = self._get(key, default)
        if not present:
            return value
        if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) for v in value
        ):
            self.fail(f"expected an array of numbers, found {_describe(value)}", key)
        if length is not None and len(value) != length:
            self.fail(f"expected {length} numbers, found {len(value)}", key)
        if len(value) <= 16:  # a node's TRS or matrix: Python's check is cheaper than numpy's here
            try:
                finite = all(map(math.isfinite, value))
            except OverflowError:  # an integer too large for a float
                finite = False
            if not finite:
                self.fail("numbers must be finite", key)
            return np.array(value, dtype=np.float64)
        out = np.array(value, dtype=np.float64)
        if not np.all(np.isfinite(out)):
            self.fail("numbers must be finite", key)
        return out

    def ints(self, key: str, default: Any = REQUIRED, *, min_length: int = 0) -> Any:
        """An array of non-negative integers as a list of int."""
        values = self.array(key, default, min_length=min_length)
        if values is default and not self.has(key):
            return values
        if set(map(type, values)) <= {int} and (not values or min(values) >= 0):
            return list(values)  # the common case, checked in two C-level passes
        out = []
        for i, v in enumerate(values):
            number = _as_int(v)
            if number is None or number < 0:
                self.fail(f"expected a non-negative integer, found {_describe(v)}", f"{key}[{i}]")
            out.append(number)
        return out

    # -- references -----------------------------------------------------------------------------
    def index(self, key: str, table: str, size: int, default: Any = REQUIRED) -> Any:
        """An index into the top-level array ``table`` of ``size`` elements, checked to exist."""
        value = self.data.get(key, _ABSENT)
        if type(value) is int and 0 <= value < size:
            return value  # the common case, checked in one go
        value = self.int(key, default)
        if value is default and not self.has(key):
            return value
        check_index(self, key, value, table, size)
        return value

    def indices(self, key: str, table: str, size: int, default: Any = REQUIRED, *, min_length: int = 0) -> Any:
        """An array of indices into ``table``, each checked to exist."""
        values = self.ints(key, default, min_length=min_length)
        if values is default and not self.has(key):
            return values
        if not values or max(values) < size:
            return values  # every one exists (ints are non-negative)
        for i, value in enumerate(values):
            check_index(self, f"{key}[{i}]", value, table, size)
        return values

    # -- nested objects -------------------------------------------------------------------------
    def object(self, key: str, *, required: bool = False) -> JsonObject:
        """A nested object (an empty one when absent and not required)."""
        present, value = self._get(key, REQUIRED if required else None)
        return JsonObject(self.file, self.at(key), value if present else {})

    def objects(self, key: str, *, required: bool = False, min_length: int = 0) -> JsonArray:
        """An array of objects (empty when absent and not required), each knowing its path. Every
        element is checked to be an object now; the wrappers are made when an element is used."""
        values = self.array(key, REQUIRED if required else [], min_length=min_length)
        base = self.at(key)
        if not set(map(type, values)) <= {dict}:  # one C-level pass; the loop only to name the culprit
            for i, v in enumerate(values):
                if type(v) is not dict:
                    JsonObject(self.file, f"{base}[{i}]", v)  # raises, naming the element
        return JsonArray(self.file, base, values)

    def extension(self, name: str) -> JsonObject | None:
        """The object ``extensions.<name>``, or None when the object does not use that extension."""
        if "extensions" not in self.data:
            return None
        extensions = self.object("extensions")
        if not extensions.has(name):
            return None
        return extensions.object(name)


class JsonArray(Sequence):
    """A JSON array of objects (checked to be objects) as a sequence of :class:`JsonObject`, each made
    on first use; ``raw`` is the underlying list of dicts, for readers' plain-case paths that read
    many elements without wrapping each one."""

    __slots__ = ("_made", "base", "file", "raw")

    def __init__(self, file: str, base: str, raw: list):
        self.file = file
        self.base = base
        self.raw = raw
        self._made: list[JsonObject | None] = [None] * len(raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.raw)))]
        obj = self._made[index]
        if obj is None:
            i = index if index >= 0 else index + len(self.raw)
            obj = self._made[index] = JsonObject(self.file, f"{self.base}[{i}]", self.raw[index])
        return obj

    def __iter__(self) -> Iterator[JsonObject]:
        for i in range(len(self.raw)):
            yield self[i]

    def __repr__(self) -> str:
        return f"JsonArray({self.base!r}, {len(self.raw)} objects)"


def check_index(obj: JsonObject, key: str, value: int, table: str, size: int) -> None:
    """Raise unless ``value`` is a valid index into the top-level array ``table`` of ``size`` elements."""
    if not 0 <= value < size:
        have = f"the file has {size}" if size else "the file has none"
        obj.fail(f"refers to {table}[{value}], which does not exist ({have})", key)
