# Over 600 lines: the BVH reader and writer share the channel and rotation-order tables and their round-trip
# contract.
"""BVH (Biovision Hierarchy) motion capture: read a ``.bvh`` file into a :class:`Document`, write any
rig + clip back out as BVH text.

What a BVH file holds, and how it maps onto skeletal's model:

* ``HIERARCHY``: ``ROOT``/``JOINT`` blocks with an ``OFFSET`` (the joint's rest translation from its
  parent, in file units) and ``CHANNELS`` (any of ``X/Y/Z position`` and ``X/Y/Z rotation`` in any
  order), and ``End Site`` blocks (a leaf with only an OFFSET). Every joint *and* every end site
  becomes a :class:`~skeletal.document.Node` (end sites as leaves named ``<parent>_End``), so the bone
  to an end site can be drawn. Rest rotations are identity, rest scale 1.
* ``MOTION``: ``Frames: F``, ``Frame Time: dt`` and F lines of numbers, one per channel. They become
  one :class:`~skeletal.document.Animation` (named after the file) with LINEAR keys at ``k * dt``:

  - rotation channels are Euler angles in **degrees**, applied in the order listed (intrinsic:
    ``Zrotation Yrotation Xrotation`` means ``R = Rz @ Ry @ Rx``), turned into xyzw quaternions for the
    whole MOTION block at once (numpy, no per-value Python) with signs made continuous between frames;
  - position channels *are* the joint's local translation (they replace the OFFSET; an axis without
    a position channel keeps the OFFSET's value). This is how Blender and bvhio read them; the old
    Meredith & Maddock notes add OFFSET instead, which is the same for the zero root OFFSET that
    mocap files (CMU included) have;
  - a joint with only rotation channels keeps its OFFSET as a constant translation (no track).

* Units: lengths stay in the file's units (BVH has no unit field). CMU files are in inches / 0.45
  (multiply by :data:`CMU_SCALE` = 0.05644 for metres); other sources use centimetres. Pass
  ``read_bvh(path, scale=...)`` for metres; the renderer frames whatever extent the skeleton has.
  The up axis is the file's (CMU and most mocap files are Y up, like glTF); ``read_bvh(path, up="z")``
  turns a Z-up file Y-up (the roots' rest and motion turn -90 degrees about X).
* BVH carries no mesh, skin, scale or morph weights, so an asset read from BVH is a rig and a clip.

Bad input (truncated or lying files) raises one :class:`~skeletal.errors.ModelError` naming the file
and the line, before any allocation sized by what the file *claims* (a ``Frames:`` count is checked
against the lines that are really there, every frame line must hold exactly one value per channel,
nesting depth is capped at :data:`MAX_DEPTH` and the joint count at :data:`MAX_JOINTS`, counts are
ASCII digits, ``Frame Time`` is at most :data:`MAX_FRAME_TIME` seconds and values at most
:data:`MAX_VALUE` in magnitude). Frame lines past the declared ``Frames:`` count are ignored with one
warning, as other readers do. UTF-8 (BOM or not), UTF-16 and Latin-1 text are read.

>>> doc = read_bvh("cmu_12_01_walk.bvh")                     # doctest: +SKIP
>>> len(doc.nodes), len(doc.animations[0].channels)          # doctest: +SKIP
(38, 32)
"""

from __future__ import annotations

import io
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import njit

from skeletal.document import Animation, Channel, Document, Node
from skeletal.errors import ClipError, ModelError
from skeletal.quat import decompose_trs, quat_conjugate, quat_mul, quat_to_matrix

__all__ = ["read_bvh", "parse_bvh", "format_bvh", "euler_to_quat", "matrix_to_euler", "ROTATION_ORDERS", "MAX_DEPTH", "MAX_JOINTS", "MAX_FRAME_TIME", "MAX_VALUE", "CMU_SCALE"]

#: Deepest joint nesting accepted; real skeletons are a few dozen levels deep.
MAX_DEPTH = 1000
#: Most joints (end sites included) accepted: real skeletons have a few hundred at most; the
#: hierarchy is parsed in Python, so a 100,000-joint file would take a minute and hundreds of MB.
MAX_JOINTS = 20_000
#: Longest joint name accepted (characters).
MAX_NAME = 256
#: Longest ``Frame Time`` accepted (seconds): a clip's keys must stay finite and ``bake``-able.
MAX_FRAME_TIME = 3600.0
#: Largest magnitude of an OFFSET or MOTION value: positions become float32 and world matrices
#: multiply them, so a 1e308 (finite in float64) would turn into inf and NaN downstream.
MAX_VALUE = 1e12
#: Lengths of CMU mocap files (inches / 0.45) to metres: ``read_bvh(path, scale=CMU_SCALE)``.
CMU_SCALE = 0.0254 / 0.45

_AXES = "XYZ"
_CHANNEL = re.compile(r"^([XYZ])(position|rotation)$", re.IGNORECASE)
_MOTION = re.compile(r"^[ \t]*MOTION[ \t]*\r?$", re.MULTILINE)
#: A count in the file: ASCII digits only (``str.isdigit`` also takes "²" and "٣", which ``int`` refuses)
_COUNT = re.compile(r"[0-9]{1,15}")


