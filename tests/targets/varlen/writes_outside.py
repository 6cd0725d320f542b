"""A correct varlen kernel that, at import and in every call, tries to leave a file in the real
home directory (its name ends in ATTNZOO_TEST_MARK) and one in its scratch, the one place it may
write, and starts a child that outlives the call. Under strict isolation the first write fails,
so every call raises; nothing it made may outlive the run."""
import os
import pwd
import subprocess
import sys

from reference.varlen import attn_varlen

MARK = os.environ.get("ATTNZOO_TEST_MARK", "unmarked")
VICTIM = os.path.join(pwd.getpwuid(os.getuid()).pw_dir, f".varlen_{MARK}")


def attempt():
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"mine_{MARK}"), "w") as f:
        f.write("allowed")
    with open(VICTIM, "w") as f:
        f.write("# left by a varlen target\n")


def attn(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    attempt()
    return attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
