"""Untrusted text (operator, kernel and process names, command lines) as one printable line.

Names come from trace files and other users' processes: a control character in one (an escape sequence, a
carriage return, a newline) could move the cursor or repaint the terminal. Each is shown as its ``\\xNN`` /
``\\uNNNN`` escape instead. Rich markup is not a risk where names go in as ``rich.text.Text`` (never parsed as
markup), which is how the views that use this pass them.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control, line-separator and bidirectional-override character escaped."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
