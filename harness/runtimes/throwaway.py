"""Throwaway ssh hosts on this machine (``kraftwerk hosts up|down``).

Each host is a network namespace of one fabric (:mod:`harness.runtimes.net.netns`,
names ``kw-<tag>-h1``...) running its own sshd with its own host key, on a
real address of the fabric's /24; the harness reaches them from the root
namespace like VMs on a private network. ``up`` writes into DIR:

* ``hosts.yaml`` — the hosts file for ``--backend ssh --hosts DIR/hosts.yaml``;
* ``id_ed25519`` (+ ``.pub``) — a login key made for them;
* ``known_hosts`` — every host's key, so verification works with no
  ``--ssh-accept-new``;
* ``h<i>/`` — that host's sshd config, host key, log, and its ``dir``
  (where the project is installed and nodes keep data);
* ``fabric.json`` — the fabric's tag, for ``down``.

DIR must be safe for root to write in (:func:`harness.rundir.trust.trusted_dir`:
root's, and nobody else can write it or a directory above it but a sticky
one); it is made 0700 if missing. The key the hosts accept
(``authorized_keys``) is not kept in DIR but in root's own
``/run/kraftwerk-net/<tag>.authorized_keys`` beside the fabric's record,
so sshd runs with ``StrictModes yes``: it checks that file and every
directory above it is root's and writable by nobody else (which a DIR under
``/tmp`` could never pass), and no file another user can touch decides who
logs in as root.

The hosts outlive ``up`` (sshd runs in its own session, with no lease) until
``kraftwerk hosts down --dir DIR``; ``kraftwerk cleanup`` leaves them alone,
even with ``--force`` (they are no run's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from harness.errors import HarnessError, UsageError
from harness.rundir.trust import trusted_dir, write_file
from harness.runtimes.hostsfile import HostSpec, dump
from harness.runtimes.net.netns import OWNER_DIR, Fabric, remove_tag, require_root, run

SSHD = "/usr/sbin/sshd"
FABRIC_FILE = "fabric.json"
#: a fabric's tag as :class:`Fabric` makes one (a forged fabric.json names no other)
TAG_RE = re.compile(r"[0-9a-f]{6}")

SSHD_CONFIG = """\
ListenAddress {addr}
Port 22
HostKey {dir}/ssh_host_ed25519_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {keys}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes yes
Subsystem sftp internal-sftp
"""


def up(count: int, dir: Path) -> Path:
    """Make ``count`` hosts, write DIR/hosts.yaml, return its path."""
    require_root("kraftwerk hosts up", tools=("ip", "iptables", "ssh-keygen", SSHD))
    if not 1 <= count <= 50:
        raise UsageError(f"--count {count}: between 1 and 50 hosts")
    dir = trusted_dir(dir, "kraftwerk hosts up --dir", mode=0o700)
    if (dir / FABRIC_FILE).exists():
        raise UsageError(f"{dir} already has hosts (kraftwerk hosts down --dir {dir} first)")
    names = [f"h{i}" for i in range(1, count + 1)]
    fabric = Fabric.create(names, kind="hosts", dir=str(dir))
    try:
        write_file(dir / FABRIC_FILE, json.dumps({"tag": fabric.tag}))
        _keygen(dir / "id_ed25519")
        keys = authorized_keys(fabric.tag)
        write_file(keys, (dir / "id_ed25519.pub").read_text(), mode=0o600)
        known = []
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        for n in names:
            known.append(_start_sshd(fabric, n, dir, keys))
        write_file(dir / "known_hosts", "".join(known))
        for n in names:
            _wait_port(fabric.addresses[n], 22, 10)
        specs = [HostSpec(n, fabric.addresses[n], dir=str(dir / n / "root")) for n in names]
        hosts_yaml = dir / "hosts.yaml"
        write_file(hosts_yaml, dump(specs, {"user": "root", "port": 22, "key": "id_ed25519",
                                            "known_hosts": "known_hosts"}))
        return hosts_yaml
    except BaseException:
        fabric.destroy()
        authorized_keys(fabric.tag).unlink(missing_ok=True)
        (dir / FABRIC_FILE).unlink(missing_ok=True)
        raise


def authorized_keys(tag: str) -> Path:
    """The key file the hosts of fabric ``tag`` accept, in root's own
    directory (module doc: StrictModes checks it and every directory above)."""
    return OWNER_DIR / f"{tag}.authorized_keys"


def _keygen(path: Path) -> None:
    path.unlink(missing_ok=True)
    Path(f"{path}.pub").unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kraftwerk-hosts", "-f", str(path)])


def _start_sshd(fabric: Fabric, node: str, dir: Path, keys: Path) -> str:
    hdir = dir / node
    hdir.mkdir(mode=0o700)
    (hdir / "root").mkdir(mode=0o700)
    _keygen(hdir / "ssh_host_ed25519_key")
    cfg = hdir / "sshd_config"
    write_file(cfg, SSHD_CONFIG.format(addr=fabric.addresses[node], dir=hdir, keys=keys), mode=0o600)
    log = os.open(hdir / "sshd.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        subprocess.Popen(fabric.exec_argv(node, [SSHD, "-D", "-f", str(cfg), "-E", str(hdir / "sshd.log")]),
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    finally:
        os.close(log)
    kind, b64 = (hdir / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    return f"{fabric.addresses[node]} {kind} {b64}\n"


def _wait_port(addr: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((addr, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise HarnessError(f"sshd on {addr}:{port} did not start in {timeout:.0f}s") from None
            time.sleep(0.05)


def down(dir: Path) -> list[str]:
    """Remove the hosts of DIR (their sshd and every process in them) and the
    files ``up`` wrote. Idempotent: returns the namespaces removed."""
    if not os.path.lexists(dir):
        return []
    dir = trusted_dir(dir, "kraftwerk hosts down --dir", create=False)
    f = dir / FABRIC_FILE
    if not f.exists():
        return []
    try:
        tag = json.loads(f.read_text())["tag"]
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"{f}: not a file kraftwerk hosts up wrote") from None
    if not isinstance(tag, str) or not TAG_RE.fullmatch(tag):
        raise UsageError(f"{f}: not a file kraftwerk hosts up wrote (tag {tag!r})")
    if os.geteuid() != 0:
        raise UsageError("kraftwerk hosts down needs root (network namespaces)")
    gone = remove_tag(tag)
    authorized_keys(tag).unlink(missing_ok=True)
    for name in ("hosts.yaml", "id_ed25519", "id_ed25519.pub", "authorized_keys", "known_hosts"):
        (dir / name).unlink(missing_ok=True)
    for h in dir.glob("h[0-9]*"):
        if h.is_dir() and not h.is_symlink() and (h / "sshd_config").exists():
            shutil.rmtree(h, ignore_errors=True)
    f.unlink(missing_ok=True)
    return gone
