"""What the connection-bound tests share: run tests/server/hostile.py as a
throwaway unprivileged user (tests/nobody.py, as a security review attacks), read a node's
RSS, and count a real confluent-kafka producer's acknowledgements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.nobody import NOBODY

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).with_name("hostile.py")


def hostile_argv(spec: dict) -> list[str]:
    """The command that runs ``spec`` as the attacker (as root: setpriv drops
    to it; as anyone else the suite is unprivileged already)."""
    argv = [sys.executable, str(HOSTILE), json.dumps(spec)]
    return NOBODY + argv if os.geteuid() == 0 else argv


def as_nobody(spec: dict, timeout: float = 120) -> dict:
    r = subprocess.run(hostile_argv(spec), capture_output=True, text=True, timeout=timeout, cwd="/")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def start_as_nobody(spec: dict) -> subprocess.Popen:
    return subprocess.Popen(hostile_argv(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")


def finish(p: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return json.loads(out)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(60)


def produce_acked(bootstrap: str, topic: str, count: int, timeout_s: float = 15.0, gap_s: float = 0.0) -> int:
    """How many of ``count`` messages a confluent-kafka producer (from
    127.0.0.1) got acknowledged, each given ``timeout_s``."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0,
                  "message.timeout.ms": int(timeout_s * 1000), "socket.timeout.ms": int(timeout_s * 1000)})
    acked = []
    for i in range(count):
        p.produce(topic, b"v%d" % i, partition=0, on_delivery=lambda err, msg: acked.append(err is None))
        p.poll(0)
        if gap_s:
            time.sleep(gap_s)
    p.flush(timeout_s + 10)
    return sum(acked)
