"""Every message a node can receive or send, as frozen dataclasses.

This one module is the vocabulary shared by the protocol core, the asyncio
server (which translates Kafka wire requests into these and msgpack-frames the
inter-node ones) and the simulator (which delivers them over a virtual network).

Groups:

* client <-> broker — what Kafka clients ask (Produce, Fetch, ListOffsets,
  Metadata, OffsetForLeaderEpoch, InitProducerId, CreateTopics). Each request
  carries an opaque ``ref`` the runtime uses to route the reply; the core never
  looks inside it.
* broker <-> broker — replica fetch and OffsetsForLeaderEpoch (seed 000,
  "Leader epochs & epoch-based truncation").
* broker <-> controller — registration, heartbeats, AlterPartition, CreateTopics
  forwarding, and metadata-log fetches (brokers are KRaft observers).
* controller <-> controller — the KRaft quorum (seed 004): Vote,
  BeginQuorumEpoch, Fetch of the metadata log.
* metadata records — what the metadata log contains.

Error codes are Kafka's numeric codes (see :class:`Errors`).

The messages every acknowledged write passes through (Produce, the
partition-level fetch pieces, replica, client and Raft fetches, ``Batch``),
and the clients' Metadata answers and the CreateTopics a broker forwards
until a controller takes it, spell out their ``__init__``, setting each field through
``object.__setattr__`` exactly as the generated one does. They stay frozen;
the point is speed when compiled (reference_impl.accel): mypyc leaves a
dataclass's generated ``__init__`` interpreted (~0.7 us a call here), but
compiles an explicit one to direct slot writes (~0.03 us). Each of these
messages is built one to two times per acknowledged send.
tests/core/test_explicit_inits.py holds every explicit ``__init__`` to the
fields and defaults its dataclass declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

NodeId = int
NO_LEADER: Final = -1


class Errors:
    """Kafka protocol error codes used by the core (Kafka's numbering)."""

    NONE: Final = 0
    OFFSET_OUT_OF_RANGE: Final = 1
    CORRUPT_MESSAGE: Final = 2
    UNKNOWN_TOPIC_OR_PARTITION: Final = 3
    LEADER_NOT_AVAILABLE: Final = 5
    NOT_LEADER_OR_FOLLOWER: Final = 6
    REQUEST_TIMED_OUT: Final = 7
    MESSAGE_TOO_LARGE: Final = 10
    INVALID_TOPIC_EXCEPTION: Final = 17
    NOT_CONTROLLER: Final = 41
    INVALID_REQUEST: Final = 42
    NOT_ENOUGH_REPLICAS: Final = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
    INVALID_REPLICATION_FACTOR: Final = 38
    INVALID_REPLICA_ASSIGNMENT: Final = 39
    TOPIC_ALREADY_EXISTS: Final = 36
    INVALID_PARTITIONS: Final = 37
    INVALID_CONFIG: Final = 40
    POLICY_VIOLATION: Final = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
    DUPLICATE_SEQUENCE_NUMBER: Final = 46
    INVALID_PRODUCER_EPOCH: Final = 47
    OPERATION_NOT_ATTEMPTED: Final = 55
    FENCED_LEADER_EPOCH: Final = 74
    UNKNOWN_LEADER_EPOCH: Final = 75
    OFFSET_NOT_AVAILABLE: Final = 78
    STALE_BROKER_EPOCH: Final = 77
    DUPLICATE_BROKER_REGISTRATION: Final = 101
    UNKNOWN_PRODUCER_ID: Final = 59
    INVALID_RECORD: Final = 87
    FENCED_INSTANCE_ID: Final = 82
    INVALID_UPDATE_VERSION: Final = 95
    INELIGIBLE_REPLICA: Final = 107
    NEW_LEADER_ELECTED: Final = 108
    NO_REASSIGNMENT_IN_PROGRESS: Final = 85
    BROKER_ID_NOT_REGISTERED: Final = 102
    # Raft
    FENCED_EPOCH: Final = 74  # Raft reuses FENCED_LEADER_EPOCH for stale quorum epochs
    UNKNOWN_SERVER_ERROR: Final = -1


#: a TopicPartition's hash keeps the low bits of its field tuple's hash
#: (what a dict's table indexes by), as many as a compiled int holds unboxed
#: (mypyc: 63-bit signed)
_HASH_BITS: Final = 61
_HASH_MASK: Final = (1 << _HASH_BITS) - 1


@dataclass(frozen=True, slots=True, eq=False, init=False)
class TopicPartition:
    topic: str
    partition: int
    #: hash((topic, partition)), computed once: a partition is hashed several
    #: times per simulated message (every dict keyed by it), and building and
    #: hashing that tuple each time was ~4% of a simulated seed. Kept to
    #: ``_HASH_BITS`` bits, so the compiled class holds it as an unboxed int:
    #: a full 64-bit hash does not fit one (it is a heap int, converted back
    #: on every lookup: ~100 instructions for a third of the partitions).
    #: Not a value of the partition: no repr, no equality, not sent (codec
    #: takes the init fields only).
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    #: str(self), Kafka's ``topic-N``, likewise computed once (a produce's
    #: completion and its trace event spell it)
    _name: str = field(default="", init=False, repr=False, compare=False)

    # Spelt out, so mypyc compiles them (see Batch): the generated methods
    # are interpreted Python. They mean what dataclass(eq=True, order=True)
    # would: field tuples compared, the hash of the field tuple.
    def __init__(self, topic: str, partition: int) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "_hash", hash((topic, partition)) & _HASH_MASK)
        object.__setattr__(self, "_name", f"{topic}-{partition}")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self.partition == other.partition and self.topic == other.topic

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return (self.topic, self.partition) <= (other.topic, other.partition)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return (self.topic, self.partition) > (other.topic, other.partition)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return (self.topic, self.partition) >= (other.topic, other.partition)

    def __str__(self) -> str:  # Kafka's own spelling, also the history key
        return self._name


