"""User-supplied text (kernel names, paths, descriptions) as the tables print it: shortened, escaped, never markup."""

from __future__ import annotations

from rich.markup import escape

from ..errors import shorten


def plain(text, limit: int = 80) -> str:
    """`text` for a rich console or table: as written when it is short and printable, else shortened and escaped
    (repr-like); rich markup in it ('[bold]', '[/]') is printed, not interpreted."""
    text = str(text)
    if len(text) > limit or not text.isprintable():
        text = shorten(text, limit)
    return escape(text)
