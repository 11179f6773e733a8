"""``kraftwerk node``: run one reference-broker node in this process.

Example (combined mode, one of three)::

    kraftwerk node --id 1 --roles broker,controller --listen 127.0.0.1:19091 \\
        --controller-quorum 1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093 \\
        --data-dir /tmp/k/1 --control 127.0.0.1:29091

``--config FILE`` takes server.properties-style keys: the protocol settings of
``ProtocolConfig`` (dots or underscores), ``variant.<name>=on|off``, the
runtime keys ``storage.mode``, ``log.segment.bytes``, ``clock.offset.ms``, and
the connection bounds of ``reference_impl/server/limits.py`` (Kafka's
``socket.request.max.bytes``, ``max.connections``, ``max.connections.per.ip``
and the rest). Flags win over the file.

``--listen`` and ``--control`` bind loopback addresses only, however they are
spelled, unless ``--allow-non-loopback``; ``--control`` needs ``--secret-file``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from harness.errors import HarnessError, UsageError
from harness.rundir.lease import arm
from reference_impl.core.config import ConfigError, ProtocolConfig, Variants
from reference_impl.server.addresses import FLAG as ALLOW_FLAG
from reference_impl.server.addresses import AddressError, checked_bind
from reference_impl.server.limits import SETTINGS as LIMIT_KEYS
from reference_impl.server.limits import parse_limits
from reference_impl.server.auth import SecretError, load_secret
from reference_impl.server.runtime import NodeOptions, run_node

RUNTIME_KEYS = ("storage.mode", "log.segment.bytes", "clock.offset.ms", *LIMIT_KEYS)
ROLES = ("broker", "controller")


def parse_hostport(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]") if host.startswith("[") else host
    if not sep or not host:
        raise UsageError(f"{what} {text!r} must look like HOST:PORT")
    try:
        p = int(port)
    except ValueError:
        raise UsageError(f"{what} {text!r}: port {port!r} is not a number") from None
    if not 0 < p < 65536:
        raise UsageError(f"{what} {text!r}: port {p} out of range")
    return host, p


def parse_quorum(text: str) -> dict[int, tuple[str, int]]:
    """``1@HOST:PORT,2@HOST:PORT`` (Kafka's controller.quorum.voters)."""
    out: dict[int, tuple[str, int]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        nid, sep, addr = item.partition("@")
        if not sep:
            raise UsageError(f"controller quorum entry {item!r} must look like ID@HOST:PORT")
        try:
            i = int(nid)
        except ValueError:
            raise UsageError(f"controller quorum entry {item!r}: id {nid!r} is not a number") from None
        if i in out:
            raise UsageError(f"controller quorum names node {i} twice")
        out[i] = parse_hostport(addr, "controller quorum address")
    if not out:
        raise UsageError("--controller-quorum names no voters")
    return out


def read_properties(path: str) -> dict[str, str]:
    """server.properties: ``key=value`` lines, ``#`` / ``!`` comments."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"cannot read config {path}: {e.strerror}") from None
    props: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, _, v = s.partition(sep)
                break
        else:
            raise UsageError(f"{path}:{n}: expected key=value, got {s!r}")
        props[k.strip()] = v.strip()
    return props


def build_options(
    node_id: int,
    roles: str,
    listen: str,
    quorum: str,
    data_dir: str,
    config: str | None,
    control: str | None,
    storage_mode: str | None,
    overrides: tuple[str, ...] = (),
    seed: int | None = None,
    advertise: str | None = None,
    peers: tuple[str, ...] = (),
    log_dir: str | None = None,
    secret_file: str | None = None,
    allow_non_loopback: bool = False,
) -> Any:
    role_set = _roles(node_id, roles)
    listen_addr = parse_hostport(listen, "--listen")
    voters = parse_quorum(quorum)
    if "controller" in role_set:
        if node_id not in voters:
            raise UsageError(f"node {node_id} has the controller role but is not in --controller-quorum")
    elif node_id in voters:
        raise UsageError(f"node {node_id} is a quorum voter but lacks the controller role")
    props: dict[str, str] = read_properties(config) if config else {}
    for kv in overrides:
        k, sep, v = kv.partition("=")
        if not sep:
            raise UsageError(f"--set {kv!r} must look like key=value")
        props[k.strip()] = v.strip()
    runtime = {k: props.pop(k) for k in list(props) if k in RUNTIME_KEYS}
    cfg = _protocol_config(props)
    mode = storage_mode or runtime.get("storage.mode", "os")
    if mode not in ("os", "memory-cache"):
        raise UsageError(f"storage mode {mode!r}: choose os or memory-cache")
    try:
        segment_bytes = int(runtime.get("log.segment.bytes", 64 * 1024 * 1024))
        offset = int(runtime.get("clock.offset.ms", 0))
        limits = parse_limits({k: v for k, v in runtime.items() if k in LIMIT_KEYS})
    except ValueError as e:  # LimitsError too: one line naming the setting
        raise UsageError(f"config: {e}") from None
    if segment_bytes < 1024:
        raise UsageError("log.segment.bytes must be at least 1024")
    ctl = parse_hostport(control, "--control") if control else None
    if ctl is not None and not secret_file:
        raise UsageError("--control needs --secret-file: a control endpoint never runs without a token")
    _check_loopback(listen_addr, ctl, allow_non_loopback)
    secret = _secret(secret_file)
    _make_dirs(data_dir, log_dir)
    return NodeOptions(
        node_id=node_id,
        roles=role_set,
        listen=listen_addr,
        voters=voters,
        data_dir=data_dir,
        config=cfg,
        storage_mode=mode,
        control=ctl,
        segment_bytes=segment_bytes,
        clock_offset_ms=offset,
        seed=seed,
        advertise=parse_hostport(advertise, "--advertise") if advertise else None,
        peer_addresses=_peer_addresses(peers),
        log_dir=log_dir,
        secret=secret,
        limits=limits,
        allow_non_loopback=allow_non_loopback,
    )


def _roles(node_id: int, roles: str) -> frozenset[str]:
    role_set = frozenset(r.strip() for r in roles.split(",") if r.strip())
    bad = role_set - set(ROLES)
    if not role_set or bad:
        raise UsageError(f"--roles {roles!r}: choose broker, controller or both (broker,controller)")
    if node_id < 0:
        raise UsageError(f"--id {node_id} must not be negative")
    return role_set


def _protocol_config(props: dict[str, str]) -> Any:
    """ProtocolConfig from what is left of the properties (``variant.*`` included)."""
    variant_overrides: dict[str, bool] = {}
    for k in [k for k in props if k.startswith("variant.")]:
        try:
            name, value = Variants.parse_assignment(f"{k[len('variant.'):]}={props.pop(k)}")
        except ConfigError as e:
            raise UsageError(str(e)) from None
        variant_overrides[name] = value
    try:
        variants = Variants().with_overrides(variant_overrides)
        return ProtocolConfig.from_properties(props, variants=variants)
    except ConfigError as e:
        raise UsageError(f"config: {e}") from None


def _secret(secret_file: str | None) -> bytes | None:
    if not secret_file:
        return None
    try:
        return load_secret(secret_file)
    except SecretError as e:
        raise UsageError(str(e)) from None


def _make_dirs(data_dir: str, log_dir: str | None) -> None:
    if not data_dir:
        raise UsageError("--data-dir is required")
    for flag, d in (("--data-dir", data_dir), ("--log-dir", log_dir)):
        try:
            if d:
                os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise UsageError(f"{flag} {d}: {e.strerror}") from None


def _peer_addresses(peers: tuple[str, ...]) -> dict[int, tuple[str, int]]:
    out: dict[int, tuple[str, int]] = {}
    for item in peers:
        for part in item.split(","):
            if not part.strip():
                continue
            nid, sep, addr = part.partition("=")
            if not sep or not nid.strip().isdigit():
                raise UsageError(f"--peer {part!r} must look like ID=HOST:PORT")
            out[int(nid)] = parse_hostport(addr, "--peer address")
    return out


def _check_loopback(listen: tuple[str, int], control: tuple[str, int] | None, allowed: bool) -> None:
    """An address other machines reach lets them speak the node's internal
    RPC and call its control endpoint: only when asked for (the real-host
    backends ask), and then with a warning. Resolved as the node binds it,
    so no spelling (0, ::0, a host name) gets past."""
    for flag, addr in (("--listen", listen), ("--control", control)):
        if addr is None:
            continue
        try:
            _, far = checked_bind(flag, addr[0], addr[1], allowed)
        except AddressError as e:
            raise UsageError(str(e)) from None
        if far:
            click.echo(f"kraftwerk: warning: {flag} {addr[0]}:{addr[1]} listens on {', '.join(far)}, "
                       "reachable beyond this machine", err=True)


def register(group: click.Group) -> None:
    @group.command("node")
    @click.option("--id", "node_id", type=int, required=True, help="node id (broker.id / node.id)")
    @click.option("--roles", default="broker,controller", show_default=True, help="broker, controller or both")
    @click.option("--listen", required=True, help="HOST:PORT for clients and peers")
    @click.option("--controller-quorum", "quorum", required=True, help="ID@HOST:PORT,... of the controllers")
    @click.option("--data-dir", required=True, help="log and checkpoint directory")
    @click.option("--log-dir", default=None, help="trace.jsonl, node.log, node.pid (default: --data-dir)")
    @click.option("--config", "config", default=None, help="server.properties-style file")
    @click.option("--control", default=None, help="HOST:PORT of the HTTP/JSON control endpoint")
    @click.option(
        "--storage-mode",
        type=click.Choice(["os", "memory-cache"]),
        default=None,
        help="memory-cache keeps the last-fsynced state in memory so /power-loss can drop un-fsynced writes",
    )
    @click.option("--set", "overrides", multiple=True, help="extra key=value config (repeatable)")
    @click.option("--seed", type=int, default=None, help="seed for the node's randomness")
    @click.option("--advertise", default=None, help="HOST:PORT registered for clients (Metadata); default --listen")
    @click.option("--peer", "peers", multiple=True, help="ID=HOST:PORT[,...]: where to reach a peer node (wins over registrations)")
    @click.option("--secret-file", default=None, type=click.Path(dir_okay=False),
                  help="cluster secret (a 0600 file): peers and control callers must present it")
    @click.option(ALLOW_FLAG, "allow_non_loopback", is_flag=True,
                  help="allow --listen/--control on an address that is not loopback (warns)")
    @click.option("-v", "--verbose", is_flag=True, help="debug logging in node.log")
    def node_cmd(node_id, roles, listen, quorum, data_dir, log_dir, config, control, storage_mode, overrides, seed,
                 advertise, peers, secret_file, allow_non_loopback, verbose):
        """Run one reference-broker node (foreground; SIGTERM = controlled shutdown)."""
        arm()  # a harness-started node ends with its harness; a `cluster up` node has no lease
        opts = build_options(
            node_id, roles, listen, quorum, data_dir, config, control, storage_mode, overrides, seed, advertise, peers,
            log_dir, secret_file, allow_non_loopback,
        )
        try:
            code = run_node(opts, verbose)
        except AddressError as e:  # build_options said so already; the runtime holds the rule for any caller
            raise UsageError(str(e)) from None
        except OSError as e:
            raise HarnessError(f"node {node_id}: {e.strerror or e}") from None
        sys.exit(code)