# --------------------------------------------------------------------------
# Log contents
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Batch:
    """A record batch as the core sees it.

    ``payload`` is opaque to the core: the server stores the client's v2
    record-batch bytes (and rewrites baseOffset / PartitionLeaderEpoch when it
    serialises), the simulator stores a tuple of values. ``count`` is the number
    of records, so the batch covers offsets [base_offset, base_offset + count).
    Producer fields drive idempotent de-duplication (last five batches per
    producer id). ``max_timestamp`` is the largest record timestamp in the
    batch as its v2 header says (Kafka's ``maxTimestamp``; -1, NO_TIMESTAMP,
    when the runtime gives none, as the simulator's do): ListOffsets by
    timestamp finds a batch by it, and the runtime that can read the records
    picks the record inside (``server/records.py``).
    """

    base_offset: int
    leader_epoch: int
    count: int
    payload: Any
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    max_timestamp: int = -1

    def __init__(
        self, base_offset: int, leader_epoch: int, count: int, payload: Any, producer_id: int = -1,
        producer_epoch: int = -1, base_sequence: int = -1, max_timestamp: int = -1,
    ) -> None:
        object.__setattr__(self, "base_offset", base_offset)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "producer_id", producer_id)
        object.__setattr__(self, "producer_epoch", producer_epoch)
        object.__setattr__(self, "base_sequence", base_sequence)
        object.__setattr__(self, "max_timestamp", max_timestamp)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


# --------------------------------------------------------------------------
# Client <-> broker
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class ProduceRequest:
    ref: Any
    tp: TopicPartition
    acks: int  # 0, 1, -1
    count: int
    payload: Any
    timeout_ms: int = 30000
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    #: the batches' largest record timestamp (-1: none given); see :class:`Batch`
    max_timestamp: int = -1

    def __init__(
        self, ref: Any, tp: TopicPartition, acks: int, count: int, payload: Any, timeout_ms: int = 30000,
        producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, max_timestamp: int = -1,
    ) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "acks", acks)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "timeout_ms", timeout_ms)
        object.__setattr__(self, "producer_id", producer_id)
        object.__setattr__(self, "producer_epoch", producer_epoch)
        object.__setattr__(self, "base_sequence", base_sequence)
        object.__setattr__(self, "max_timestamp", max_timestamp)


