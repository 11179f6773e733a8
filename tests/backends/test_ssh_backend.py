"""The ssh backend on throwaway hosts (``kraftwerk hosts up``: sshd in
namespaces): a partition made over ssh cuts exactly its links and heal
restores them; bad hosts files, unreachable hosts and unknown or changed
host keys are one line, exit 2, before anything starts; ``hosts down``
removes everything ``up`` made (harness/runtimes/ssh.py, throwaway.py)."""

import os
import random
import time
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.runtimes.ssh import SshHosts, preflight
from harness.runtimes.throwaway import down, up
from harness.runtimes.net.iptables import IptablesNetwork
from harness.runtimes.net.latency import QUEUES_FILE, Delayers
from harness.runtimes.net.netns import list_namespaces
from nemesis.partition import shaped

from nemesis.control import Network, Remote

from .conftest import needs_root_net
from .probe import CLIENT, Prober, all_links
from .test_netns_latency import CONNECT, LISTENER, PORT

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]
NODES = ["n1", "n2", "n3"]


@pytest.fixture(scope="module")
def hosts_dir(tmp_path_factory):
    needs_root_net()
    d = tmp_path_factory.mktemp("hosts")
    up(3, d)
    tag = (d / "fabric.json").read_text()
    yield d
    assert len(down(d)) == 4  # three hosts and the bridge
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{yaml.safe_load(tag)['tag']}-")]
    assert not (d / "hosts.yaml").exists() and down(d) == []


def run_cli(*args):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


def test_a_grudge_made_over_ssh_cuts_exactly_its_links(hosts_dir, tmp_path):
    checked = preflight(str(hosts_dir / "hosts.yaml"), NODES)
    hosts = SshHosts(checked, None, "probe")
    net = IptablesNetwork(NODES, {n: hosts.address(n) for n in NODES}, hosts.client_address,
                          lambda n, argv, stdin: hosts.exec(n, argv, 30, stdin=stdin), exempt_ports=(22,))
    probe = Prober(hosts, NODES, tmp_path, python="python3.11", remote_dir=lambda n: f"{checked[n][0].dir}/probe")
    try:
        net.setup()
        assert isinstance(hosts, Remote) and isinstance(net, Network)  # the cluster contract, structurally
        probe.start()
        assert probe.delivered() == all_links(NODES)
        cut, _ = shaped("one-way", NODES, random.Random(1))
        cut = set(cut) | {(CLIENT, "n2")}
        net.cut(cut)
        assert probe.delivered() == all_links(NODES) - cut
        assert not probe.tcp_connects(CLIENT, "n2") and probe.tcp_connects(CLIENT, "n1")
        net.heal()
        assert probe.delivered() == all_links(NODES)
    finally:
        probe.stop()
        net.teardown()
        rc, out, _ = hosts.exec("n1", ["iptables", "-S"], 10)
        hosts.teardown()
    assert "kw-in" not in out and "kw-out" not in out  # hosts outlive the run: our chains do not


def test_latency_over_ssh_is_made_by_a_delayer_from_the_hosts_bundle_and_healed(hosts_dir, tmp_path):
    """The delayer runs from the project's wheel on the host (standard
    library only: nothing else to install there), on a leased channel, and
    ends with the hosts' teardown."""
    checked = preflight(str(hosts_dir / "hosts.yaml"), NODES)
    hosts = SshHosts.open(checked, NODES, None, tmp_path)
    net = IptablesNetwork(NODES, {n: hosts.address(n) for n in NODES}, hosts.client_address,
                          lambda n, argv, stdin: hosts.exec(n, argv, 30, stdin=stdin), exempt_ports=(22,),
                          delayers=Delayers(hosts))

    def connect_ms(src, dst):
        rc, out, err = hosts.exec(src, ["python3.11", "-c", CONNECT, hosts.address(dst), str(PORT)], 20)
        assert rc == 0, err
        return float(out)

    try:
        net.setup()
        for n in NODES:
            hosts.exec(n, ["mkdir", "-p", hosts.node_dir(n)], 10)
            hosts.start_helper(n, ["python3.11", "-c", LISTENER, hosts.address(n), str(PORT)],
                               f"{hosts.node_dir(n)}/listener.log")
        time.sleep(0.7)
        net.set_latency([("n1", "n2")], 200, 0)
        assert connect_ms("n1", "n2") >= 150 and connect_ms("n1", "n3") < 50
        net.heal()
        assert connect_ms("n1", "n2") < 50
        pids = [(n, pid) for n, _, pid in hosts.helpers]
        assert len(pids) == 4  # three listeners and n2's delayer
    finally:
        net.teardown()
        hosts.teardown()
    hosts = SshHosts(preflight(str(hosts_dir / "hosts.yaml"), NODES), None, "check")
    try:
        assert all(hosts.exec(n, ["kill", "-0", str(pid)], 10)[0] != 0 for n, pid in pids)
        rules = hosts.exec("n2", ["iptables", "-S"], 10)[1]
        queues = hosts.exec("n2", ["cat", QUEUES_FILE], 10)[1]
    finally:
        hosts.close()
    assert "NFQUEUE" not in rules and "kw-in" not in rules  # hosts outlive the run: our rules do not
    assert queues.strip() == ""  # nobody holds a queue on n2 any more


