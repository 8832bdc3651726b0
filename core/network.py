"""Whether dftune may use the network at all: ``DFTUNE_OFFLINE=1``, or a host that does not answer.

Asked before any remote call (paper services, remote embeddings), so an offline machine
answers at once instead of waiting out timeouts.
"""

from __future__ import annotations

import os
import socket
import threading
import time

OFFLINE_ENV = "DFTUNE_OFFLINE"

_probe_lock = threading.Lock()
_probe_cache: dict[str, tuple[float, bool]] = {}


def offline_forced() -> bool:
    """True when the user asked for no network at all (``DFTUNE_OFFLINE=1``)."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def probe_host(host: str, *, timeout: float = 1.0, ttl_s: float = 120.0) -> bool:
    """Does ``host`` resolve and accept a TCP connection on 443 within ``timeout``? Cached."""
    now = time.monotonic()
    with _probe_lock:
        hit = _probe_cache.get(host)
        if hit and now - hit[0] < ttl_s:
            return hit[1]
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            ok = True
    except OSError:
        ok = False
    with _probe_lock:
        _probe_cache[host] = (now, ok)
    return ok


def network_allowed(host: str) -> bool:
    """Whether a call to ``host`` should even be tried (forced offline, or a quick probe)."""
    return not offline_forced() and probe_host(host)
