"""Text from a file, shown safely: the one helper for everything that reaches a terminal or a report.

Names in model files (nodes, meshes, skins, clips, the generator) and file names on disk are the
file author's text. Printed raw, ``\\x1b]0;...\\x07`` retitles the window, ``\\x1b]52;...`` writes the
clipboard, ``\\x1b[2J`` clears the screen, and a newline in a file name forges extra lines in a
summary. :func:`shown` writes every control character (C0, DEL, C1, line and paragraph separators,
bidirectional overrides) as a visible escape, and leaves all other text as it is.

>>> shown("walk\\x1b]0;owned\\x07")
'walk\\\\x1b]0;owned\\\\x07'
>>> shown("x\\n  failed 0")
'x\\\\n  failed 0'
>>> shown("Hüfte")
'Hüfte'
"""

from __future__ import annotations

import re

#: Control characters and the invisible characters that reorder or break lines.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group(0)
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def shown(text: object) -> str:
    """``text`` (any object, as ``str``) with every control character written as an escape: safe to
    print to a terminal, to put on one line of a report, or to log."""
    return CONTROL.sub(_escape, str(text))


__all__ = ["shown", "CONTROL"]
