"""Text that may come from the network, made safe for the places people and programs read it.

A peer, an RPC caller or a chain record can hand us any string: newlines that forge a log line
or an sd_notify field (`\\nSTOPPING=1`), terminal escapes (an OSC 52 clipboard write, a cursor
move that hides what came before), bidi overrides that make a line read backwards, NUL. Every
sink that shows such text (log lines, the status line, sd_notify, `--notify`'s environment,
/readyz, snode-cli's terminal output) passes it through `printable` first: one function, so that
every sink escapes the same way.
"""

from __future__ import annotations

from typing import Final

DEFAULT_LIMIT: Final = 300
"""Characters a piece of network text may take in a line (the old wire reason's bound)."""
STATUS_LINE_LIMIT: Final = 400
"""Characters of the status line at most (its refusal words included)."""
ELLIPSIS: Final = "..."

_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(char: str) -> str:
    """One character as it may appear: itself if printable, else its escape."""
    if char.isprintable():
        return char
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """`text` with every character that is not printable escaped, at most `limit` characters.

    Not printable (Python's `str.isprintable`): the C0 and C1 controls (newline, ESC, NUL, DEL,
    CSI), format characters (bidi overrides such as U+202E, zero-width spaces), separators other
    than the plain space, surrogates, private-use and unassigned code points. Each becomes a
    Python-style escape (`\\n`, `\\x1b`, `\\u202e`), so the result is one line of visible
    characters and says what was there. A longer result is cut (never inside an escape) and
    ends with `...`. Backslashes are kept as they are: the result is for reading, not parsing.
    """
    if len(text) <= limit and text.isprintable():
        return text  # the common case, checked in C
    out: list[str] = []
    size = 0
    room = max(limit - len(ELLIPSIS), 0)
    for index, char in enumerate(text):
        piece = _shown(char)
        if size + len(piece) > room:
            tail = text[index:]
            if len(tail) <= limit - size:  # it may still fit whole, without the ellipsis
                rest = "".join(map(_shown, tail))
                if size + len(rest) <= limit:
                    return "".join(out) + rest
            return "".join(out) + ELLIPSIS[:limit]
        out.append(piece)
        size += len(piece)
    return "".join(out)


def fixed_hex(text: object, size: int) -> bytes | None:
    """The `size` bytes that `text` spells in hex (`bytes.fromhex`'s rules), or None when it is
    not a string, not hex, or another length: each caller says in its own words what to fix."""
    try:
        raw = bytes.fromhex(text)  # type: ignore[arg-type]  # anything else is refused below
    except (ValueError, TypeError):
        return None
    return raw if len(raw) == size else None