def test_the_project_reaches_a_host_as_its_wheel_in_a_venv_built_from_uploaded_wheels(hosts_dir, tmp_path):
    """No pip, network or PYTHONPATH on the host: a ``--without-pip`` venv
    gets the project's wheel and a node's dependencies from the wheels sent
    with it (harness/runtimes/bundle.py); a second open sends nothing."""
    checked = preflight(str(hosts_dir / "hosts.yaml"), NODES)
    hosts = SshHosts.open(checked, NODES, None, tmp_path)
    try:
        app = hosts.app["n1"]
        assert hosts.kraftwerk_argv("n1")[0] == f"{app}/venv/bin/python"
        probe = "import harness, kafka, msgpack, orjson, sys; print(harness.__file__, kafka.__file__, sys.prefix)"
        rc, out, err = hosts.exec("n1", ["env", "-i", f"{app}/venv/bin/python", "-c", probe], 60)
        assert rc == 0, err
        mine, theirs, prefix = out.split()
        assert prefix == f"{app}/venv"
        assert mine.startswith(f"{app}/venv/lib/python3.11/site-packages/harness/")
        assert theirs.startswith(f"{app}/venv/lib/python3.11/site-packages/kafka/")
        rc, out, _ = hosts.exec("n1", [*hosts.kraftwerk_argv("n1"), "node", "--help"], 60)
        assert rc == 0 and "--controller-quorum" in out
        before = hosts.exec("n1", ["stat", "-c", "%Y", f"{app}/.complete"], 10)[1]
        hosts.install()
        assert hosts.exec("n1", ["stat", "-c", "%Y", f"{app}/.complete"], 10)[1] == before
    finally:
        hosts.teardown()