# ---------------------------------------------------------------------------------------------------
# Euler angles <-> quaternions (vectorised)
# ---------------------------------------------------------------------------------------------------
def axis_quat(axis: str, angle: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) xyzw of rotations by ``angle`` (..., radians) about ``axis`` ("X"/"Y"/"Z")."""
    angle = np.asarray(angle, dtype=np.float64)
    q = np.zeros(angle.shape + (4,))
    q[..., _AXES.index(axis)] = np.sin(0.5 * angle)
    q[..., 3] = np.cos(0.5 * angle)
    return q


def euler_to_quat(angles: np.ndarray, order: str, degrees: bool = True) -> np.ndarray:
    """Quaternions (..., 4) xyzw from Euler angles (..., len(order)) applied intrinsically in ``order``.

    ``order`` is a string of axes such as ``"ZYX"``: ``R = Rz(a[..., 0]) @ Ry(a[..., 1]) @ Rx(a[..., 2])``
    (BVH's convention: channels listed first are outermost). Any length 1..3 works.

    >>> np.round(euler_to_quat(np.array([90.0, 0.0, 0.0]), "ZYX"), 6).tolist()
    [0.0, 0.0, 0.707107, 0.707107]
    """
    angles = np.asarray(angles, dtype=np.float64)
    if degrees:
        angles = np.radians(angles)
    q = np.zeros(angles.shape[:-1] + (4,))
    q[..., 3] = 1.0
    for m, axis in enumerate(order):
        q = quat_mul(q, axis_quat(axis, angles[..., m]))
    return q


@njit(cache=True, nogil=True)
def euler_columns_to_quat(values: np.ndarray, cols: np.ndarray, axes: np.ndarray, out: np.ndarray) -> None:
    """The MOTION block's Euler channels -> quaternions, for every frame and rotating joint at once.

    ``values`` (F, C) degrees; per joint g, ``cols[g, k]`` is the column of its k-th rotation
    channel and ``axes[g, k]`` its axis (0/1/2 for X/Y/Z, -1 past the last), applied in that order
    (intrinsic, as :func:`euler_to_quat`). ``out`` (F, G, 4) xyzw, signs made continuous over frames
    (consecutive keys have a non-negative dot). Products are formed in float64.
    """
    frames, joints = out.shape[0], out.shape[1]
    half = 0.5 * np.pi / 180.0
    for g in range(joints):
        px = py = pz = 0.0
        pw = 1.0
        for f in range(frames):
            x = y = z = 0.0
            w = 1.0
            for k in range(3):
                axis = axes[g, k]
                if axis < 0:
                    break
                a = values[f, cols[g, k]] * half
                s = np.sin(a)
                c = np.cos(a)
                # (x, y, z, w) * rotation about one axis (xyzw product with a one-axis quaternion)
                if axis == 0:
                    x, y, z, w = w * s + x * c, y * c + z * s, z * c - y * s, w * c - x * s
                elif axis == 1:
                    x, y, z, w = x * c - z * s, w * s + y * c, z * c + x * s, w * c - y * s
                else:
                    x, y, z, w = x * c + y * s, y * c - x * s, w * s + z * c, w * c - z * s
            if f > 0 and x * px + y * py + z * pz + w * pw < 0.0:
                x, y, z, w = -x, -y, -z, -w
            out[f, g, 0] = x
            out[f, g, 1] = y
            out[f, g, 2] = z
            out[f, g, 3] = w
            px, py, pz, pw = x, y, z, w


def continuous_signs(q: np.ndarray) -> np.ndarray:
    """Flip quaternions (F, ..., 4) along axis 0 so that consecutive keys have a non-negative dot."""
    if len(q) < 2:
        return q
    dots = np.sum(q[1:] * q[:-1], axis=-1)
    flips = np.concatenate([np.ones((1,) + dots.shape[1:]), np.cumprod(np.where(dots < 0, -1.0, 1.0), axis=0)])
    return q * flips[..., None]


# ---------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------
_POW10 = np.array([10.0**k for k in range(23)])  # exact in float64


@njit(cache=True, nogil=True)
def parse_decimals(data: np.ndarray, out: np.ndarray) -> tuple[int, bool]:
    """Whitespace-separated decimal numbers in ``data`` (uint8 ASCII) -> ``out`` (float64).

    Returns ``(count, ok)``. Each number is ``[+-]digits[.digits][(e|E)[+-]digits]``; its value is the
    integer mantissa (at most 15 significant digits, so exact) times or divided by an exact power of
    ten (at most 1e22): one correctly rounded operation, the same double ``float()`` gives. ``ok`` is
    False at the first token outside that form (a word, nan, a longer mantissa) or when ``out`` is
    full; the caller then falls back to a general parser.
    """
    n = len(data)
    i = 0
    count = 0
    pow10 = _POW10
    while i < n:
        c = data[i]
        if c == 32 or c == 9 or c == 10 or c == 13:
            i += 1
            continue
        if count >= len(out):
            return count, False
        negative = False
        if c == 45 or c == 43:  # - +
            negative = c == 45
            i += 1
        mantissa = 0
        significant = 0
        digits = 0
        scale = 0
        while i < n and 48 <= data[i] <= 57:
            d = data[i] - 48
            if significant or d:
                significant += 1
            mantissa = mantissa * 10 + d
            digits += 1
            i += 1
        if i < n and data[i] == 46:  # .
            i += 1
            while i < n and 48 <= data[i] <= 57:
                d = data[i] - 48
                if significant or d:
                    significant += 1
                mantissa = mantissa * 10 + d
                digits += 1
                scale -= 1
                i += 1
        if digits == 0 or significant > 15:
            return count, False
        if i < n and (data[i] == 101 or data[i] == 69):  # e E
            i += 1
            exp_negative = False
            if i < n and (data[i] == 45 or data[i] == 43):
                exp_negative = data[i] == 45
                i += 1
            exponent = 0
            exp_digits = 0
            while i < n and 48 <= data[i] <= 57:
                if exponent < 100000:
                    exponent = exponent * 10 + (data[i] - 48)
                exp_digits += 1
                i += 1
            if exp_digits == 0:
                return count, False
            scale += -exponent if exp_negative else exponent
        if i < n and not (data[i] == 32 or data[i] == 9 or data[i] == 10 or data[i] == 13):
            return count, False
        value = float(mantissa)
        if mantissa != 0:
            if scale > 22 or scale < -22:
                return count, False
            value = value * pow10[scale] if scale >= 0 else value / pow10[-scale]
        out[count] = -value if negative else value
        count += 1
    return count, True


@njit(cache=True, nogil=True)
def motion_rows(data: np.ndarray, frames: int, columns: int) -> tuple[int, int, int, int, int, int]:
    """Check the MOTION lines of ``data`` (uint8 ASCII, ``\\n``-separated) before any number is parsed.

    Counts the whitespace-separated tokens of every non-blank line. Returns ``(rows, end, bad_line,
    bad_count, first_extra_line, extra_rows)``: ``rows`` non-blank lines in all; ``end`` the byte just
    after the ``frames``-th of them (the declared frames; ``len(data)`` when there are fewer);
    ``bad_line`` the 0-based line index of the first of those ``frames`` lines whose token count is not
    ``columns`` (-1 if none) and ``bad_count`` its count; ``first_extra_line`` the line index of the
    first non-blank line after the declared frames (-1 if none) and ``extra_rows`` how many there are.
    A frame line holding 8 values and the next 10 is caught here, where a total count would pass.
    """
    n = len(data)
    rows = 0
    end = n
    bad_line = -1
    bad_count = 0
    first_extra = -1
    extra = 0
    line = 0
    tokens = 0
    in_token = False
    i = 0
    while i <= n:
        c = 10 if i == n else data[i]
        if c == 10:
            if tokens:
                if rows < frames:
                    if tokens != columns and bad_line < 0:
                        bad_line = line
                        bad_count = tokens
                    if rows + 1 == frames:
                        end = min(i + 1, n)
                else:
                    if first_extra < 0:
                        first_extra = line
                    extra += 1
                rows += 1
            line += 1
            tokens = 0
            in_token = False
        elif c == 32 or c == 9 or c == 13 or c == 11 or c == 12:
            in_token = False
        else:
            if not in_token:
                tokens += 1
                in_token = True
        i += 1
    return rows, end, bad_line, bad_count, first_extra, extra


@dataclass
class BvhJoint:
    """One HIERARCHY entry while parsing. ``channels`` are the names in file order; ``column`` is the
    joint's first column in the MOTION block. End sites have ``end=True`` and no channels."""

    name: str
    parent: int
    line: int
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    channels: list[str] = field(default_factory=list)
    column: int = 0
    end: bool = False
    children: list[int] = field(default_factory=list)

    @property
    def rotation_order(self) -> str:
        """Axes of the rotation channels in file order, e.g. ``"ZYX"`` ("" when none)."""
        return "".join(c[0] for c in self.channels if c.endswith("rotation"))


class _Tokens:
    """Whitespace-separated tokens of the HIERARCHY text, each with its 1-based line number."""

    def __init__(self, file: str, text: str, first_line: int):
        self.file = file
        self.items: list[tuple[str, int]] = []
        for n, line in enumerate(text.split("\n")):
            self.items.extend((tok, first_line + n) for tok in line.split())
        self.pos = 0
        self.end_line = first_line + text.count("\n")

    def fail(self, line: int, detail: str):
        raise ModelError(self.file, f"line {line}", detail)

    def peek(self) -> tuple[str, int] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def next(self, what: str) -> tuple[str, int]:
        if self.pos >= len(self.items):
            self.fail(self.end_line, f"the HIERARCHY ends early: expected {what}")
        tok = self.items[self.pos]
        self.pos += 1
        return tok

    def expect(self, word: str) -> int:
        tok, line = self.next(repr(word))
        if tok != word:
            self.fail(line, f"expected {word!r}, found {tok[:40]!r}")
        return line

    def number(self, what: str) -> float:
        tok, line = self.next(what)
        try:
            value = float(tok)
        except ValueError:
            self.fail(line, f"{what} is not a number: {tok[:40]!r}")
        if not np.isfinite(value):
            self.fail(line, f"{what} is not finite: {tok[:40]!r}")
        if abs(value) > MAX_VALUE:
            self.fail(line, f"{what} {tok[:40]!r} is out of range (larger than {MAX_VALUE:g})")
        return value

    def rest_of_line(self, line: int) -> list[str]:
        """The remaining tokens on ``line`` (used for joint names, which may contain spaces)."""
        out = []
        while self.pos < len(self.items) and self.items[self.pos][1] == line:
            out.append(self.items[self.pos][0])
            self.pos += 1
        return out


def _parse_hierarchy(tokens: _Tokens) -> list[BvhJoint]:
    """HIERARCHY tokens -> joints in file order (parents before children). Iterative: no recursion."""
    joints: list[BvhJoint] = []
    tokens.expect("HIERARCHY")
    stack: list[int] = []  # open blocks
    column = 0
    while True:
        tok = tokens.peek()
        if tok is None:
            if stack:
                tokens.fail(tokens.end_line, f"the HIERARCHY ends inside joint {joints[stack[-1]].name!r} (missing '}}')")
            break
        word, line = tok
        if not stack:
            if word != "ROOT":
                if not joints:
                    tokens.fail(line, f"expected 'ROOT', found {word[:40]!r}")
                tokens.fail(line, f"unexpected {word[:40]!r} after the last joint (expected 'ROOT' or 'MOTION')")
        tokens.pos += 1
        if word in ("ROOT", "JOINT", "End") and len(joints) >= MAX_JOINTS:
            tokens.fail(line, f"more than {MAX_JOINTS} joints and end sites")
        if word in ("ROOT", "JOINT"):
            if (word == "ROOT") != (not stack):
                tokens.fail(line, "'ROOT' inside a joint" if stack else "'JOINT' outside a ROOT block")
            parent = stack[-1] if stack else -1
            if parent >= 0 and joints[parent].end:
                tokens.fail(line, "'JOINT' inside an End Site")
            name_tokens = tokens.rest_of_line(line)
            if name_tokens and name_tokens[-1] == "{":
                name_tokens.pop()
                tokens.pos -= 1  # let the '{' be read below
            name = " ".join(name_tokens)
            if not name:
                tokens.fail(line, f"{word} has no name")
            if len(name) > MAX_NAME:
                tokens.fail(line, f"{word} name is longer than {MAX_NAME} characters")
            joints.append(BvhJoint(name, parent, line))
        elif word == "End":
            if not stack:
                tokens.fail(line, "'End Site' outside a joint")
            tokens.expect("Site")
            parent = stack[-1]
            if joints[parent].end:
                tokens.fail(line, "'End Site' inside an End Site")
            joints.append(BvhJoint(f"{joints[parent].name}_End", parent, line, end=True))
        elif word == "}":
            if not stack:
                tokens.fail(line, "unmatched '}'")
            stack.pop()
            continue
        elif word == "OFFSET" and stack:
            joints[stack[-1]].offset = np.array([tokens.number(f"OFFSET {a}") for a in _AXES])
            continue
        elif word == "CHANNELS" and stack:
            joint = joints[stack[-1]]
            if joint.end:
                tokens.fail(line, "an End Site has no CHANNELS")
            if joint.channels:
                tokens.fail(line, f"joint {joint.name!r} has a second CHANNELS line")
            count_tok, _ = tokens.next("the channel count")
            if not _COUNT.fullmatch(count_tok) or int(count_tok) > 6:
                tokens.fail(line, f"channel count must be 0..6, found {count_tok[:40]!r}")
            names = [tokens.next(f"channel {i + 1} of {count_tok}") for i in range(int(count_tok))]
            listed_here = [n for n, name_line in names if name_line == line]
            if len(listed_here) < len(names) and not _CHANNEL.match(names[len(listed_here)][0]):
                tokens.fail(line, f"CHANNELS {count_tok} but {len(listed_here)} channel names on the line")
            extra = tokens.rest_of_line(line)
            if extra:
                tokens.fail(line, f"CHANNELS {count_tok} but {len(names) + len(extra)} names on the line")
            for name, name_line in names:
                if not _CHANNEL.match(name):
                    tokens.fail(name_line, f"unknown channel {name[:40]!r} (expected X/Y/Z position/rotation; the count says {count_tok})")
            listed = [n[0].upper() + n[1:].lower() for n, _ in names]  # "XROTATION" -> "Xrotation"
            if len(set(listed)) != len(listed):
                tokens.fail(line, f"joint {joint.name!r} lists a channel twice: {' '.join(listed)}")
            joint.channels = listed
            joint.column = column
            column += len(listed)
            continue
        else:
            tokens.fail(line, f"unexpected {word[:40]!r} in joint {joints[stack[-1]].name!r}" if stack
                        else f"unexpected {word[:40]!r}")
        # A new block opens: ROOT / JOINT / End Site.
        tokens.expect("{")
        if len(stack) >= MAX_DEPTH:
            tokens.fail(line, f"the hierarchy is nested deeper than {MAX_DEPTH} joints")
        if joints[-1].parent >= 0:
            joints[joints[-1].parent].children.append(len(joints) - 1)
        stack.append(len(joints) - 1)
    if not joints:
        tokens.fail(tokens.end_line, "the HIERARCHY has no ROOT")
    return joints


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _parse_motion_header(file: str, lines: list[str], first_line: int) -> tuple[int, float, int]:
    """``Frames:`` and ``Frame Time:`` -> (frames, frame_time, index of the first data line)."""
    i = 0
    header = []
    for key in ("Frames:", "Frame Time:"):
        while i < len(lines) and not lines[i].strip():
            i += 1
        line_no = first_line + i
        if i >= len(lines):
            raise ModelError(file, f"line {line_no}", f"the MOTION section ends before {key!r}")
        text = lines[i].strip()
        if not " ".join(text.split()).lower().startswith(key.lower()):  # "Frame  time:" too
            raise ModelError(file, f"line {line_no}", f"expected {key!r}, found {text[:40]!r}")
        header.append((text.split(":", 1)[1].strip(), line_no))
        i += 1
    (frames_text, frames_line), (time_text, time_line) = header
    if not _COUNT.fullmatch(frames_text):
        raise ModelError(file, f"line {frames_line}", f"Frames must be a non-negative integer (at most 15 digits), found {frames_text[:40]!r}")
    try:
        frame_time = float(time_text)
    except ValueError:
        raise ModelError(file, f"line {time_line}", f"Frame Time is not a number: {time_text[:40]!r}") from None
    if not (np.isfinite(frame_time) and 0 < frame_time <= MAX_FRAME_TIME):
        raise ModelError(file, f"line {time_line}", f"Frame Time must be a positive number of seconds up to "
                                                    f"{MAX_FRAME_TIME:g}, found {time_text[:40]!r}")
    return int(frames_text), frame_time, i


def _parse_motion_values(file: str, block: str, raw: np.ndarray, frames: int, columns: int,
                         row_line) -> np.ndarray:
    """The MOTION numbers of the declared frames -> (frames, columns) float64.

    ``block`` is their text and ``raw`` its bytes, already checked by :func:`motion_rows` to hold
    ``frames`` lines of ``columns`` tokens each; ``row_line(r)`` is the file line of frame ``r`` (for
    errors). The numba decimal parser reads every number at once (exact for up to 15 significant
    digits); anything it does not handle (exponents past 1e22, long mantissas, words) goes to numpy,
    and only when that fails are the tokens walked, to name the first one at fault.
    """
    expected = frames * columns
    out = np.empty(expected + 1)
    count, ok = parse_decimals(raw, out)
    values = None
    if ok and count == expected:
        values = out[:expected]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns (or raises) when it stops at a non-number
            try:
                values = np.fromstring(block, dtype=np.float64, sep=" ")
            except (ValueError, DeprecationWarning):
                values = None
        if values is None or values.size != expected or not np.all(np.isfinite(values)):
            # Slow path (errors only): the first token that is not a finite number.
            row = 0
            for line in block.split("\n"):
                parts = line.split()
                if not parts:
                    continue
                for p in parts:
                    try:
                        v = float(p)
                    except ValueError:
                        raise ModelError(file, f"line {row_line(row)}", f"frame {row}: {p[:40]!r} is not a number") from None
                    if not np.isfinite(v):
                        raise ModelError(file, f"line {row_line(row)}", f"frame {row}: {p[:40]!r} is not finite")
                row += 1
            raise ModelError(file, f"line {row_line(0)}", "the MOTION block does not match the declared frames and channels")
    big = np.abs(values) > MAX_VALUE
    if np.any(big):
        at = int(np.argmax(big))
        raise ModelError(file, f"line {row_line(at // columns)}",
                         f"frame {at // columns}: value {values[at]:g} is out of range (larger than {MAX_VALUE:g})")
    return values.reshape(frames, columns)


def _motion(file: str, lines: list[str], first_line: int, frames: int, columns: int, frames_line: int) -> np.ndarray:
    """The MOTION data lines (``lines``, the first at file line ``first_line``) -> (frames, columns).

    Never trusts the declared count for an allocation: each frame needs a line of its own with exactly
    ``columns`` tokens (checked line by line in one numba pass before anything is parsed), so what is
    allocated is bounded by the file's size. Lines past the declared frames are ignored with one
    warning, as three.js, bvhio and Assimp do.
    """
    block = "\n".join(lines)
    raw = np.frombuffer(block.encode("latin-1", "replace"), np.uint8)
    if columns == 0 and frames > 0:
        for i, line in enumerate(lines):
            if line.strip():
                raise ModelError(file, f"line {first_line + i}", "numbers in the MOTION block, but the HIERARCHY declares no channels")
    rows, end, bad_line, bad_count, first_extra, extra = motion_rows(raw, frames, columns)
    if rows < frames:
        raise ModelError(file, f"line {frames_line}", f"Frames: {frames} but only {rows} lines of numbers follow")
    if bad_line >= 0:
        row = sum(1 for line in lines[:bad_line] if line.strip())
        raise ModelError(file, f"line {first_line + bad_line}",
                         f"frame {row} has {bad_count} values, the HIERARCHY declares {columns} channels")
    if extra:
        warnings.warn(f"{os.path.basename(file)}: line {first_line + first_extra}: {extra} more frame line"
                      f"{'s' if extra > 1 else ''} than the {frames} that 'Frames:' (line {frames_line}) declares; "
                      "read the declared frames, ignored the rest", stacklevel=3)
    if frames * columns == 0:
        return np.zeros((frames, columns))
    block, raw = block[:end], raw[:end]

    def row_line(row: int) -> int:  # errors only: the file line of frame ``row``
        seen = -1
        for i, line in enumerate(lines):
            if line.strip():
                seen += 1
                if seen == row:
                    return first_line + i
        return first_line

    return _parse_motion_values(file, block, raw, frames, columns, row_line)


def parse_bvh(text: str, file: str = "<bvh>", *, scale: float = 1.0, up: str = "y") -> Document:
    """BVH text -> :class:`Document` (see the module docstring). ``file`` names it in errors;
    ``scale`` multiplies every length (OFFSETs and position channels); ``up="z"`` turns a Z-up file
    Y-up (glTF's convention) by a -90 degree turn about X on the roots (rest and motion)."""
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale}")
    if up not in ("y", "z"):
        raise ValueError(f"up must be 'y' or 'z', got {up!r}")
    motion = _MOTION.search(text)
    if motion is None:
        raise ModelError(file, f"line {text.count(chr(10)) + 1}", "no MOTION section (the file is truncated or not BVH)")
    hierarchy = text[: motion.start()]
    tokens = _Tokens(file, hierarchy, 1)
    joints = _parse_hierarchy(tokens)
    motion_line = _line_of(text, motion.start())
    lines = text[motion.end():].split("\n")[1:]  # after the MOTION line
    frames, frame_time, first_data = _parse_motion_header(file, lines, motion_line + 1)
    frames_line = motion_line + 1 + next(i for i, line in enumerate(lines) if line.strip())
    data = lines[first_data:]
    data_first_line = motion_line + 1 + first_data
    columns = sum(len(j.channels) for j in joints)
    values = _motion(file, data, data_first_line, frames, columns, frames_line)
    if scale != 1.0:
        for j in joints:
            j.offset = j.offset * scale
            for c, name in enumerate(j.channels):
                if name.endswith("position"):
                    values[:, j.column + c] *= scale
    return _document(file, joints, values, frame_time, frames_line + 1, up)