@dataclass(frozen=True, slots=True, init=False)
class ProduceResponse:
    ref: Any
    tp: TopicPartition
    error: int
    base_offset: int = -1
    log_start_offset: int = -1

    def __init__(
        self, ref: Any, tp: TopicPartition, error: int, base_offset: int = -1, log_start_offset: int = -1,
    ) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "base_offset", base_offset)
        object.__setattr__(self, "log_start_offset", log_start_offset)


@dataclass(frozen=True, slots=True, init=False)
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int = -1  # -1: client did not send one
    last_fetched_epoch: int = -1  # replica fetches: epoch of the last fetched batch
    log_start_offset: int = -1
    max_bytes: int = 1 << 20

    def __init__(
        self, tp: TopicPartition, fetch_offset: int, current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
        log_start_offset: int = -1, max_bytes: int = 1 << 20,
    ) -> None:
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "fetch_offset", fetch_offset)
        object.__setattr__(self, "current_leader_epoch", current_leader_epoch)
        object.__setattr__(self, "last_fetched_epoch", last_fetched_epoch)
        object.__setattr__(self, "log_start_offset", log_start_offset)
        object.__setattr__(self, "max_bytes", max_bytes)


@dataclass(frozen=True, slots=True, init=False)
class FetchPartitionResponse:
    tp: TopicPartition
    error: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    batches: tuple[Batch, ...] = ()
    #: set when the follower's last fetched epoch diverges from the leader's log:
    #: (epoch, end offset) it must truncate to (KIP-101 / KIP-320 inline divergence)
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch) hint

    def __init__(
        self, tp: TopicPartition, error: int, high_watermark: int = -1, last_stable_offset: int = -1,
        log_start_offset: int = -1, batches: tuple[Batch, ...] = (), diverging_epoch: tuple[int, int] | None = None,
        current_leader: tuple[int, int] | None = None,
    ) -> None:
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "high_watermark", high_watermark)
        object.__setattr__(self, "last_stable_offset", last_stable_offset)
        object.__setattr__(self, "log_start_offset", log_start_offset)
        object.__setattr__(self, "batches", batches)
        object.__setattr__(self, "diverging_epoch", diverging_epoch)
        object.__setattr__(self, "current_leader", current_leader)


@dataclass(frozen=True, slots=True, init=False)
class ClientFetchRequest:
    """A consumer fetch: only offsets below the HW are visible."""

    ref: Any
    partitions: tuple[FetchPartitionRequest, ...]
    max_wait_ms: int = 500
    min_bytes: int = 1

    def __init__(
        self, ref: Any, partitions: tuple[FetchPartitionRequest, ...], max_wait_ms: int = 500, min_bytes: int = 1,
    ) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "partitions", partitions)
        object.__setattr__(self, "max_wait_ms", max_wait_ms)
        object.__setattr__(self, "min_bytes", min_bytes)


@dataclass(frozen=True, slots=True, init=False)
class ClientFetchResponse:
    ref: Any
    partitions: tuple[FetchPartitionResponse, ...]

    def __init__(self, ref: Any, partitions: tuple[FetchPartitionResponse, ...]) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "partitions", partitions)


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    """``timestamp``: a record timestamp (>= 0) or one of Kafka's special
    values, :data:`LATEST_TIMESTAMP` and the others below."""

    ref: Any
    tp: TopicPartition
    timestamp: int
    current_leader_epoch: int = -1


#: ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants)
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4
LATEST_TIERED_TIMESTAMP: Final = -5


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    """``timestamp`` is the found record's (-1 for the special values but
    max timestamp). For a lookup by timestamp (and max timestamp) ``batch``
    is the batch the answer lies in, and ``offset``/``timestamp`` are the
    batch's first offset and its max timestamp: a runtime that can read the
    records narrows them to the record (the first at or after the target;
    for max timestamp, the first with the batch's max timestamp)."""

    ref: Any
    tp: TopicPartition
    error: int
    offset: int = -1
    leader_epoch: int = -1
    timestamp: int = -1
    batch: Batch | None = None


@dataclass(frozen=True, slots=True, init=False)
class MetadataRequest:
    ref: Any
    topics: tuple[str, ...] | None = None  # None: all topics

    def __init__(self, ref: Any, topics: tuple[str, ...] | None = None) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "topics", topics)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: NodeId
    host: str
    port: int


