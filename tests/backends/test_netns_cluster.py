"""``kraftwerk cluster up --backend netns``: a reference or Kafka cluster in
namespaces that outlives the command, reachable at real addresses by a real
client, left alone by ``kraftwerk cleanup`` (it is no run's), removed by
``cluster down``; bad input is one line (harness/handcluster/hosted.py).
The docker and ssh forms are in test_docker_backend.py and
test_ssh_backend.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtimes.net.netns import list_namespaces
from reference_impl.server.procs import alive
from reference_impl.server.launcher import metadata_brokers

from .conftest import needs_root_net

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def kw(*args, env=None):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": "", **(env or {})})


def test_a_namespace_cluster_outlives_up_and_cleanup_and_goes_with_down(tmp_path):
    needs_root_net()
    d = tmp_path / "c"
    r = kw("cluster", "up", "--backend", "netns", "--combined", "--dir", str(d), "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    try:
        host, port = st["bootstrap"].split(",")[0].split(":")
        assert sorted(metadata_brokers(host, int(port))) == [1, 2, 3]
        c = kw("cleanup", env={"KRAFTWERK_RUNTIME_DIR": str(tmp_path / "registry")})
        assert c.returncode == 0, c.stderr
        rows = json.loads(kw("cluster", "status", "--dir", str(d), "--json").stdout)["nodes"]
        assert [x["alive"] for x in rows] == [True, True, True]
    finally:
        # the last combined node cannot finish its controlled shutdown once its
        # peers (the quorum) are gone: it waits for the timeout, then SIGKILL
        down = kw("cluster", "down", "--dir", str(d), "--timeout", "5")
    assert down.returncode == 0, down.stderr
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{st['tag']}-")]
    assert not any(alive(n["pid"], n["start"]) for n in st["nodes"])


def produce_and_consume(bootstrap: str, topic: str = "hand", n: int = 5) -> list[str]:
    """A real client through the cluster: create a topic, produce acks=all,
    read it back from offset 0."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = len(bootstrap.split(","))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=brokers)]).values():
        f.result(timeout=60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hand", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[str] = []
    for _ in range(120):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
        if len(got) == n:
            break
    c.close()
    return got


def test_a_kafka_cluster_in_namespaces_serves_a_real_client_and_down_leaves_nothing(tmp_path):
    needs_root_net()
    d = tmp_path / "k"
    r = kw("cluster", "up", "--backend", "netns", "--db", "kafka", "--combined", "--dir", str(d), "--json",
           "--timeout", "150")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    try:
        assert st["db"] == "kafka" and st["version"].startswith("4.4.")
        assert produce_and_consume(st["bootstrap"]) == [f"v{i}" for i in range(5)]
        assert "Kafka version: 4.4." in (d / "nodes" / "n1" / "server.log").read_text()
        kw("cleanup", env={"KRAFTWERK_RUNTIME_DIR": str(tmp_path / "registry")})
        rows = json.loads(kw("cluster", "status", "--dir", str(d), "--json").stdout)["nodes"]
        assert [x["alive"] for x in rows] == [True, True, True]
    finally:
        down = kw("cluster", "down", "--dir", str(d), "--timeout", "30")
    assert down.returncode == 0, down.stderr
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{st['tag']}-")]
    assert not any(alive(n["pid"], n["start"]) for n in st["nodes"])
    assert not (d / "cluster.json").exists()


@pytest.mark.parametrize("args, words", [
    (["--backend", "ssh"], "--backend ssh needs --hosts"),
    (["--backend", "netns", "--hosts", "h.yaml"], "--hosts is only for --backend ssh"),
    (["--hosts", "h.yaml"], "--hosts and --ssh-accept-new are for --backend ssh"),
    (["--backend", "docker", "--db", "kafka", "--storage-mode", "memory-cache"], "--storage-mode is the reference"),
])
def test_bad_cluster_up_flags_are_one_line_exit_2(tmp_path, args, words):
    r = kw("cluster", "up", *args, "--dir", str(tmp_path / "c"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert words in r.stderr and not (tmp_path / "c").exists()


def test_a_cluster_up_that_cannot_record_its_state_leaves_no_namespace_behind(tmp_path):
    """Kept hosts belong to no run, so ``kraftwerk cleanup`` never removes
    them and only cluster.json lets ``down`` find them: an ``up`` that fails
    before writing it (here: cluster.json cannot be written) removes what it
    made and says so in one line."""
    needs_root_net()
    before = set(list_namespaces())
    d = tmp_path / "c"
    (d / "cluster.json").mkdir(parents=True)  # in the way of the state file
    r = kw("cluster", "up", "--backend", "netns", "--combined", "--dir", str(d), "--timeout", "60")
    assert r.returncode == 4 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert set(list_namespaces()) - before == set()


def _mine(tag: str | None) -> list[str]:
    """The namespaces of the fabric tagged ``tag``."""
    return [ns for ns in list_namespaces() if tag and ns.startswith(f"kw-{tag}-")]


def _up_until_made(d: Path, also=lambda: True) -> tuple[subprocess.Popen, str | None]:
    """``cluster up --backend netns --combined`` in the background, until its
    fabric (found by the owner record naming its pid) has made n3's
    namespace and ``also()`` holds. Returns the process and the tag."""
    import time

    from harness.runtimes.net.netns import OWNER_DIR

    p = subprocess.Popen([*CLI, "cluster", "up", "--backend", "netns", "--combined", "--dir", str(d),
                          "--timeout", "60"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "KRAFTWERK_DEBUG": ""})
    tag = None
    try:
        deadline = time.monotonic() + 60
        while f"kw-{tag}-n3" not in _mine(tag) or not also():
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            for f in OWNER_DIR.glob("*.json"):
                try:
                    rec = json.loads(f.read_text())
                except (OSError, ValueError):
                    continue
                tag = rec["tag"] if rec.get("pid") == p.pid else tag
            time.sleep(0.05)
    except BaseException:
        _end(p, tag)
        raise
    return p, tag


def _end(p: subprocess.Popen, tag: str | None) -> None:
    """Whatever a failed case left: this up's process and fabric."""
    from harness.runtimes.net.netns import remove_tag

    if p.poll() is None:
        p.kill()
        p.wait()
    if _mine(tag):
        remove_tag(tag)  # type: ignore[arg-type]


def test_a_cluster_up_stopped_by_sigterm_removes_what_it_made(tmp_path):
    """A timeout or a cancelled job ends ``cluster up`` with SIGTERM while
    it waits for the brokers; as with Ctrl-C, what it made goes with it
    (kept namespaces are no run's: cleanup never removes them)."""
    import signal

    needs_root_net()
    p, tag = _up_until_made(tmp_path / "c")
    try:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
        assert p.returncode != 0 and len(err.strip().splitlines()) == 1, err
        assert _mine(tag) == []
    finally:
        _end(p, tag)


def test_a_cluster_up_killed_outright_leaves_a_record_by_which_down_removes_everything(tmp_path):
    """SIGKILL gives ``cluster up`` no handler: what it made on this machine
    stays, but the provisional cluster.json written before the nodes start
    lets ``status`` say so in one line and ``down`` remove the namespaces
    and their processes (cleanup leaves kept hosts alone)."""
    needs_root_net()
    d = tmp_path / "c"
    p, tag = _up_until_made(d, also=lambda: (d / "cluster.json").exists())
    try:
        p.kill()
        p.communicate(timeout=30)
        assert _mine(tag), "SIGKILL left nothing to find"
        st = kw("cluster", "status", "--dir", str(d))
        assert st.returncode == 4 and "never finished coming up" in st.stderr, st.stderr
        r = kw("cluster", "down", "--dir", str(d))
        assert r.returncode == 0, r.stderr
        assert _mine(tag) == [] and not (d / "cluster.json").exists()
    finally:
        _end(p, tag)
