"""Text from code under test, made inert before it enters a report.

An exception message, a signature, a declared refusal or a graded suite's failure text is
written by the code under test. Printed as it is, a control character in it acts on the
terminal: ``ESC [2J`` clears the screen, a cursor move or a carriage return draws over the
verdict, ``ESC ]`` retitles the window, a bidirectional override reorders what follows. Every
such character becomes a visible escape (``\\x1b``, ``\\u202e``) where that text enters the
parent's report objects, so the text report, ``--json`` and markdown all carry the same inert
string, which stays readable and contains no character that drives a terminal.
"""

_CONTROL = (*range(0x20), *range(0x7F, 0xA0))  # C0, DEL and C1: Unicode's category Cc
# characters that reorder text or end a line without being control characters
_FORMATTING = (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F),
               *range(0x2066, 0x206A))


def _escape(c):
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(chr(c))
    return named or (f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}")


_LINE = str.maketrans({c: _escape(c) for c in _CONTROL + _FORMATTING})
_LINES = {k: v for k, v in _LINE.items() if chr(k) not in "\n\t"}


def inert(text, lines=False):
    """``text`` (any object, as ``str``) with every C0 and C1 control character, DEL and the
    bidirectional and line-separating format characters written as visible escapes. With
    ``lines``, newlines and tabs are kept: multi-line text (a suite's failure output) keeps its
    shape. The same character always becomes the same escape, so a string found inside another
    is still found inside it once both are escaped, and escaping twice changes nothing more."""
    return str(text).translate(_LINES if lines else _LINE)
