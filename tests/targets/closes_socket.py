"""An attention that shuts the worker's socket down and then keeps the process alive."""
import os
import socket
import sys
import time

from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


def attention(Q, K, V, mask=None):
    sock = socket.socket(fileno=os.dup(int(sys.argv[1])))
    sock.shutdown(socket.SHUT_RDWR)
    time.sleep(300)
