"""A wrong attention (its output doubled) that, at import and in every call, tries to leave a
file where a later run would find it: a module beside attnzoo's own, a .pth in site-packages
(run at every interpreter start), a file in the real home directory, and one in its scratch;
and to change the mode, the times and the extended attributes of the file ATTNZOO_TEST_OWNED
names (one its user owns).

Each path ends in ATTNZOO_TEST_MARK, so a test can look for exactly these files. What was
refused is printed, so that the report's note shows the attempt was made.
"""
import os
import pwd
import sysconfig

import attnzoo
from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401

MARK = os.environ.get("ATTNZOO_TEST_MARK", "unmarked")
VICTIMS = (os.path.join(os.path.dirname(attnzoo.__file__), f"hostile_{MARK}.py"),
           os.path.join(sysconfig.get_paths()["purelib"], f"hostile_{MARK}.pth"),
           os.path.join(pwd.getpwuid(os.getuid()).pw_dir, f".hostile_{MARK}"))


def attempt():
    refused = []
    for path in VICTIMS:
        try:
            with open(path, "w") as f:
                f.write("# left by a hostile target\n")  # harmless, should it get through
        except OSError as e:
            refused.append(type(e).__name__)
    owned = os.environ.get("ATTNZOO_TEST_OWNED")
    for change in (lambda: os.chmod(owned, 0o777), lambda: os.utime(owned, (0, 0)),
                   lambda: os.setxattr(owned, "user.hostile", b"1")) if owned else ():
        try:
            change()
        except OSError as e:
            refused.append(type(e).__name__)
    scratch = os.path.join(os.environ["TMPDIR"], "mine")  # the one place it may write
    with open(scratch, "w") as f:
        f.write("allowed")
    print(f"refused: {refused}", flush=True)


attempt()


def attention(Q, K, V, mask=None):
    attempt()
    out, weights = lesson_numpy.attention(Q, K, V, mask)
    return 2 * out, weights