@dataclass(frozen=True, slots=True, init=False)
class PartitionMetadata:
    tp: TopicPartition
    error: int
    leader: NodeId
    leader_epoch: int
    replicas: tuple[NodeId, ...]
    isr: tuple[NodeId, ...]
    elr: tuple[NodeId, ...] = ()
    offline_replicas: tuple[NodeId, ...] = ()

    def __init__(self, tp: TopicPartition, error: int, leader: NodeId, leader_epoch: int, replicas: tuple[NodeId, ...],
                 isr: tuple[NodeId, ...], elr: tuple[NodeId, ...] = (),
                 offline_replicas: tuple[NodeId, ...] = ()) -> None:
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "leader", leader)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "elr", elr)
        object.__setattr__(self, "offline_replicas", offline_replicas)


@dataclass(frozen=True, slots=True, init=False)
class TopicMetadata:
    name: str
    error: int
    partitions: tuple[PartitionMetadata, ...]

    def __init__(self, name: str, error: int, partitions: tuple[PartitionMetadata, ...]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "partitions", partitions)


@dataclass(frozen=True, slots=True, init=False)
class MetadataResponse:
    ref: Any
    brokers: tuple[BrokerEndpoint, ...]
    controller_id: NodeId
    topics: tuple[TopicMetadata, ...]

    def __init__(self, ref: Any, brokers: tuple[BrokerEndpoint, ...], controller_id: NodeId,
                 topics: tuple[TopicMetadata, ...]) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "brokers", brokers)
        object.__setattr__(self, "controller_id", controller_id)
        object.__setattr__(self, "topics", topics)


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequest:
    """Used by consumers (KIP-320 validation) and by followers (KIP-101)."""

    ref: Any  # None for a replica request sent broker->broker
    tp: TopicPartition
    leader_epoch: int  # the epoch whose end offset is asked for
    current_leader_epoch: int = -1
    replica_id: NodeId = -1  # -1 for consumers


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponse:
    ref: Any
    tp: TopicPartition
    error: int
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    ref: Any
    transactional_id: str | None = None


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    ref: Any
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()  # e.g. (("min.insync.replicas", "2"),)
    assignments: tuple[tuple[NodeId, ...], ...] | None = None  # explicit replica lists per partition


@dataclass(frozen=True, slots=True, init=False)
class CreateTopicsRequest:
    """From a client to a broker (which forwards to the active controller) or
    from a broker to the controller (``ref`` is then the forwarding broker's token)."""

    ref: Any
    topics: tuple[NewTopic, ...]
    timeout_ms: int = 30000
    #: made by a broker for itself (``__consumer_offsets``); never set from the wire
    internal: bool = False

    def __init__(self, ref: Any, topics: tuple[NewTopic, ...], timeout_ms: int = 30000, internal: bool = False) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "timeout_ms", timeout_ms)
        object.__setattr__(self, "internal", internal)


@dataclass(frozen=True, slots=True, init=False)
class CreateTopicResult:
    name: str
    error: int
    message: str = ""

    def __init__(self, name: str, error: int, message: str = "") -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "message", message)


@dataclass(frozen=True, slots=True, init=False)
class CreateTopicsResponse:
    ref: Any
    results: tuple[CreateTopicResult, ...]

    def __init__(self, ref: Any, results: tuple[CreateTopicResult, ...]) -> None:
        object.__setattr__(self, "ref", ref)
        object.__setattr__(self, "results", results)


#: IncrementalAlterConfigs resource types and operations (Kafka's ConfigResource.Type, AlterConfigOp.OpType)
RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4
CONFIG_SET: Final = 0
CONFIG_DELETE: Final = 1
CONFIG_APPEND: Final = 2
CONFIG_SUBTRACT: Final = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    op: int  # CONFIG_SET | CONFIG_DELETE | CONFIG_APPEND | CONFIG_SUBTRACT
    value: str | None = None


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: int  # RESOURCE_TOPIC | RESOURCE_BROKER
    name: str
    ops: tuple[AlterConfigOp, ...]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequest:
    """From a client to a broker (forwarded to the active controller) or from
    a broker to the controller (``ref`` is then the forwarding broker's
    token), as CreateTopics. Committed as ``ConfigRecord``s."""

    ref: Any
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource_type: int
    name: str
    error: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResponse:
    ref: Any
    results: tuple[AlterConfigsResult, ...]


