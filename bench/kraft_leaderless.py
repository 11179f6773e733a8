"""How long each node went without a KRaft leader, from a run directory of
either runtime: the simulator's traces (``raft_state`` events) or Kafka's
``server.log`` (``KafkaRaftClient``'s "Completed transition to ..." lines
of ``QuorumState``).

Per node it prints the longest stretch without a known quorum leader (a
stretch from a start, before the node first knew one, is not counted; one
still open when the log ends is not either, as in
``tests/sim/test_found_schedules.py``) and, given ``--after`` (a nemesis
op of the run, e.g. ``stop-clock``, the first clock reset), how long after
it the stretch under way then ended (0: none was) and, on Kafka, how long
after it the node first applied a metadata change to its partitions (a
``state.change.logger`` line: its metadata flowing again, which a Kafka 4.4
observer's KRaft state does not show, as it keeps its leader past the fetch
timeout).

Kafka writes its log lines with the node's clock, which a clock fault
moves (libfaketime): each line's time is put back on the run's clock with
the offsets the nemesis gave that node (history.jsonl), the offset in force
chosen so that the lines' times never go backwards. A strobed node's
lines keep the strobe's flips (up to its delta): the output marks it.

    .venv/bin/python bench/kraft_leaderless.py RUN_DIR [RUN_DIR...] [--after stop-clock]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

#: a KafkaRaftClient state change in server.log: its time and the new state
KAFKA_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO \[RaftManager id=\d+\] "
                        r"(?:Completed|Attempting durable) transition to (\w+)\((.*)")


def stretches(events: Iterator[tuple[int, bool | None]]) -> list[tuple[int, int]]:
    """(start, end) of each closed stretch without a leader, from (time ms,
    knows a leader) in time order; None is a (re)start of the node."""
    out: list[tuple[int, int]] = []
    since: int | None = None
    knew = False
    for t, knows in events:
        if knows is None:
            since, knew = None, False
        elif knows:
            if since is not None:
                out.append((since, t))
            since, knew = None, True
        elif knew and since is None:
            since = t
    return out


def sim_events(trace: Path) -> Iterator[tuple[int, bool | None]]:
    for e in map(json.loads, trace.read_text().splitlines()):
        if e["kind"] == "node_start":
            yield int(e["t"]), None
        elif e["kind"] == "raft_state":
            yield int(e["t"]), e["leader"] != -1


def nemesis_results(run_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    """(history time ms, op) of each nemesis op that says what it did (the
    second ``info`` of a start or stop), in the history's time, which the
    traces share on the simulator and Kafka's log lines on real processes
    (clock.json's zero)."""
    out = []
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op.get("process") == "nemesis" and isinstance(op.get("value"), dict) and len(op["value"]) > 1:
            out.append((int(op["time"]) // 1_000_000, op))
    return out


def offsets_of(results: list[tuple[int, dict[str, Any]]], node: str) -> tuple[list[tuple[int, int]], bool]:
    """The node's clock offset changes, (history ms, offset ms), and
    whether a strobe flipped its clock."""
    changes, strobed = [(-1 << 60, 0)], False
    for t, op in results:
        v = op["value"]
        if op["f"] == "start-clock" and node in (v.get("offsets_ms") or {}):
            changes.append((t, int(v["offsets_ms"][node])))
        elif op["f"] == "start-clock" and node in (v.get("nodes") or []) and "delta_ms" in v:
            strobed = True
        elif op["f"] == "stop-clock" and node in (v.get("reset") or []):
            changes.append((t, 0))
    return sorted(changes), strobed


def after_time(results: list[tuple[int, dict[str, Any]]], spec: str) -> int:
    """``F`` or ``F:N``: the history time of the N-th (default first) op
    ``F`` that says what it did, e.g. ``stop-clock`` (the reset)."""
    f, _, n = spec.partition(":")
    times = [t for t, op in results if op["f"] == f]
    k = int(n or 1)
    if len(times) < k:
        raise ValueError(f"--after {spec}: the run has {len(times)} {f} ops")
    return times[k - 1]


#: any line of Kafka's log4j output: its time and the rest
ANY_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (.*)")


def kafka_lines(log: Path, zero_ms: float, changes: list[tuple[int, int]]) -> Iterator[tuple[int, str]]:
    """(run time ms, line) of each log line: its clock time less the
    offset in force then, chosen so that the times never go backwards."""
    i, prev = 0, -1 << 60
    for line in log.read_text(errors="replace").splitlines():
        m = ANY_LINE.match(line)
        if not m:
            continue
        wall = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp() * 1000
        at = wall - zero_ms
        while i + 1 < len(changes):
            now, nxt = at - changes[i][1], at - changes[i + 1][1]
            if nxt >= changes[i + 1][0] and (now >= changes[i + 1][0] or now < prev):
                i += 1
            else:
                break
        t = int(at - changes[i][1])
        prev = max(prev, t)
        yield t, line


def kafka_events(log: Path, zero_ms: float, changes: list[tuple[int, int]]) -> Iterator[tuple[int, bool | None]]:
    """(run time ms, knows a leader) per completed transition; a transition
    from null is the node's start."""
    for t, line in kafka_lines(log, zero_ms, changes):
        m = KAFKA_LINE.match(line)
        if not m or "Completed" not in line:
            continue
        state, rest = m[2], m[3]
        if rest.endswith("from null (org.apache.kafka.raft.QuorumState)"):
            yield t, None
        yield t, state in ("FollowerState", "Leader") or bool(re.search(r"leaderId=OptionalInt\[\d+\]", rest))


def first_change_after(log: Path, zero_ms: float, changes: list[tuple[int, int]], after_ms: int) -> int | None:
    """How long after ``after_ms`` a Kafka broker first applied a metadata
    change to its partitions (a ``state.change.logger`` line): when its
    metadata flowed again, whatever its KRaft state says."""
    return next((t - after_ms for t, line in kafka_lines(log, zero_ms, changes)
                 if t > after_ms and "(state.change.logger)" in line), None)


def measure(run_dir: Path, after: str | None) -> tuple[int | None, dict[str, dict[str, Any]]]:
    """The ``after`` op's history time, and per node: the longest closed
    stretch without a leader (ms) and how long after that time the
    stretch under way then ended."""
    results = nemesis_results(run_dir)
    after_ms = after_time(results, after) if after else None
    clock = run_dir / "clock.json"
    zero = json.loads(clock.read_text())["history_zero_unix_ms"] if clock.exists() else None
    out: dict[str, dict[str, Any]] = {}
    for d in sorted(p for p in (run_dir / "nodes").iterdir() if p.is_dir() and p.name != "observer"):
        changes, strobed = offsets_of(results, d.name)
        if (d / "trace.jsonl").exists():
            got, strobed = stretches(sim_events(d / "trace.jsonl")), False  # virtual time: no clock in it
        elif (d / "server.log").exists() and zero is not None:
            got = stretches(kafka_events(d / "server.log", zero, changes))
        else:
            continue
        row: dict[str, Any] = {"longest_ms": max((b - a for a, b in got), default=0), "strobed": strobed,
                               "stretches": got}
        if after_ms is not None:
            row["ended_after_ms"] = max((b - after_ms for a, b in got if a <= after_ms < b), default=0)
            if (d / "server.log").exists() and zero is not None:
                row["applied_after_ms"] = first_change_after(d / "server.log", zero, changes, after_ms)
        out[d.name] = row
    return after_ms, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+")
    ap.add_argument("--after", default=None,
                    help="F or F:N, the N-th nemesis op F of the run (e.g. stop-clock, the first clock reset)")
    a = ap.parse_args()
    for rd in map(Path, a.run_dirs):
        if not (rd / "history.jsonl").exists() or not (rd / "nodes").is_dir():
            ap.error(f"{rd}: not a run directory (no history.jsonl and nodes/)")
        try:
            at, rows = measure(rd, a.after)
        except ValueError as e:
            ap.error(str(e))
        print(f"{rd}:" + (f" {a.after} at {at} ms" if at is not None else ""))
        for n, r in rows.items():
            tail = f"; the stretch under way then ended {r['ended_after_ms']} ms after it" if at is not None else ""
            if r.get("applied_after_ms") is not None:
                tail += f"; first metadata change applied {r['applied_after_ms']} ms after it"
            print(f"  {n}: longest without a KRaft leader {r['longest_ms']} ms{tail}"
                  + (" (clock strobed: its times are off by up to the strobe's delta)" if r["strobed"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