def test_the_wheel_cache_is_keyed_by_the_hosts_interpreter_so_another_arch_never_gets_this_machines_wheels(
        hosts_dir, tmp_path, monkeypatch):
    """Which wheels a host takes is decided by its own interpreter (PEP 425
    tags, manylinux's glibc rule): the host's python3.11 is asked, the cache
    directory is named by its answer, and a host of another architecture
    gets wheels fetched for it, never the ones cached for this machine
    (harness/runtimes/bundle.py, Target)."""
    import dataclasses
    import platform

    from harness.runtimes import bundle

    checked = preflight(str(hosts_dir / "hosts.yaml"), NODES)
    hosts = SshHosts(checked, None, "target")
    try:
        target = hosts.target("n1")
    finally:
        hosts.teardown()
    glibc = platform.libc_ver()[1].replace(".", "_")
    assert target.key == f"cp311-cp311-manylinux_{glibc}_{platform.machine()}"  # these hosts share this machine's
    arm = dataclasses.replace(target, arch="aarch64")
    monkeypatch.setattr(bundle, "WHEELS", tmp_path / "wheels")
    version = next(v for d, v in bundle.node_dists() if d == "orjson")
    mine = bundle._wheel("orjson", version, target)
    theirs = bundle._wheel("orjson", version, arm)
    assert mine.parent.name == target.key and theirs.parent.name == arm.key != target.key
    assert f"_{platform.machine()}" in mine.name and "_aarch64" in theirs.name
    assert target.takes(mine.name) and not arm.takes(mine.name) and not target.takes(theirs.name)
    assert not arm.takes("pyfuse3-3.5.0-cp311-cp311-linux_x86_64.whl")
    assert not dataclasses.replace(target, python=(3, 12)).takes(mine.name)  # another Python: another ABI
    assert not dataclasses.replace(target, glibc=(2, 12)).takes(  # an older glibc than the wheel needs
        "orjson-3.13.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    assert arm.takes("kraftwerk-0-py3-none-any.whl")  # pure wheels go anywhere


@pytest.mark.parametrize("line, words", [
    ("", "cannot read its interpreter's platform"),
    ("pypy 3.11 - linux-x86_64 glibc 2.36 64", "not CPython"),
    ("cpython 3.11 - linux-x86_64 - - 64", "glibc Linux hosts only"),
    ("cpython 3.11 - macosx-14.0-arm64 - - 64", "glibc Linux hosts only"),
])
def test_a_host_whose_interpreter_cannot_take_our_wheels_is_one_line_exit_2(line, words):
    from harness.runtimes.bundle import Target
    from harness.errors import EXIT_USAGE, UsageError

    with pytest.raises(UsageError) as e:
        Target.parse(line, "host h1 (10.0.0.1)")
    assert e.value.exit_code == EXIT_USAGE == 2
    assert str(e.value).startswith("host h1 (10.0.0.1): ") and words in str(e.value) and "\n" not in str(e.value)


RACER = """
import json, sys
from harness.runtimes.ssh import SshHosts, preflight
nodes = ["n1", "n2", "n3"]
hosts = SshHosts.open(preflight(sys.argv[1], nodes), nodes, None, None, run_id=sys.argv[2])
try:
    for n in nodes:
        rc, out, err = hosts.exec(n, ["env", "-i", f"{hosts.app[n]}/venv/bin/python", "-c",
                                      "import harness, kafka, msgpack, orjson"], 60)
        assert rc == 0, err
        rc, out, err = hosts.exec(n, [*hosts.kraftwerk_argv(n), "node", "--help"], 60)
        assert rc == 0 and "--controller-quorum" in out, err
    print(json.dumps(hosts.app))
finally:
    hosts.teardown()
"""


def test_two_installs_at_once_into_one_shared_directory_both_come_out_whole(hosts_dir, tmp_path):
    """Two runs installing at once, each onto three hosts that share one
    directory (six installers of one name), with a cold bundle cache the
    two share: the cache's flock makes one bundle tar, the host's lock lets
    one installer build the venv and the rest find it published (a symlink
    renamed into place), and both runs' nodes import from it
    (harness/runtimes/bundle.py, ssh.py install_archive)."""
    import json
    import shutil
    import tarfile

    from harness.runtimes import bundle

    checked = preflight(str(hosts_dir / "hosts.yaml"), NODES)
    hosts = SshHosts(checked, None, "seed")
    try:
        target = hosts.target("n1")
    finally:
        hosts.teardown()
    bundle.build(target)  # this machine's cache holds the wheels; the runs' cache gets copies, no tar
    cache = tmp_path / "cache"
    shutil.copytree(bundle.WHEELS / target.key, cache / "kraftwerk" / "wheels" / target.key)
    shared = tmp_path / "shared"
    data = yaml.safe_load((hosts_dir / "hosts.yaml").read_text())
    data["defaults"]["key"] = str(hosts_dir / "id_ed25519")
    data["defaults"]["known_hosts"] = str(hosts_dir / "known_hosts")
    for h in data["hosts"]:
        h["dir"] = str(shared)
    hf = tmp_path / "hosts.yaml"
    hf.write_text(yaml.safe_dump(data))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    runs = [subprocess.Popen([sys.executable, "-c", RACER, str(hf), f"race{i}"], cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in (1, 2)]
    outs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [err[-600:] for _, err in outs]
    apps = [json.loads(out.splitlines()[-1]) for out, _ in outs]
    (app,) = {d for a in apps for d in a.values()}  # every node of both runs: one app directory
    tars = list((cache / "kraftwerk").glob("kw-bundle-*.tar"))
    assert len(tars) == 1 and f"app-{tars[0].name.removeprefix('kw-bundle-').removesuffix('.tar')}" == Path(app).name
    with tarfile.open(tars[0]) as tar:  # whole: every wheel the build put in it
        assert {n.split("-")[0] for n in tar.getnames() if n.startswith("wheels/")} >= {
            "wheels/kraftwerk", "wheels/orjson", "wheels/msgpack", "wheels/kafka_python"}
    link = Path(app)
    assert link.is_symlink() and (link / ".complete").is_file() and (link / "venv/bin/python").exists()
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith(link.name)) == [
        link.name, os.readlink(link)]  # one real directory, no staging left over
    assert not list(shared.glob("*.tar")) and not list(shared.glob("*.link"))


def write_hosts(tmp_path, hosts_dir, **changes):
    data = yaml.safe_load((hosts_dir / "hosts.yaml").read_text())
    data["defaults"]["key"] = str(hosts_dir / "id_ed25519")
    data["defaults"]["known_hosts"] = str(hosts_dir / "known_hosts")
    for k, v in changes.items():
        if k == "host0":
            data["hosts"][0].update(v)
        else:
            data["defaults"][k] = v
    p = tmp_path / "hosts.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def expect_usage(r, words, out):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not out.exists()


def test_an_unknown_host_key_is_refused_unless_accept_new(hosts_dir, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    hf = write_hosts(tmp_path, hosts_dir, known_hosts=str(kh))
    out = tmp_path / "r"
    r = run_cli("run", "--backend", "ssh", "--hosts", str(hf), "--combined", "--out", str(out))
    expect_usage(r, "--ssh-accept-new", out)
    checked = preflight(str(hf), NODES, accept_new=True)
    for _, c in checked.values():
        c.close()
    assert len(kh.read_text().splitlines()) == 3  # trusted on first use, remembered
    preflight(str(hf), NODES)  # now known


def test_a_changed_host_key_is_refused_even_with_accept_new(hosts_dir, tmp_path):
    kh = tmp_path / "known_hosts"
    lines = (hosts_dir / "known_hosts").read_text().splitlines()
    other = (hosts_dir / "id_ed25519.pub").read_text().split()
    kh.write_text("\n".join(f"{ln.split()[0]} {other[0]} {other[1]}" for ln in lines) + "\n")
    hf = write_hosts(tmp_path, hosts_dir, known_hosts=str(kh))
    out = tmp_path / "r"
    r = run_cli("run", "--backend", "ssh", "--hosts", str(hf), "--ssh-accept-new", "--combined", "--out", str(out))
    expect_usage(r, "host key mismatch", out)


@pytest.mark.parametrize("change, words", [
    ({"host0": {"port": 2222}}, "unreachable"),
    ({"key": "/nonexistent/key"}, "host h1"),
    ({"user": "nobody"}, "login as nobody refused"),
])
def test_unusable_hosts_are_one_line_exit_2(hosts_dir, tmp_path, change, words):
    hf = write_hosts(tmp_path, hosts_dir, **change)
    out = tmp_path / "r"
    expect_usage(run_cli("run", "--backend", "ssh", "--hosts", str(hf), "--combined", "--out", str(out)), words, out)


@pytest.mark.parametrize("text, words", [
    (None, "not found"),
    ("hosts: [\n", "not valid YAML"),
    ("hosts: []\n", "non-empty 'hosts' list"),
    ("hosts:\n- {name: a}\n", "missing address"),
    ("hosts:\n- {name: a, address: 'x y'}\n", "neither an IP address nor a host name"),
    ("hosts:\n- {name: a, address: 10.0.0.1, port: 0}\n", "port must be a number"),
    ("hosts:\n- {name: a, address: 10.0.0.1, colour: red}\n", "unknown key 'colour'"),
    ("hosts:\n- {name: a, address: 10.0.0.1}\n- {name: a, address: 10.0.0.2}\n", "appears twice"),
    ("hosts:\n- {name: a, address: 10.0.0.1}\n", "1 host(s) for 3 nodes"),
])
def test_bad_hosts_files_are_one_line_exit_2(tmp_path, text, words):
    hf = tmp_path / "hosts.yaml"
    if text is not None:
        hf.write_text(text)
    out = tmp_path / "r"
    expect_usage(run_cli("run", "--backend", "ssh", "--hosts", str(hf), "--combined", "--out", str(out)), words, out)


@pytest.mark.slow
def test_a_short_run_of_real_kafka_on_ssh_hosts_is_valid_and_brings_its_logs_back(hosts_dir, tmp_path):
    """db kafka through the host contract only: the jars go over once per
    content, each JVM runs on its host under the run's lease, partitions are
    iptables rules made over ssh; the logs come back and the host keeps
    nothing of the run."""
    import json

    out = tmp_path / "r"
    r = subprocess.run([*CLI, "run", "--backend", "ssh", "--hosts", str(hosts_dir / "hosts.yaml"), "--db", "kafka",
                        "--combined", "--out", str(out), "--json", "--seed", "3", "--nemesis",
                        "partition,kill,pause,clock", "--nemesis-interval", "4", "--time-limit", "20",
                        "--no-progress"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
    assert json.loads((run_dir / "test.json").read_text())["backend"] == "ssh"
    assert "Kafka version: 4.4." in (run_dir / "nodes" / "n2" / "server.log").read_text()
    spec_dirs = [h["dir"] for h in yaml.safe_load((hosts_dir / "hosts.yaml").read_text())["hosts"]]
    assert all(not list(Path(d, "runs").glob("*")) for d in spec_dirs)


@pytest.mark.slow
def test_a_kafka_cluster_on_ssh_hosts_outlives_up_serves_a_client_and_down_removes_it(hosts_dir, tmp_path):
    import json

    from .test_netns_cluster import kw, produce_and_consume

    d = tmp_path / "k"
    r = kw("cluster", "up", "--backend", "ssh", "--hosts", str(hosts_dir / "hosts.yaml"), "--db", "kafka",
           "--combined", "--dir", str(d), "--json", "--timeout", "240")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    try:
        assert produce_and_consume(st["bootstrap"]) == [f"v{i}" for i in range(5)]
        rows = json.loads(kw("cluster", "status", "--dir", str(d), "--json").stdout)["nodes"]
        assert [x["alive"] for x in rows] == [True, True, True]
    finally:
        down = kw("cluster", "down", "--dir", str(d), "--timeout", "40")
    assert down.returncode == 0, down.stderr
    assert "Kafka version: 4.4." in (d / "nodes" / "n1" / "server.log").read_text()
    assert not subprocess.run(["pgrep", "-f", st["run_id"]], capture_output=True).stdout


@pytest.mark.slow
def test_a_sigkilled_harness_leaves_no_kafka_jvm_on_the_ssh_hosts(hosts_dir, tmp_path):
    """A JVM knows no lease: the watcher on its channel SIGKILLs it when the
    harness's connection drops (harness/runtimes/ssh.py, LEASED); ``cleanup``
    then empties our chains and removes the run's directories."""
    import signal
    import time

    out, registry = tmp_path / "r", tmp_path / "registry"
    env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)}
    harness = subprocess.Popen([*CLI, "run", "--backend", "ssh", "--hosts", str(hosts_dir / "hosts.yaml"), "--db",
                                "kafka", "--combined", "--out", str(out), "--seed", "5", "--nemesis", "kill,pause",
                                "--nemesis-interval", "3", "--time-limit", "120", "--no-progress"],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dirs = [h["dir"] for h in yaml.safe_load((hosts_dir / "hosts.yaml").read_text())["hosts"]]

    def jvms():
        return [ln for d in dirs for ln in subprocess.run(["pgrep", "-af", f"{d}/runs/"], capture_output=True,
                                                           text=True).stdout.splitlines() if ln.split()[1] == "java"]
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            hist = list(out.glob("queue/*/history.jsonl"))
            if hist and hist[0].stat().st_size > 3000:
                break
            time.sleep(1)
        assert len(jvms()) == 3, "the run never got going"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    deadline = time.monotonic() + 30
    while jvms() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert jvms() == []
    r = subprocess.run([*CLI, "cleanup"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert all(not list(Path(d, "runs").glob("*")) for d in dirs)


def test_what_a_run_needs_on_every_host_is_checked_over_ssh_before_anything_starts(hosts_dir, tmp_path):
    """A clock fault on db kafka preloads libfaketime into each host's JVM
    (missing, LD_PRELOAD is ignored and no clock moves): that file, like
    /dev/fuse for storage lazyfs, is looked for on each host at preflight,
    and a host without it is one line naming the host (exit 2)."""
    from harness.dbs import host_needs
    from harness.runtimes import _hosts_have
    from harness.config import TestConfig
    from harness.dbs.kafka.db import LIBFAKETIME
    from harness.errors import UsageError

    hf = write_hosts(tmp_path, hosts_dir)
    cfg = TestConfig(db="kafka", backend="ssh", hosts=str(hf), combined=True, nemesis=["clock-strobe:one"],
                     storage="lazyfs")
    needs = host_needs(cfg)
    assert [args for args, _ in needs] == [["-c", "/dev/fuse"], ["-e", LIBFAKETIME]]
    assert host_needs(TestConfig(db="kafka", backend="ssh", hosts=str(hf), nemesis=["kill"])) == []
    checked = preflight(str(hf), NODES)
    try:
        _hosts_have(checked, needs)  # these hosts have both
    finally:
        for _, c in checked.values():
            c.close()
    checked = preflight(str(hf), NODES)
    with pytest.raises(UsageError) as e:
        _hosts_have(checked, [(["-e", str(tmp_path / "absent.so")], "has no absent.so")])
    assert str(e.value).startswith("host h1 (") and "has no absent.so" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_client_partition_never_cuts_the_harness_from_a_host_whose_sshd_listens_elsewhere(hosts_dir, tmp_path):
    """A hosts file may give a host's sshd another port than 22. The
    harness reaches the host from the clients' address, so a client
    partition that cut that port would cut the harness's own connection,
    and with it the heal (sent over it): the db's network exempts every
    host's sshd port. (Host h1 gets a second sshd on port 2222.)"""
    import json as _json
    import signal as _signal

    from harness.config import TestConfig
    from harness.dbs.reference.hosted import HostedReference
    from nemesis.control import CLIENT
    from harness.runtimes.throwaway import SSHD, _wait_port

    tag = _json.loads((hosts_dir / "fabric.json").read_text())["tag"]
    sshd = subprocess.Popen(["ip", "netns", "exec", f"kw-{tag}-h1", SSHD, "-D", "-f", str(hosts_dir / "h1" / "sshd_config"),
                             "-p", "2222", "-o", f"PidFile={tmp_path}/sshd.pid", "-E", str(tmp_path / "sshd.log")])
    hosts = None
    try:
        kh = tmp_path / "known_hosts"  # [address]:2222 is a host of its own to ssh: trusted on first use here
        kh.write_text((hosts_dir / "known_hosts").read_text())
        hf = write_hosts(tmp_path, hosts_dir, host0={"port": 2222}, known_hosts=str(kh))
        _wait_port(yaml.safe_load(hf.read_text())["hosts"][0]["address"], 2222, 20)
        checked = preflight(str(hf), NODES, accept_new=True)
        hosts = SshHosts(checked, None, "ports")
        assert checked["n1"][0].port == 2222 and hosts.control_ports == (22, 2222)
        cfg = TestConfig(backend="ssh", hosts=str(hf), combined=True)
        db = HostedReference(cfg, tmp_path, None, hosts, [])
        db.net.setup()
        try:
            db.net.cut({(CLIENT, "n1"), ("n1", CLIENT)})
            assert hosts.exec("n1", ["true"], 10)[0] == 0  # the harness still reaches n1 ...
            db.net.heal()  # ... so the heal gets there
        finally:
            db.net.teardown()
    finally:
        if hosts is not None:
            hosts.teardown()
        sshd.send_signal(_signal.SIGTERM)
        sshd.wait(10)
