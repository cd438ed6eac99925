"""Free TCP ports for servers that are named before they start (a cluster
spec handed to every process).

A port the kernel picks for port 0 lies in its ephemeral range, which it also
hands to every other port-0 bind and outgoing connection, so between the pick
and the server's bind another process (another server's bulk port, a client
socket) can take it and the server fails to start. These ports come from
below that range instead, as distflow's C++ PickUnusedTcpPort (src/base/ports.h)
does; only another explicit picker can collide, and the random choice makes
that unlikely."""

import random
import socket

_LOWEST = 10000
_given = set()  # never the same port twice to one process's callers


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(host, port):
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def free_port(*hosts):
    """A port free on every one of `hosts` (default 127.0.0.1) and on the
    wildcard address."""
    hosts = hosts or ("127.0.0.1",)
    lo, hi = ephemeral_range()
    first, last = _LOWEST, lo - 1
    if last - first < 1000:
        first, last = hi + 1, 65535
    for _ in range(200):
        port = random.randint(first, last)
        if port not in _given and all(_bindable(h, port) for h in hosts + ("0.0.0.0",)):
            _given.add(port)
            return port
    raise RuntimeError(f"no free port on {hosts} in {first}-{last}")
