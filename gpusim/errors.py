"""The one exception type the command line turns into a one-line message (never a traceback)."""

from __future__ import annotations

import reprlib

SHORT = 80  # characters of a bad value a message shows
MESSAGE_LIMIT = 600  # characters of a whole message the command line prints

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = SHORT, SHORT, 40


class GpusimError(Exception):
    """A user-facing error: bad input file, unknown name, impossible request.

    The message is a single line that names the file or flag, the field and what was expected.
    """


class ArchError(GpusimError):
    """An architecture file or name that cannot be loaded."""


def shorten(value, limit: int = SHORT) -> str:
    """A value as a message shows it: repr-like (quoted, no raw newlines or control characters), at most
    `limit` characters ('...' marks a cut), in time bounded whatever the value's size or nesting."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        text = f"{'-' if value < 0 else ''}<an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits>"
    else:
        text = _REPR.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def shown(value, limit: int = SHORT) -> str:
    """Like shorten, but text that is short and printable is shown as typed (no quotes): for flag values."""
    if isinstance(value, str) and len(value) <= limit and value.isprintable():
        return value
    return shorten(value, limit)


def one_line(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message as one printable line: control characters escaped, the middle of an over-long one cut."""
    if not message.isprintable():
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(message) > limit:
        half = (limit - 5) // 2
        message = f"{message[:half]} ... {message[-half:]}"
    return message
