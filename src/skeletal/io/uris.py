"""Safe reading of the URIs a glTF file references (buffers and images).

Policy (never any network access):

* ``data:`` URIs are decoded in memory (base64 or percent-encoded, RFC 2397).
* Any other scheme (``http:``, ``file:``, ``C:`` drive letters...) is refused.
* Everything else is a relative reference (RFC 3986): the query and fragment are dropped, the path is
  percent-decoded, and it is resolved against ``root`` - the model's folder by default, or the
  caller's explicit ``base_dir``. The resolved *real* path (symlinks followed) must lie inside the real
  ``root``: absolute paths, ``..`` escapes and symlinks leading out of the folder are refused.

Failures raise :class:`UriError`, a plain exception carrying the reason; the glTF reader decides whether
that is fatal (buffers) or not (images) and names the object.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path
from urllib.parse import unquote_to_bytes

from .files import NotRegularFile, read_regular

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


class UriError(Exception):
    """A URI that may not or cannot be read; the message says why."""


def is_data_uri(uri: str) -> bool:
    return uri[:5].lower() == "data:"


def decode_data_uri(uri: str) -> tuple[bytes, str | None]:
    """The bytes and media type (None when not given) of a ``data:`` URI."""
    header, comma, payload = uri[5:].partition(",")
    if not comma:
        raise UriError("malformed data URI: no ',' before the data")
    params = header.split(";")
    mime = params[0].strip() or None
    if any(p.strip().lower() == "base64" for p in params[1:]):
        try:
            # validate=True refuses stray characters instead of silently skipping them.
            return base64.b64decode(re.sub(r"\s+", "", unquote_to_bytes(payload).decode("ascii")), validate=True), mime
        except (binascii.Error, ValueError) as exc:
            raise UriError(f"malformed base64 in data URI: {exc}") from None
    return unquote_to_bytes(payload), mime


def resolve_relative_uri(uri: str, root: str | os.PathLike) -> Path:
    """The real path a relative URI names, checked to be a file inside ``root`` (see module policy)."""
    if _SCHEME.match(uri):
        raise UriError(f"the URI scheme of {uri!r} is not allowed (only data: URIs and relative paths)")
    # RFC 3986: a relative reference is path[?query][#fragment]; only the path names the file.
    path_part = re.split(r"[?#]", uri, maxsplit=1)[0]
    if not path_part:
        raise UriError("empty URI")
    try:
        decoded = unquote_to_bytes(path_part).decode("utf-8")
    except UnicodeDecodeError:
        raise UriError(f"{uri!r} does not percent-decode to UTF-8") from None
    if "\x00" in decoded:
        raise UriError(f"{uri!r} contains a NUL character")
    # Backslashes are folder separators to Windows exporters; treat them so, so that '..\\' is caught too.
    decoded = decoded.replace("\\", "/")
    if decoded.startswith("/") or os.path.isabs(decoded) or re.match(r"^[A-Za-z]:", decoded):
        raise UriError(f"absolute path {decoded!r} is not allowed")

    root_real = os.path.realpath(root)
    target = os.path.realpath(os.path.join(root_real, *decoded.split("/")))
    try:
        inside = os.path.commonpath([root_real, target]) == root_real
    except ValueError:  # Windows: different drives
        inside = False
    if not inside:
        raise UriError(f"{decoded!r} resolves to {target!r}, outside the allowed folder {root_real!r}")
    return Path(target)


def read_uri(uri: str, root: str | os.PathLike, *, max_bytes: int | None = None) -> tuple[bytes, str | None]:
    """The bytes (and media type, if the URI says it) of a data URI or of a file inside ``root``.

    ``max_bytes``: read at most this many bytes of a file (a buffer's declared ``byteLength``), so that
    a big file referenced for a small buffer is not read whole.
    """
    if is_data_uri(uri):
        return decode_data_uri(uri)
    path = resolve_relative_uri(uri, root)
    try:
        return read_regular(path, max_bytes), None  # O_NONBLOCK + fstat: a FIFO or device never blocks
    except NotRegularFile as exc:
        raise UriError(exc.strerror) from None
    except OSError as exc:
        raise UriError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
