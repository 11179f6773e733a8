"""The cluster contract: what a fault needs from a runtime, in Jepsen's split
of concerns (control of the nodes' processes, the network between them, their
clocks, and what the protocol's state says about targets).

Every runtime implements it: the local backend (processes on 127.0.0.1
behind per-link proxies), the deterministic simulator, and the real-host
backends. They implement it structurally: a ``typing.Protocol`` needs no
import, so the simulator satisfies it without importing anything above it,
and the nemeses in this package are typed with it and drive nothing else.

Nodes are named by strings (``n1``, ``c1``, ...), the same names on every
runtime, so a fault recorded by one runtime means the same nodes on another.
The pseudo-node :data:`CLIENT` stands for the test's clients in link pairs:
``("client", "n1")`` is the path from every client to ``n1``.

A runtime declares the faults it can make as :class:`Capability` values; a
fault needing one it lacks is refused before the run starts
(:func:`require`), with a one-line reason.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

#: the pseudo-node that stands for every client of the test in a link pair
CLIENT = "client"

#: a directed link: bytes from the first to the second
Link = tuple[str, str]


class Capability(str, Enum):
    """One kind of fault a runtime can make."""

    KILL = "kill"  #: SIGKILL a node's process (its page cache survives)
    TERMINATE = "terminate"  #: SIGTERM: a clean, controlled shutdown
    PAUSE = "pause"  #: SIGSTOP / SIGCONT
    POWER_LOSS = "power-loss"  #: the node's un-fsynced writes are lost, then it is down
    LOSE_UNFSYNCED = "lose-unfsynced"  #: un-fsynced writes lost by the filesystem (a FUSE layer)
    #: a power loss that keeps a random prefix of each file's un-fsynced
    #: writes (a torn tail), made by the filesystem (a FUSE layer)
    TORN_WRITE = "torn-write"
    CLOCK = "clock"  #: a node's clock offset
    CLOCK_STROBE = "clock-strobe"  #: a node's clock flipped back and forth
    PARTITION = "partition"  #: node-to-node grudges
    PARTITION_CLIENTS = "partition-clients"  #: client-to-node links cut like node links
    LATENCY = "latency"  #: added delay per link
    LOSS = "loss"  #: random loss per link
    EXEC = "exec"  #: run a command on a node's host
    FILES = "files"  #: upload / download files of a node's host
    #: move a partition's replicas (AlterPartitionReassignments)
    REASSIGN = "reassign"
    #: remove a broker's registration (UnregisterBroker, KIP-631)
    UNREGISTER = "unregister"


class Unsupported(ValueError):
    """A fault the runtime cannot make; the message is one line for the user."""


#: where a capability some runtimes lack can be had (the refusal says so)
WHERE: dict[Capability, str] = {
    Capability.TORN_WRITE: "it is made by the kraftwerk fs mount under each node (--storage lazyfs on "
                           "--backend netns, docker or ssh)",
    Capability.POWER_LOSS: "on --db kafka it is made by the kraftwerk fs mount under each node (--storage lazyfs "
                           "on --backend netns, docker or ssh)",
    Capability.LOSE_UNFSYNCED: "it is made by the kraftwerk fs mount under each node (--storage lazyfs on "
                               "--backend netns, docker or ssh)",
}


def require(runtime: str, have: frozenset[Capability] | frozenset[str], needs: Iterable[Capability], what: str) -> None:
    """Refuse ``what`` (a fault's name) before a run starts if ``runtime``
    lacks one of the capabilities it ``needs``."""
    values = {getattr(h, "value", h) for h in have}  # a runtime may declare plain strings
    missing = sorted(c.value for c in needs if c.value not in values)
    if missing:
        hints = [WHERE[Capability(m)] for m in missing if Capability(m) in WHERE]
        raise Unsupported(f"{what} needs {', '.join(missing)}, which the {runtime} runtime cannot make"
                          + (f": {hints[0]}" if hints else ""))


@runtime_checkable
class NodeControl(Protocol):
    """The db's processes, one per node."""

    def node_names(self) -> list[str]:
        """Every node, brokers then controllers (combined nodes once)."""
        ...

    def brokers(self) -> list[str]:
        ...

    def controllers(self) -> list[str]:
        ...

    def start(self, node: str) -> None:
        """Start a node that is down (no-op if it runs)."""
        ...

    def kill(self, node: str) -> None:
        """SIGKILL: the process is gone at once, what it wrote to the OS stays."""
        ...

    def terminate(self, node: str) -> None:
        """SIGTERM: the node shuts down cleanly (controlled shutdown), then is down."""
        ...

    def pause(self, node: str) -> None:
        """SIGSTOP: the process stays, does nothing, answers nobody."""
        ...

    def resume(self, node: str) -> None:
        """SIGCONT a paused node (no-op otherwise)."""
        ...

    def power_loss(self, node: str) -> None:
        """Every file of the node reverts to its last fsync, then the node is down."""
        ...

    def dead_nodes(self) -> list[str]:
        ...

    def paused_nodes(self) -> list[str]:
        ...


@runtime_checkable
class ShutdownOutcomes(Protocol):
    """Node control of a runtime that can tell how a SIGTERM ended (apart
    from :class:`NodeControl`; the nemesis treats a runtime without it as
    unable to tell, ``nemesis.faults.UncleanLedger``).

    A clean shutdown is one that wrote the node's clean-shutdown marker
    (Kafka's ``LogManager.shutdown`` writes ``.kafka_cleanshutdown`` with the
    broker epoch; the reference broker ``clean-shutdown``). A process killed
    before that, as the grace period's SIGKILL kills a controlled shutdown
    that is stuck, leaves none: at its next start the broker registers with
    no previous broker epoch and the controller counts an unclean shutdown
    (KIP-966)."""

    def last_shutdown_clean(self, node: str) -> bool | None:
        """How the node's latest SIGTERM ended: True if it went down with its
        clean-shutdown marker written, False if without (killed by the grace,
        or halted before the marker); None while it has not gone down since
        (or was never sent one). The answer stays until the next SIGTERM,
        whatever starts the node in between."""
        ...


@runtime_checkable
class TornWrites(Protocol):
    """Node control of a runtime with :attr:`Capability.TORN_WRITE` (apart
    from :class:`NodeControl`: the others need not have it)."""

    def torn_power_loss(self, node: str) -> None:
        """The node is down and each of its files keeps its fsynced bytes
        plus a random (seeded) prefix of what was written after: a power
        loss in the middle of the page cache's write-back."""
        ...


@runtime_checkable
class Reassignments(Protocol):
    """Node control of a runtime with :attr:`Capability.REASSIGN`."""

    def reassign(self, key: str, replicas: list[str]) -> None:
        """Ask the controller to move the partition ``key`` to exactly these
        replicas (new ones catch up and join the ISR, then the others are
        removed; the leader moves if it is removed)."""
        ...


@runtime_checkable
class Network(Protocol):
    """The links between nodes (and from the clients, :data:`CLIENT`)."""

    def cut(self, pairs: Iterable[Link]) -> None:
        """Make the grudge exactly ``pairs``: bytes from a to b stop for each
        ``(a, b)``; every other link works. ``cut([])`` heals."""
        ...

    def set_latency(self, links: Iterable[Link], ms: float, jitter_ms: float) -> None:
        """Add ``ms`` (plus up to ``jitter_ms``) to each link; 0 removes it."""
        ...

    def set_loss(self, links: Iterable[Link], probability: float) -> None:
        """Drop each message on the links with ``probability``; 0 removes it."""
        ...


@runtime_checkable
class Clock(Protocol):
    """Each node's clock, as the node reads it."""

    def set_offset(self, node: str, ms: int) -> None:
        """The node's clock reads ``ms`` ahead of true time (negative: behind)."""
        ...

    def strobe(self, node: str, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        """Flip the node's offset between ``delta_ms`` and 0 every
        ``period_ms`` for ``duration_ms``, then leave it at 0."""
        ...

    def reset(self, node: str) -> None:
        ...


@runtime_checkable
class Observer(Protocol):
    """What the protocol's state says, for targets that depend on it (a
    partition's leader, the active controller). Answers may be stale or
    unknown (None, []) while the cluster is in flux."""

    def keys(self) -> list[str]:
        """The test's topic-partitions, spelt ``<topic>-<partition>``."""
        ...

    def leader_of(self, key: str) -> str | None:
        ...

    def replicas_of(self, key: str) -> list[str]:
        """The partition's replicas as a Metadata response lists them:
        during a reassignment (KIP-455) the union of the target and the
        replicas leaving, on every runtime."""
        ...

    def isr_of(self, key: str) -> list[str]:
        ...

    def own_isrs(self, node: str) -> dict[str, list[str]] | None:
        """Each partition's ISR as the broker ``node`` itself lists it,
        by key (``{}``: it is down or does not answer; None: this runtime
        cannot ask one broker alone). A broker answers only once its
        metadata holds its own running incarnation's registration (Kafka
        opens its listeners after the controller says it caught up to its
        ``RegisterBrokerRecord``), so an ISR that lists it there was
        changed after that registration: never the previous incarnation's,
        which :meth:`isr_of` may still show from a lagging broker."""
        ...

    def active_controller(self) -> str | None:
        ...

    def broker_epoch(self, node: str) -> int | None:
        """The broker epoch the node's running incarnation registered with
        (Kafka's ``Successfully registered broker ... with broker epoch``);
        None while it is down or has not registered since it started. A
        restarted broker's new incarnation cannot register while its old
        one's session lives, and every controller failover grants the
        registered incarnations a fresh session: until it registers, the
        ISR the controller reports may still count the old incarnation's
        log (a kill's, or a power loss's lost tail)."""
        ...


class Cluster(Protocol):
    """One runtime's cluster, as a fault sees it."""

    runtime: str
    capabilities: frozenset[Capability]

    def after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Call ``fn`` once ``delay_ms`` of the runtime's time has passed
        (virtual time in the simulator): a fault's follow-up steps."""
        ...

    def step_after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """As :meth:`after`, for a story's timers: its looks at the cluster
        and the steps they set (``nemesis.stories``), and a replay's
        recorded steps (``nemesis.replay``). The simulator runs such a
        timer ahead of the nodes' and clients' events of its millisecond,
        whenever it was set (``EventLoop.first``): a replay sets a step
        when its op starts, the told story when a look found its moment,
        and both act at the same point, so a message due that millisecond
        meets the same side of a cut. Real clocks have no such order: as
        :meth:`after`."""
        ...

    @property
    def nodes(self) -> NodeControl: ...

    @property
    def net(self) -> Network: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def observer(self) -> Observer: ...


@runtime_checkable
class Remote(Protocol):
    """What a db needs from a real host's backend (local, netns, docker, ssh):
    commands as argv lists, never an unquoted shell string."""

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        """Run ``argv`` on the node's host: (exit status, stdout, stderr)."""
        ...

    def upload(self, node: str, local: Path, remote: str) -> None:
        ...

    def download(self, node: str, remote: str, local: Path) -> None:
        ...

    def start_daemon(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        """Start a long-running process on the node's host; its pid there."""
        ...

    def signal(self, node: str, sig: int) -> None:
        """Signal the node's daemon (SIGKILL, SIGTERM, SIGSTOP, SIGCONT)."""
        ...

    def address(self, node: str) -> str:
        """Where others reach the node's host (an IP or a hostname)."""
        ...

    def teardown(self) -> None:
        """Remove everything the backend made: nothing outlives the run."""
        ...


__all__ = [
    "CLIENT",
    "Capability",
    "Clock",
    "Cluster",
    "Link",
    "Network",
    "NodeControl",
    "Observer",
    "Remote",
    "ShutdownOutcomes",
    "TornWrites",
    "Reassignments",
    "Unsupported",
    "require",
]
