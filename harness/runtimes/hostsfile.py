"""The ssh backend's hosts file (``--hosts hosts.yaml``).

::

    defaults:                  # optional; any key may be given per host instead
      user: root
      port: 22
      key: id_ed25519          # private key; relative paths are relative to this file
      known_hosts: known_hosts # host keys to verify against (default ~/.ssh/known_hosts)
      sudo: false              # prefix commands with `sudo -n` (a non-root user)
      dir: /var/tmp/kraftwerk  # where the project is installed and nodes keep data
    hosts:
      - name: n1
        address: 192.168.56.11
      - {name: n2, address: 192.168.56.12, port: 2222}

Node ``i`` of the test (brokers then controllers: n1.., c1..) runs on the
``i``-th host; a test needs one host per node. Every problem is one line
naming the file and the host.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import UsageError

KEYS = ("user", "port", "key", "known_hosts", "sudo", "dir")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")


@dataclass(frozen=True)
class HostSpec:
    name: str
    address: str
    user: str = "root"
    port: int = 22
    key: str | None = None
    known_hosts: str | None = None
    sudo: bool = False
    dir: str = "/var/tmp/kraftwerk"


def _fail(path: Path, msg: str) -> UsageError:
    return UsageError(f"hosts file {path}: {msg}")


def _value(path: Path, where: str, k: str, v: Any, base: Path) -> Any:
    if k == "port":
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < 65536:
            raise _fail(path, f"{where}: port must be a number 1-65535, got {v!r}")
        return v
    if k == "sudo":
        if not isinstance(v, bool):
            raise _fail(path, f"{where}: sudo must be true or false, got {v!r}")
        return v
    if not isinstance(v, str) or not v.strip():
        raise _fail(path, f"{where}: {k} must be a non-empty string, got {v!r}")
    if k in ("key", "known_hosts"):
        p = (base / Path(v).expanduser()).resolve()
        return str(p)
    if k == "dir" and not v.startswith("/"):
        raise _fail(path, f"{where}: dir must be an absolute path on the host, got {v!r}")
    if k == "user" and not re.match(r"^[a-z_][a-z0-9_-]{0,31}$", v):
        raise _fail(path, f"{where}: user {v!r} is not a user name")
    return v


def _settings(path: Path, where: str, d: dict, base: Path, allowed: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if k not in allowed:
            raise _fail(path, f"{where}: unknown key {k!r} (known: {', '.join(allowed)})")
        out[k] = v if k in ("name", "address") else _value(path, where, k, v, base)
    return out


def load(path_text: str) -> list[HostSpec]:
    path = Path(path_text)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"hosts file {path} not found (kraftwerk hosts up --dir DIR writes DIR/hosts.yaml)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(path, f"cannot read it: {e}") from None
    except yaml.YAMLError as e:
        raise _fail(path, f"not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), list) or not data["hosts"]:
        raise _fail(path, "expected a mapping with a non-empty 'hosts' list")
    unknown = set(data) - {"defaults", "hosts"}
    if unknown:
        raise _fail(path, f"unknown top-level key {sorted(unknown)[0]!r} (known: defaults, hosts)")
    base = path.resolve().parent
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise _fail(path, "defaults must be a mapping")
    common = _settings(path, "defaults", defaults, base, KEYS)
    specs: list[HostSpec] = []
    for i, h in enumerate(data["hosts"], 1):
        if not isinstance(h, dict):
            raise _fail(path, f"host #{i} must be a mapping with name and address")
        where = f"host #{i}" + (f" ({h.get('name')})" if h.get("name") else "")
        own = _settings(path, where, h, base, ("name", "address", *KEYS))
        for k in ("name", "address"):
            if not isinstance(own.get(k), str):
                raise _fail(path, f"{where}: missing {k}")
        if not _NAME_RE.match(own["name"]):
            raise _fail(path, f"{where}: name {own['name']!r} must be letters, digits, '.', '_' or '-'")
        _check_address(path, where, own["address"])
        specs.append(HostSpec(**{**common, **own}))
    names = [s.name for s in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise _fail(path, f"host name {dup!r} appears twice")
    return specs


def _check_address(path: Path, where: str, addr: str) -> None:
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        if not _HOST_RE.match(addr):
            raise _fail(path, f"{where}: address {addr!r} is neither an IP address nor a host name") from None


def dump(specs: list[HostSpec], defaults: dict[str, Any]) -> str:
    """A hosts file for ``specs`` (``kraftwerk hosts up`` writes one)."""
    hosts = [{"name": s.name, "address": s.address, **({"dir": s.dir} if s.dir != HostSpec.dir else {})}
             for s in specs]
    return "# made by kraftwerk hosts up; remove with kraftwerk hosts down\n" + yaml.safe_dump(
        {"defaults": defaults, "hosts": hosts}, sort_keys=False)