# --------------------------------------------------------------------------
# Broker <-> broker (replication)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class ReplicaFetchRequest:
    """A follower's fetch: fetch offset = its LEO, current leader epoch, last
    fetched epoch (seed 001 §2.2.2). ``broker_epoch`` lets the leader fence a
    rebooted follower's stale fetch state (seed 000, broker-epoch fencing)."""

    replica_id: NodeId
    broker_epoch: int
    correlation_id: int
    partitions: tuple[FetchPartitionRequest, ...]
    max_wait_ms: int = 500
    min_bytes: int = 1

    def __init__(
        self, replica_id: NodeId, broker_epoch: int, correlation_id: int, partitions: tuple[FetchPartitionRequest, ...],
        max_wait_ms: int = 500, min_bytes: int = 1,
    ) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "broker_epoch", broker_epoch)
        object.__setattr__(self, "correlation_id", correlation_id)
        object.__setattr__(self, "partitions", partitions)
        object.__setattr__(self, "max_wait_ms", max_wait_ms)
        object.__setattr__(self, "min_bytes", min_bytes)


@dataclass(frozen=True, slots=True, init=False)
class ReplicaFetchResponse:
    leader_id: NodeId
    correlation_id: int
    error: int
    partitions: tuple[FetchPartitionResponse, ...]

    def __init__(
        self, leader_id: NodeId, correlation_id: int, error: int, partitions: tuple[FetchPartitionResponse, ...],
    ) -> None:
        object.__setattr__(self, "leader_id", leader_id)
        object.__setattr__(self, "correlation_id", correlation_id)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "partitions", partitions)


# OffsetForLeaderEpochRequest/Response above are reused broker->broker with ref=None.


# --------------------------------------------------------------------------
# Broker <-> controller
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class BrokerRegistrationRequest:
    broker_id: NodeId
    incarnation_id: str  # unique per process start
    endpoint: BrokerEndpoint
    #: broker epoch from the clean-shutdown marker, or -1 after an unclean
    #: shutdown (KIP-966 "clean shutdown detection")
    previous_broker_epoch: int = -1

    def __init__(
        self, broker_id: NodeId, incarnation_id: str, endpoint: BrokerEndpoint, previous_broker_epoch: int = -1,
    ) -> None:
        object.__setattr__(self, "broker_id", broker_id)
        object.__setattr__(self, "incarnation_id", incarnation_id)
        object.__setattr__(self, "endpoint", endpoint)
        object.__setattr__(self, "previous_broker_epoch", previous_broker_epoch)


@dataclass(frozen=True, slots=True, init=False)
class BrokerRegistrationResponse:
    error: int
    broker_epoch: int = -1

    def __init__(self, error: int, broker_epoch: int = -1) -> None:
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "broker_epoch", broker_epoch)


@dataclass(frozen=True, slots=True, init=False)
class BrokerHeartbeatRequest:
    broker_id: NodeId
    broker_epoch: int
    metadata_offset: int  # how far this broker has applied the metadata log
    want_fence: bool = False
    want_shutdown: bool = False

    def __init__(
        self, broker_id: NodeId, broker_epoch: int, metadata_offset: int, want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> None:
        object.__setattr__(self, "broker_id", broker_id)
        object.__setattr__(self, "broker_epoch", broker_epoch)
        object.__setattr__(self, "metadata_offset", metadata_offset)
        object.__setattr__(self, "want_fence", want_fence)
        object.__setattr__(self, "want_shutdown", want_shutdown)


@dataclass(frozen=True, slots=True, init=False)
class BrokerHeartbeatResponse:
    error: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False

    def __init__(
        self, error: int, is_caught_up: bool = False, is_fenced: bool = True, should_shut_down: bool = False,
    ) -> None:
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "is_caught_up", is_caught_up)
        object.__setattr__(self, "is_fenced", is_fenced)
        object.__setattr__(self, "should_shut_down", should_shut_down)


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    tp: TopicPartition
    leader_epoch: int
    partition_epoch: int
    #: proposed ISR with each member's broker epoch (addBrokerEpochToIsr)
    new_isr: tuple[tuple[NodeId, int], ...]
    leader_recovery_state: int = 0  # 0 RECOVERED, 1 RECOVERING


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: NodeId
    broker_epoch: int
    correlation_id: int
    items: tuple[AlterPartitionItem, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    tp: TopicPartition
    error: int
    leader_id: NodeId = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[NodeId, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    correlation_id: int
    error: int  # top-level (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...)
    results: tuple[AlterPartitionResult, ...] = ()


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    """Administrative: ask the local broker to shut down cleanly (SIGTERM)."""

    reason: str = "SIGTERM"


# --------------------------------------------------------------------------
# KRaft quorum (controller <-> controller, and observers fetching)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_id: NodeId
    candidate_epoch: int
    last_offset_epoch: int
    last_offset: int  # end offset of the candidate's log
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    voter_id: NodeId
    error: int
    epoch: int
    leader_id: NodeId
    vote_granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: NodeId
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    voter_id: NodeId
    error: int
    epoch: int
    leader_id: NodeId


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: NodeId
    leader_epoch: int
    preferred_successors: tuple[NodeId, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """One entry of the metadata log: a record stamped with the Raft epoch in
    which the leader appended it.

    The records of one append form an atomic batch (Kafka's raft client
    appends a ControllerResult.atomicOf's records as one batch): every entry
    of it but the last has ``ends_batch`` False. A batch is replicated, and
    so committed, whole, and a torn tail that holds part of one is dropped
    on restart. An entry appended alone ends its own batch."""

    offset: int
    epoch: int
    record: "MetadataRecord"
    ends_batch: bool = True


@dataclass(frozen=True, slots=True, init=False)
class RaftFetchRequest:
    """Pull-based replication of the metadata log (seed 004). Voters and
    observers (brokers, replica_id >= 0 but not a voter) use the same request."""

    replica_id: NodeId
    epoch: int  # the fetcher's current quorum epoch
    fetch_offset: int
    last_fetched_epoch: int
    correlation_id: int = 0
    max_entries: int = 1000

    def __init__(
        self, replica_id: NodeId, epoch: int, fetch_offset: int, last_fetched_epoch: int, correlation_id: int = 0,
        max_entries: int = 1000,
    ) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "epoch", epoch)
        object.__setattr__(self, "fetch_offset", fetch_offset)
        object.__setattr__(self, "last_fetched_epoch", last_fetched_epoch)
        object.__setattr__(self, "correlation_id", correlation_id)
        object.__setattr__(self, "max_entries", max_entries)


@dataclass(frozen=True, slots=True, init=False)
class RaftFetchResponse:
    leader_id: NodeId
    epoch: int
    error: int
    correlation_id: int
    high_watermark: int
    entries: tuple[MetadataEntry, ...] = ()
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) to truncate to
    snapshot_id: tuple[int, int] | None = None  # (end offset, epoch) when the fetcher must load a snapshot

    def __init__(
        self, leader_id: NodeId, epoch: int, error: int, correlation_id: int, high_watermark: int,
        entries: tuple[MetadataEntry, ...] = (), diverging_epoch: tuple[int, int] | None = None,
        snapshot_id: tuple[int, int] | None = None,
    ) -> None:
        object.__setattr__(self, "leader_id", leader_id)
        object.__setattr__(self, "epoch", epoch)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "correlation_id", correlation_id)
        object.__setattr__(self, "high_watermark", high_watermark)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "diverging_epoch", diverging_epoch)
        object.__setattr__(self, "snapshot_id", snapshot_id)


