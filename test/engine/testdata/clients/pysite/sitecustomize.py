"""Loaded by every Python client the engine tests run (clientEnv puts this
directory on PYTHONPATH): the aws CLI, boto3 and s3cmd.

It works around one bug of CPython, not of the clients' settings:
SSLContext.set_alpn_protocols frees the protocol list while another
thread's handshake may be copying it (python/cpython#141012, open). urllib3
calls it for every new connection on the pool's shared context, so a
client with several threads now and then sends a ClientHello whose ALPN
extension holds freed memory; any TLS server refuses that with a
decode_error alert (seen here once in ~30,000 handshakes, 2026-11-30).
Setting a context's list once, under a lock, and skipping later calls that
ask for the same list leaves nothing to free while handshakes run.
"""

import ssl
import threading

_lock = threading.Lock()
_set_alpn = ssl.SSLContext.set_alpn_protocols


def _set_alpn_once(context, protocols):
    protocols = list(protocols)
    with _lock:
        if getattr(context, "_strata_alpn", None) == protocols:
            return
        _set_alpn(context, protocols)
        context._strata_alpn = protocols


ssl.SSLContext.set_alpn_protocols = _set_alpn_once