def read_bvh(path: str | os.PathLike, *, scale: float = 1.0, up: str = "y") -> Document:
    """Read a ``.bvh`` file into a :class:`Document` (nodes + one animation; no meshes or skins).

    ``scale`` multiplies every length: BVH has no unit field (``CMU_SCALE`` turns CMU files into
    metres, 0.01 centimetre files). ``skeletal.load`` reads at scale 1; for another scale wrap the
    document yourself: ``skeletal.Asset(read_bvh(path, scale=CMU_SCALE))``. ``up="z"`` reads a Z-up
    file (Blender, 3ds Max exports) as Y-up.

    >>> doc = read_bvh("walk.bvh")             # doctest: +SKIP
    """
    file = os.fspath(path)
    try:
        raw = Path(file).read_bytes()
    except OSError as exc:
        raise ModelError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    text = _decode(raw, file)
    if "\x00" in text[:4096]:
        raise ModelError(file, "line 1", "binary data, not a BVH text file")
    return parse_bvh(text.replace("\r\n", "\n").replace("\r", "\n"), file, scale=scale, up=up)


def _decode(raw: bytes, file: str) -> str:
    """The file's text: UTF-8 (with or without a BOM), UTF-16 (a BOM, or ASCII text every other byte
    of which is zero, as Windows tools write it), else Latin-1 (joint names in old files; the structure
    is ASCII either way)."""
    head = raw[:4096]
    encoding = None
    if raw.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    elif raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    elif len(head) >= 4 and not head[1::2].strip(b"\x00") and head[0::2].strip(b"\x00"):
        encoding = "utf-16-le"
    elif len(head) >= 4 and not head[0::2].strip(b"\x00") and head[1::2].strip(b"\x00"):
        encoding = "utf-16-be"
    if encoding is not None:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ModelError(file, None, f"not valid {encoding.upper()} text at byte {exc.start}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _document(file: str, joints: list[BvhJoint], values: np.ndarray, frame_time: float, time_line: int,
              up: str = "y") -> Document:
    nodes = [Node(j.name, children=list(j.children), translation=j.offset.copy(), parent=j.parent) for j in joints]
    # Z up -> Y up: the roots turn by -90 degrees about X (their children's offsets are in their frame).
    fix = axis_quat("X", -0.5 * np.pi) if up == "z" else None
    fix_matrix = quat_to_matrix(fix) if fix is not None else None
    if fix is not None:
        for i, j in enumerate(joints):
            if j.parent < 0:
                nodes[i].translation = fix_matrix @ j.offset
                nodes[i].rotation = fix.copy()
    frames = len(values)
    animations = []
    if frames:
        times = (np.arange(frames, dtype=np.float64) * frame_time).astype(np.float32)
        if frames > 1 and not np.all(np.diff(times) > 0):
            raise ModelError(file, f"line {time_line}", f"Frame Time {frame_time:g} is too small for {frames} frames (keys collide in float32)")
        channels: list[Channel] = []
        # Translations: position channels replace the OFFSET's components.
        for i, j in enumerate(joints):
            pos = [(c, _AXES.index(name[0])) for c, name in enumerate(j.channels) if name.endswith("position")]
            if pos:
                t = np.tile(j.offset, (frames, 1))
                for c, axis in pos:
                    t[:, axis] = values[:, j.column + c]
                if fix is not None and j.parent < 0:
                    t = t @ fix_matrix.T
                channels.append(Channel(i, "translation", "LINEAR", times, t.astype(np.float32)))
        # Rotations: one numba pass over the MOTION block for every rotating joint, any order.
        rotating = [i for i, j in enumerate(joints) if j.rotation_order]
        axes = np.full((len(rotating), 3), -1, np.int64)
        cols = np.zeros((len(rotating), 3), np.int64)
        for g, i in enumerate(rotating):
            k = 0
            for c, name in enumerate(joints[i].channels):
                if name.endswith("rotation"):
                    axes[g, k], cols[g, k] = _AXES.index(name[0]), joints[i].column + c
                    k += 1
        q = np.empty((frames, len(rotating), 4), np.float32)
        euler_columns_to_quat(values, cols, axes, q)
        rotations = {i: q[:, g] for g, i in enumerate(rotating)}
        if fix is not None:
            for i in rotations:
                if joints[i].parent < 0:
                    rotations[i] = quat_mul(fix, rotations[i].astype(np.float64)).astype(np.float32)
        for i in sorted(rotations):
            channels.append(Channel(i, "rotation", "LINEAR", times, np.ascontiguousarray(rotations[i])))
        channels.sort(key=lambda c: (c.node, c.path != "translation"))
        animations.append(Animation(Path(file).stem, channels))
    roots = [i for i, j in enumerate(joints) if j.parent < 0]
    info = {
        "generator": "BVH",
        "frame_time": frame_time,
        "channels": {j.name: list(j.channels) for j in joints if not j.end},
    }
    return Document(path=file, nodes=nodes, meshes=[], skins=[], animations=animations,
                    scenes=[roots], scene=0, asset_info=info)


