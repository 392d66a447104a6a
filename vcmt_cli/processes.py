"""Ports and child processes of the servers vcmt starts: `vcmt-spark-server`, and the lab's Spark and
ClickHouse servers for the tests. Standard library only: a server's watchdog process imports it."""

from __future__ import annotations

import os
import signal
import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on now (the OS's pick; a server that loses the race retries or fails)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host: str, port: int) -> bool:
    """Something accepts connections at host:port (IPv4 or IPv6), within a second."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group that may be gone already."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def die_with_parent() -> None:
    """In a child process: the kernel sends it SIGTERM when its parent dies, even by SIGKILL (Linux prctl;
    elsewhere nothing, and the caller's other limits apply). A caller that may outlive its starter before
    this takes effect checks `os.getppid()` after it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass
