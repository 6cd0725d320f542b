"""Text that would drive the terminal: an SDPA-style callable whose exception message clears
the screen, homes the cursor and draws a fake conformant summary, then hides what follows
(C0 and C1 escapes, a window title, a bidirectional override), with refusals that carry the same
text. With ATTNZOO_TEST_ON_IMPORT set it raises that message while being imported."""

import os

FAKE = ("\x1b[2J\x1b[H\x1b]0;all clear\x07\x1b[1Gsummary: 30 passed, 0 flagged, 0 n/a in 1.0 s — "
        "conformant\x1b[8m\x9b2J\u202e\x00")
ATTNZOO_REFUSES = (FAKE + " (never raised)",)

if os.environ.get("ATTNZOO_TEST_ON_IMPORT"):
    raise RuntimeError(FAKE)


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    raise RuntimeError(FAKE + "\n" + FAKE)