# ---------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------
ROTATION_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_CYCLIC = {"XYZ", "YZX", "ZXY"}


def matrix_to_euler(m: np.ndarray, order: str, degrees: bool = True) -> np.ndarray:
    """Euler angles (..., 3) for rotation matrices (..., 3, 3): the inverse of :func:`euler_to_quat`.

    ``R = R_order[0](a0) @ R_order[1](a1) @ R_order[2](a2)``, ``order`` one of :data:`ROTATION_ORDERS`.
    The middle angle is in [-90, 90] degrees; at gimbal lock (its cosine below 1e-9) the last angle is 0.

    >>> from skeletal.quat import quat_to_matrix
    >>> np.round(matrix_to_euler(quat_to_matrix(euler_to_quat(np.array([10.0, 20, 30]), "YXZ")), "YXZ"), 9).tolist()
    [10.0, 20.0, 30.0]
    """
    if order not in ROTATION_ORDERS:
        raise ValueError(f"rotation order {order!r} is not one of {ROTATION_ORDERS}")
    i, j, k = (_AXES.index(a) for a in order)
    e = 1.0 if order in _CYCLIC else -1.0
    m = np.asarray(m, dtype=np.float64)
    cos_mid = np.hypot(m[..., i, i], m[..., i, j])
    mid = np.arctan2(e * m[..., i, k], cos_mid)
    first = np.arctan2(-e * m[..., j, k], m[..., k, k])
    last = np.arctan2(-e * m[..., i, j], m[..., i, i])
    locked = cos_mid < 1e-9
    if np.any(locked):
        first = np.where(locked, np.arctan2(e * m[..., k, j], m[..., j, j]), first)
        last = np.where(locked, 0.0, last)
    out = np.stack([first, mid, last], axis=-1)
    return np.degrees(out) if degrees else out


