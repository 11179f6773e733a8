"""The serving process of one mount: ``python -m harness.lazyfs.server``.

Started by :func:`harness.lazyfs.mounts.mount` in its own session. It serves
the FUSE requests and a control socket in one trio loop, so a control
command runs between two requests, never inside one. Control protocol: one
line per connection, one JSON line back —

* ``crash`` / ``crash torn`` / ``crash torn SEED`` — drop what is not
  durable (package docstring); a torn crash draws its prefixes from SEED
  when given, else from the mount's ``--seed`` stream
* ``sync`` — make everything durable
* ``status`` — counts of dirty files, bytes, journal entries, crashes
* ``umount`` — sync, answer, then unmount and exit (a clean shutdown)

SIGTERM is a clean unmount too; SIGKILL leaves a dead mount that
``kraftwerk fs umount`` (or ``kraftwerk cleanup``) removes lazily. With
``--owner-pid`` the server also unmounts itself (synced, lazily if busy)
and exits once that process is gone: a mount never outlives its owner,
even one SIGKILLed before it could clean up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

import pyfuse3
import trio

from reference_impl.server.procs import alive

from .model import Tree
from .mounts import FSNAME, SUBTYPE, umount
from .ops import LazyOps


#: the kernel checks permissions against the modes and owners we report
#: (without it a FUSE mount with allow_other lets every user do anything),
#: and set-ID bits and device files mean nothing on the mount: a user of it
#: gets no more than the disk below would give them
SAFE_OPTIONS = ("default_permissions", "nosuid", "nodev")


def _is_int(word: str) -> bool:
    try:
        int(word)
    except ValueError:
        return False
    return True


class Server:
    def __init__(self, tree: Tree, socket_path: str, owner: tuple[int, int | None] | None = None) -> None:
        self.tree = tree
        self.socket_path = socket_path
        self.owner = owner
        self.stopping = False

    def command(self, line: str) -> dict[str, Any]:
        words = line.split()
        if not words:
            return {"error": "empty command"}
        cmd, args = words[0], words[1:]
        if cmd == "crash" and (args in ([], ["torn"]) or (len(args) == 2 and args[0] == "torn" and _is_int(args[1]))):
            seed = int(args[1]) if len(args) == 2 else None
            return {"ok": True, **self.tree.crash(torn=bool(args), seed=seed)}
        if cmd == "sync" and not args:
            self.tree.sync()
            return {"ok": True}
        if cmd == "status" and not args:
            return {"ok": True, "pid": os.getpid(), **self.tree.status()}
        if cmd == "umount" and not args:
            self.tree.sync()
            self.stopping = True
            return {"ok": True}
        return {"error": f"unknown command {line.strip()!r} (crash [torn [SEED]], sync, status, umount)"}

    async def handle(self, stream: trio.SocketStream) -> None:
        buf = b""
        with trio.move_on_after(10):
            while b"\n" not in buf and len(buf) < 4096:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                buf += chunk
        try:
            reply = self.command(buf.decode(errors="replace"))
        except Exception as e:  # a failing command must not take the mount down
            reply = {"error": f"{type(e).__name__}: {e}"}
        try:
            await stream.send_all(json.dumps(reply).encode() + b"\n")
        except trio.BrokenResourceError:
            pass
        await stream.aclose()
        if self.stopping:
            pyfuse3.terminate()

    async def serve(self) -> None:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        await sock.bind(self.socket_path)
        os.chmod(self.socket_path, 0o600)
        sock.listen(16)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, self.handle, [trio.SocketListener(sock)])
            nursery.start_soon(self._on_sigterm)
            if self.owner is not None:
                nursery.start_soon(self._watch_owner)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()

    async def _on_sigterm(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                self.tree.sync()
                pyfuse3.terminate()
                return


    async def _watch_owner(self) -> None:
        assert self.owner is not None
        while alive(*self.owner):
            await trio.sleep(0.5)
        self.tree.sync()
        pyfuse3.terminate()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.lazyfs.server")
    ap.add_argument("--mount", required=True)
    ap.add_argument("--backing", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fsname", default=FSNAME)
    ap.add_argument("--owner-pid", type=int, default=None)
    ap.add_argument("--owner-start", type=int, default=None)
    a = ap.parse_args(argv)
    tree = Tree(a.backing, a.seed)
    server = Server(tree, a.socket, (a.owner_pid, a.owner_start) if a.owner_pid else None)
    options = set(pyfuse3.default_options) | {f"fsname={a.fsname}", f"subtype={SUBTYPE}", "allow_other", *SAFE_OPTIONS}
    pyfuse3.init(LazyOps(tree), a.mount, options)
    try:
        trio.run(server.serve)
    finally:
        pyfuse3.close(unmount=True)
        try:
            os.unlink(a.socket)
        except OSError:
            pass
    if server.owner is not None:  # gone with its owner: nothing may stay behind
        umount(a.mount, clean=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