# --------------------------------------------------------------------------
# Metadata records (the contents of the metadata log)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    broker_id: NodeId
    broker_epoch: int
    incarnation_id: str
    endpoint: BrokerEndpoint
    fenced: bool = True
    #: set when the registration followed an unclean shutdown (KIP-966): the
    #: broker is removed from ISR and ELR of every partition
    unclean_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    broker_id: NodeId
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """KIP-631: the broker's registration is gone (an operator's
    UnregisterBroker); a later registration of the id starts afresh."""

    broker_id: NodeId
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    tp: TopicPartition
    replicas: tuple[NodeId, ...]
    isr: tuple[NodeId, ...]
    leader: NodeId
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[NodeId, ...] = ()
    last_known_elr: tuple[NodeId, ...] = ()
    leader_recovery_state: int = 0
    #: KIP-966 LastKnownLeader (seed 002): the last ISR member, recorded when
    #: it was fenced; NO_LEADER when none
    last_known_leader: NodeId = -1
    #: KIP-455: replicas a reassignment in progress adds / removes (both
    #: inside ``replicas``, which is their union with the target)
    adding_replicas: tuple[NodeId, ...] = ()
    removing_replicas: tuple[NodeId, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to one partition. ``None`` fields are unchanged. Applying it
    bumps partition_epoch; a leader change also bumps leader_epoch (seed 000,
    PartitionRegistration.merge)."""

    tp: TopicPartition
    isr: tuple[NodeId, ...] | None = None
    leader: NodeId | None = None
    elr: tuple[NodeId, ...] | None = None
    last_known_elr: tuple[NodeId, ...] | None = None
    leader_recovery_state: int | None = None
    reason: str = ""
    #: KIP-966 LastKnownLeader (NO_LEADER: cleared)
    last_known_leader: NodeId | None = None
    #: KIP-455 reassignment: the new replica list and the replicas being
    #: added / removed (None: unchanged; () clears them)
    replicas: tuple[NodeId, ...] | None = None
    adding_replicas: tuple[NodeId, ...] | None = None
    removing_replicas: tuple[NodeId, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource: str  # topic name, or "" for the cluster
    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    """Appended by a new Raft leader to commit entries of earlier epochs."""

    reason: str = "leader change"


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    broker_id: NodeId
    broker_epoch: int
    next_producer_id: int


MetadataRecord = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | NoOpRecord
    | ProducerIdsRecord
)


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequest:
    broker_id: NodeId
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsResponse:
    error: int
    producer_id_start: int = -1
    producer_id_len: int = 0


# --------------------------------------------------------------------------
# KIP-966 unclean recovery (seed 002, "GetReplicaLogInfo Request/Response")
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetReplicaLogInfoRequest:
    """The active controller asks a replica for its log end offset and last
    leader epoch, to elect the longest log when ISR and ELR are gone."""

    broker_id: NodeId  # the broker asked
    tps: tuple[TopicPartition, ...]
    #: names the controller's recovery round, so a late answer to an earlier
    #: round is not mistaken for a fresh one
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    tp: TopicPartition
    #: latest epoch in the replica's leader-epoch cache (-1: empty log)
    last_written_leader_epoch: int
    #: the partition's leader epoch in the replica's metadata image (fences stale answers)
    current_leader_epoch: int
    log_end_offset: int
    error: int = 0


@dataclass(frozen=True, slots=True)
class GetReplicaLogInfoResponse:
    broker_id: NodeId
    #: the answering broker's epoch: an answer from before a reboot is refused
    broker_epoch: int
    correlation_id: int
    partitions: tuple[ReplicaLogInfo, ...] = ()


# --------------------------------------------------------------------------
# KIP-455 partition reassignment (admin -> broker -> active controller)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReassignPartition:
    tp: TopicPartition
    #: the target replica list; None cancels the reassignment in progress
    replicas: tuple[NodeId, ...] | None


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequest:
    ref: Any
    partitions: tuple[ReassignPartition, ...]
    timeout_ms: int = 30_000
    #: KIP-860 (AlterPartitionReassignments v1): False refuses a target
    #: that changes the partition's replication factor
    allow_replication_factor_change: bool = True


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    tp: TopicPartition
    error: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsResponse:
    ref: Any
    results: tuple[ReassignmentResult, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsRequest:
    ref: Any
    #: None: every partition being reassigned
    tps: tuple[TopicPartition, ...] | None = None
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    tp: TopicPartition
    replicas: tuple[NodeId, ...]
    adding_replicas: tuple[NodeId, ...]
    removing_replicas: tuple[NodeId, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsResponse:
    ref: Any
    error: int
    reassignments: tuple[OngoingReassignment, ...] = ()


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequest:
    """KIP-631 UnregisterBroker (api key 64), from an admin client through
    a broker to the active controller: remove a broker's registration."""

    ref: Any
    broker_id: NodeId
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class UnregisterBrokerResponse:
    ref: Any
    error: int
    message: str = ""


Message = Any  # any dataclass above; kept loose so runtimes can add admin messages