def _bvh_names(names: list[str]) -> list[str]:
    """Joint names safe for BVH: no whitespace or braces, not empty, unique, and at most
    :data:`MAX_NAME` characters (what :func:`parse_bvh` reads back; longer ones are cut, with a warning)."""
    out, seen = [], set()
    cut = 0
    for i, name in enumerate(names):
        base = re.sub(r"[\s{}]+", "_", name) or f"node{i}"
        if len(base) > MAX_NAME - 16:  # room for a "_<n>" that makes it unique and for "_End"
            base, cut = base[: MAX_NAME - 16], cut + 1
        candidate, n = base, 1
        while candidate in seen:
            candidate, n = f"{base}_{n}", n + 1
        seen.add(candidate)
        out.append(candidate)
    if cut:
        warnings.warn(f"BVH joint names are at most {MAX_NAME} characters: {cut} longer name(s) cut to "
                      f"{MAX_NAME - 16}", stacklevel=3)
    return out


def format_bvh(
    names: list[str] | tuple[str, ...],
    parents: np.ndarray,
    world: np.ndarray,
    rest_world: np.ndarray,
    frame_time: float,
    *,
    rotation_order: str | dict[str, str] = "ZYX",
    nodes: np.ndarray | list[int] | None = None,
    decimals: int = 6,
    end_sites: bool = True,
    file: str = "<bvh>",
) -> str:
    """BVH text for world matrices of a rig sampled at ``frame_time`` steps.

    ``world`` (F, N, 4, 4) row-major world matrices per frame, ``rest_world`` (N, 4, 4) those of the
    rest pose (they give the OFFSETs), ``parents`` (N,) parent-first. ``nodes``: the rig indices to
    write (default all); a written joint's BVH parent is its nearest written ancestor, and the
    transforms of skipped nodes in between are folded into it. Several top-level joints are put
    under their lowest common ancestor, or under an added identity ``Root`` when they share none.

    Each joint's BVH local transform is taken from world matrices (``q = q_parent^-1 q_world``,
    ``t = R_parent^T (p_world - p_parent)``), so world joint positions are exact whatever the source
    rig does; what BVH cannot hold is reported with a warning: world scale (baked into the OFFSETs
    and positions; a non-uniform scale also shears the joint frames, which become the nearest
    rotation). Channels: 3 rotations in ``rotation_order`` (one order, or a dict joint name -> order,
    "ZYX" for names it lacks) per joint; 3 positions first for roots and for joints whose
    translation moves away from their OFFSET. With ``end_sites``, a written leaf that neither rotates
    nor moves becomes an ``End Site`` (its name is lost: readers call it ``<parent>_End``); other
    leaves are JOINTs closed by a zero-length End Site. Angles are unwrapped over time (no 360-degree
    jumps). ``decimals``: digits after the point of every number.
    """

    parents = np.asarray(parents, dtype=np.int64)
    world = np.asarray(world, dtype=np.float64)
    frames, n = world.shape[:2]
    if frames < 1:
        raise ValueError("a BVH file needs at least one frame")
    if not (np.isfinite(frame_time) and frame_time > 0):
        raise ValueError(f"frame time must be positive, got {frame_time}")
    # What parse_bvh refuses is never written (ClipError, naming the output file).
    if frame_time > MAX_FRAME_TIME:
        raise ClipError(f"{os.path.basename(file)}: a BVH Frame Time is at most {MAX_FRAME_TIME:g} s, this clip's "
                        f"keys are {frame_time:.4g} s apart: pass a frame rate (--fps)")
    orders = rotation_order if isinstance(rotation_order, dict) else {}
    default_order = rotation_order if isinstance(rotation_order, str) else "ZYX"
    for order in [default_order, *orders.values()]:
        if order not in ROTATION_ORDERS:
            raise ValueError(f"rotation order {order!r} is not one of {ROTATION_ORDERS}")

    keep = np.zeros(n, dtype=bool)
    keep[np.arange(n) if nodes is None else np.asarray(nodes, dtype=np.int64)] = True
    bvh_parent = _nearest_kept_ancestors(parents, keep)
    roots = [i for i in np.flatnonzero(keep) if bvh_parent[i] < 0]
    extra_root = False
    if len(roots) > 1:
        common = _common_ancestor(parents, roots)
        if common >= 0:
            keep[common] = True
        else:
            extra_root = True
        bvh_parent = _nearest_kept_ancestors(parents, keep)
    written = np.flatnonzero(keep)

    # World TRS of the written nodes (frames + rest as frame -1), then BVH-local transforms.
    all_world = np.concatenate([world[:, written], np.asarray(rest_world, dtype=np.float64)[None, written]])
    t_w, q_w, s_w = decompose_trs(all_world)  # (F+1, W, 3/4/3)
    slot = np.full(n, -1)
    slot[written] = np.arange(len(written))
    par = np.array([slot[bvh_parent[i]] if bvh_parent[i] >= 0 else -1 for i in written])
    has_par = par >= 0
    q_p = np.where(has_par[None, :, None], q_w[:, np.maximum(par, 0)], np.array([0.0, 0.0, 0.0, 1.0]))
    t_p = np.where(has_par[None, :, None], t_w[:, np.maximum(par, 0)], 0.0)
    q_local = quat_mul(quat_conjugate(q_p), q_w)
    r_p = quat_to_matrix(q_p)
    t_local = np.einsum("fwji,fwj->fwi", r_p, t_w - t_p)  # R_parent^T (p - p_parent)
    offsets = t_local[-1]
    t_local, q_local = t_local[:-1], q_local[:-1]

    scale_off = np.abs(s_w - 1.0).max(axis=(0, 2)) > 1e-3  # not the |q|^2 of slightly non-unit keys
    if np.any(scale_off):
        lo, hi = float(np.abs(s_w).min()), float(np.abs(s_w).max())
        warnings.warn(
            f"{os.path.basename(file)}: BVH has no scale channels; the world scale ({lo:.4g}..{hi:.4g}) of "
            f"{int(scale_off.sum())} joints is baked into OFFSETs and positions (joint positions are exact, "
            "scale itself and any shear are dropped)", stacklevel=3)

    size = max(float(np.abs(offsets).max(initial=0.0)), float(np.abs(t_local).max(initial=0.0)), 1e-12)
    moves = np.abs(t_local - offsets[None]).max(axis=(0, 2)) > 1e-6 * size
    identity = np.array([0.0, 0.0, 0.0, 1.0])
    turns = np.abs(np.abs(np.sum(q_local * identity, axis=-1)) - 1.0).max(axis=0) > 1e-12
    children = np.zeros(len(written), dtype=np.int64)
    np.add.at(children, par[has_par], 1)
    end_site = (children == 0) & ~moves & ~turns & has_par & end_sites

    safe = _bvh_names([names[i] for i in written])
    is_root = ~has_par
    pos_channels = (is_root | moves) & ~end_site
    joint_orders = [orders.get(names[i], orders.get(safe[w], default_order)) for w, i in enumerate(written)]

    # Motion columns, joint by joint in file order (written is parent-first, and so is preorder below).
    kids: dict[int, list[int]] = {w: [] for w in range(len(written))}
    for w in range(len(written)):
        if par[w] >= 0:
            kids[int(par[w])].append(w)
    top = [w for w in range(len(written)) if par[w] < 0]
    preorder: list[int] = []
    stack = top[::-1]
    while stack:
        w = stack.pop()
        preorder.append(w)
        stack.extend(reversed(kids[w]))

    angles = np.empty((frames, len(written), 3))
    for order in set(joint_orders):
        members = [w for w in range(len(written)) if joint_orders[w] == order]
        angles[:, members] = matrix_to_euler(quat_to_matrix(q_local[:, members]), order)
    angles = np.degrees(np.unwrap(np.radians(angles), axis=0))

    lines = ["HIERARCHY"]
    columns: list[np.ndarray] = []
    fmt = f"{{:.{decimals}f}}"
    depth0 = 0
    if extra_root:
        root_name = "Root"
        while root_name in safe:
            root_name += "_"
        lines += [f"ROOT {root_name}", "{", "\tOFFSET 0 0 0", "\tCHANNELS 0"]
        depth0 = 1
    open_depths: list[int] = []
    depth_of = {}
    for w in preorder:
        depth = depth0 if par[w] < 0 else depth_of[int(par[w])] + 1
        depth_of[w] = depth
        while open_depths and open_depths[-1] >= depth:
            lines.append("\t" * open_depths.pop() + "}")
        pad = "\t" * depth
        off = " ".join(fmt.format(v) for v in offsets[w])
        if end_site[w]:
            lines += [f"{pad}End Site", f"{pad}{{", f"{pad}\tOFFSET {off}", f"{pad}}}"]
            continue
        keyword = "ROOT" if depth == 0 else "JOINT"
        lines += [f"{pad}{keyword} {safe[w]}", f"{pad}{{", f"{pad}\tOFFSET {off}"]
        chans = []
        if pos_channels[w]:
            chans += ["Xposition", "Yposition", "Zposition"]
            columns.append(t_local[:, w])
        chans += [f"{a}rotation" for a in joint_orders[w]]
        columns.append(angles[:, w])
        lines.append(f"{pad}\tCHANNELS {len(chans)} {' '.join(chans)}")
        if not kids[w]:
            lines += [f"{pad}\tEnd Site", f"{pad}\t{{", f"{pad}\t\tOFFSET 0 0 0", f"{pad}\t}}"]
        open_depths.append(depth)
    while open_depths:
        lines.append("\t" * open_depths.pop() + "}")
    if extra_root:
        lines.append("}")
    lines += ["MOTION", f"Frames: {frames}", f"Frame Time: {frame_time:.9g}"]
    motion = np.concatenate(columns, axis=1) if columns else np.zeros((frames, 0))
    motion = np.where(np.abs(motion) < 0.5 * 10.0 ** -decimals, 0.0, motion)  # no "-0.000000"
    if motion.size and not np.abs(motion).max() <= MAX_VALUE or offsets.size and not np.abs(offsets).max() <= MAX_VALUE:
        raise ClipError(f"{os.path.basename(file)}: a BVH value would be larger than {MAX_VALUE:g} (or not finite), "
                        "which BVH readers refuse")
    if max(depth_of.values(), default=0) >= MAX_DEPTH:
        raise ClipError(f"{os.path.basename(file)}: the joints nest deeper than {MAX_DEPTH}, which BVH readers refuse")
    out = io.StringIO()
    out.write("\n".join(lines) + "\n")
    if motion.shape[1]:
        np.savetxt(out, motion, fmt=f"%.{decimals}f", delimiter=" ")  # one frame per line
    return out.getvalue()


def _nearest_kept_ancestors(parents: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """For each node, its nearest ancestor with ``keep`` set (-1 if none); parent-first order."""
    out = np.full(len(parents), -1, dtype=np.int64)
    for i, p in enumerate(parents.tolist()):
        if p >= 0:
            out[i] = p if keep[p] else out[p]
    return out


def _common_ancestor(parents: np.ndarray, nodes: list[int]) -> int:
    """The deepest node that is an ancestor of every one of ``nodes`` (-1 if they share none)."""
    def chain(i: int) -> list[int]:
        out = []
        while i >= 0:
            out.append(int(i))
            i = parents[i]
        return out[::-1]

    chains = [chain(int(parents[i])) for i in nodes]
    common = -1
    for level in zip(*chains):
        if all(x == level[0] for x in level):
            common = level[0]
        else:
            break
    return common

