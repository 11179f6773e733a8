"""The cluster secret: what a node's peers and its controller (the harness,
``kraftwerk cluster``) present, so that no other local user can stop a node,
skew its clock, or speak the internal RPC (one forged peer message could push a
controller epoch to 1,000,001 on disk and make a correct run report invalid).

Whoever starts a cluster makes one secret file, readable by its owner only
(:func:`make_secret_file`), and gives every node ``--secret-file``. Nothing
secret travels on a command line (``ps`` shows those to every user). Each use
presents its own token derived from the secret (HMAC-SHA256 of a purpose
string), compared in constant time:

* internal RPC: the hello frame's fourth field (:data:`RPC`);
* the HTTP control endpoint: ``Authorization: Bearer <token>`` (:data:`CONTROL`);
* the link proxies' control port: a ``"token"`` field in each command (:data:`PROXY`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat

RPC = "kraftwerk-rpc/1"
CONTROL = "kraftwerk-control/1"
PROXY = "kraftwerk-proxy/1"
HEADER = "Authorization"


class SecretError(ValueError):
    """The secret file is missing, empty, or readable by others."""


def make_secret_file(path: str) -> str:
    """Create ``path`` (0600, never an existing file or symlink) holding a new
    random secret; returns the path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path


def ensure_secret_file(path: str) -> str:
    """``path`` if it is already a good secret file, else a new one there."""
    try:
        load_secret(path)
        return path
    except SecretError:
        if os.path.lexists(path):
            os.unlink(path)
        return make_secret_file(path)


def load_secret(path: str) -> bytes:
    """The secret in ``path``, refusing a file others could read or write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise SecretError(f"secret file {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.geteuid():
            raise SecretError(f"secret file {path} must be a regular file of ours, mode 0600")
        data = f.read(4096).strip()
    if len(data) < 16:
        raise SecretError(f"secret file {path} holds no secret")
    return data


def token(secret: bytes | None, purpose: str) -> str:
    """The token for ``purpose``, or "" without a secret."""
    if not secret:
        return ""
    return hmac.new(secret, purpose.encode(), hashlib.sha256).hexdigest()


def check(secret: bytes | None, purpose: str, presented: object) -> bool:
    """True when no secret is set, or ``presented`` is the right token."""
    if not secret:
        return True
    return isinstance(presented, str) and hmac.compare_digest(presented.encode(), token(secret, purpose).encode())
