"""Directories the harness writes into because a user named them, and how it
writes files there.

A command run as root that writes into a directory given on its command line
(``--out``, ``--dir``, ``--backing``, a run directory) must not let another
local user decide what is written where: a directory that user made first,
or one they can write, lets them swap in a symlink (root then overwrites the
file it points at) or their own file (root then trusts it: an
``authorized_keys`` the throwaway sshd reads). :func:`trusted_dir` is the one
check every such command makes before it writes anything:

* the directory is owned by the user running the command, and nobody else
  can write it (no group or other write bit);
* every directory above it is owned by root or that user, and nobody else
  can write it either, except a sticky one (``/tmp``: others cannot rename or
  remove what is ours in it) unless ``sticky_ok`` is False (sshd's
  StrictModes accepts no writable directory at all above a key file);
* a symlink on the way is followed only if root or that user owns it (a
  symlink in a directory only they can write, so only they made it);
* missing directories are made one at a time, and each is checked once made
  (another user cannot have made it first without the check seeing theirs).

Once that holds, nobody but root and the user can change anything in the
directory, so the paths below it mean what they say. The files written
there are still written with :func:`write_file` (never through a symlink,
replaced whole) as a second net.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from harness.errors import UsageError

#: how many symlinks one path may pass through (as the kernel's ELOOP bound)
MAX_LINKS = 40


class Untrusted(UsageError):
    """A directory another user made or can write: exit 2, one line."""


def _who(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _refuse(what: str, path: str, why: str) -> Untrusted:
    return Untrusted(f"{what}: refusing {path}: {why}")


def _check(what: str, path: str, st: os.stat_result, final: bool, sticky_ok: bool) -> None:
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(what, path, "not a directory")
    owners = (me,) if final else (0, me)
    if st.st_uid not in owners:
        raise _refuse(what, path, f"owned by {_who(st.st_uid)}, not by {_who(me)}"
                      + ("" if final or me == 0 else " or root"))
    if st.st_mode & 0o022:
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if final or not sticky or not sticky_ok:
            kind = "others" if st.st_mode & 0o002 else "its group"
            raise _refuse(what, path, f"{kind} can write it (mode {stat.filemode(st.st_mode)})"
                          + ("; sshd refuses keys below it" if sticky and not sticky_ok else ""))


def _walk(what: str, path: str, sticky_ok: bool, links: int) -> tuple[str, list[str]]:
    """The real path of the longest existing part of ``path`` (absolute),
    every directory of it checked as an ancestor, and the names missing
    after it. ``..`` goes up from the real directory reached so far, as the
    kernel does, never lexically."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    cur = "/"
    _check(what, cur, os.lstat(cur), False, sticky_ok)
    for i, name in enumerate(parts):
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            if ".." in parts[i:]:
                raise _refuse(what, path, f"{nxt} does not exist") from None
            return cur, parts[i:]
        except OSError as e:  # a directory above this user may not search (EACCES), a name too long, ...
            raise _refuse(what, path, f"cannot reach {nxt}: {e.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (0, os.geteuid()):
                raise _refuse(what, path, f"{nxt} is a symlink owned by {_who(st.st_uid)}")
            if links >= MAX_LINKS:
                raise _refuse(what, path, "too many symlinks")
            cur, missing = _walk(what, os.path.join(cur, os.readlink(nxt)), sticky_ok, links + 1)
            if missing:
                raise _refuse(what, path, f"{nxt} is a dangling symlink")
            continue
        _check(what, nxt, st, False, sticky_ok)
        cur = nxt
    return cur, []


def trusted_dir(path: str | os.PathLike[str], what: str, create: bool = True, mode: int = 0o755,
                sticky_ok: bool = True) -> Path:
    """The real path of directory ``path`` once it is safe for this user to
    write in (module doc); made (``mode``, with its parents) if missing and
    ``create``. Raises :class:`Untrusted` (one line naming ``what``, the
    command or option, and the offending directory) otherwise."""
    given = os.fspath(path)
    absolute = given if os.path.isabs(given) else os.path.join(os.getcwd(), given)
    real, missing = _walk(what, absolute, sticky_ok, 0)
    if missing and not create:
        raise UsageError(f"{what}: {absolute} does not exist")
    for name in missing:
        nxt = os.path.join(real, name)
        try:
            os.mkdir(nxt, mode)
        except FileExistsError:
            pass  # made meanwhile: the check below decides whose it is
        except OSError as e:
            raise UsageError(f"{what}: cannot make {nxt}: {e.strerror}") from None
        st = os.lstat(nxt)
        if stat.S_ISLNK(st.st_mode):
            raise _refuse(what, absolute, f"{nxt} turned into a symlink while it was being made")
        _check(what, nxt, st, False, sticky_ok)
        real = nxt
    _check(what, real, os.lstat(real), True, sticky_ok)
    return Path(real)


def check_dir(path: str | os.PathLike[str], what: str, sticky_ok: bool = True) -> None:
    """What :func:`trusted_dir` checks, making nothing: for a command that
    refuses bad input before it starts anything (a missing directory passes
    if what exists above it would let this user make it safely)."""
    given = os.fspath(path)
    absolute = given if os.path.isabs(given) else os.path.join(os.getcwd(), given)
    real, missing = _walk(what, absolute, sticky_ok, 0)
    if not missing:
        _check(what, real, os.lstat(real), True, sticky_ok)


def write_file(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` (file mode ``mode``), atomically and never
    through a symlink: a private temporary file made with ``O_EXCL`` and
    ``O_NOFOLLOW`` beside it, renamed over it (a symlink there is replaced,
    not followed)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def append_line(path: str | os.PathLike[str], line: str, mode: int = 0o644) -> None:
    """Append ``line`` to a regular file (made if missing), never through a
    symlink and never into anything but a regular file."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.write(fd, line.encode())
    finally:
        os.close(fd)
