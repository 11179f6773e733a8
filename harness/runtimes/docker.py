"""The ``docker`` backend: one container per node, through the docker SDK.

* **Engine.** ``DOCKER_HOST`` if set, else the system's
  ``/var/run/docker.sock`` if a daemon answers there, else the project starts
  its own: ``dockerd --iptables=false --ip-forward=false --bridge=none`` with
  its socket, pid file and log in ``/run/kraftwerk-docker/`` and its images
  and layers in ``/var/lib/kraftwerk-docker/``. It keeps running between
  runs (starting one takes seconds, and other runs may be using it); stop it
  with ``kill $(cat /run/kraftwerk-docker/dockerd.pid)`` (what
  :func:`stop_own_dockerd` does; a test that started it stops it).
* **Image.** Nothing can be pulled here, so ``kraftwerk-node:<hash>`` is made
  with ``docker import`` from the host's own files: a skeleton root
  (``/bin``, ``/lib``... as links into ``/usr``, and the few ``/etc`` files
  Python and iptables read) into which every container bind-mounts the
  host's ``/usr`` read-only. So the container runs the host's Debian, its
  Python 3.11, iptables and coreutils; the project directory (with its
  ``.venv``) is mounted read-only at its own path. Building it takes under a
  second and a few kB; nothing is downloaded.
* **Network.** A bridge network ``kw-<tag>`` on a free 10.213.S.0/24 (the
  subnet pool the netns fabrics use) with no NAT; the host end (the
  gateway, .1) is the clients' address, so the harness reaches containers by
  address as on netns. Containers get NET_ADMIN, so the partitions are the
  same iptables rules, made inside each container.
* **Data.** ``<run>/nodes/<name>`` is mounted read-write at its own path, so
  logs and traces need no copying back.
* **Daemons** run through ``docker exec`` with stdin attached and
  ``KRAFTWERK_LEASE_FD=0``: when the harness dies its socket closes and the
  node ends the run itself (:mod:`harness.rundir.lease`). Signals go to the exec's
  host pid.
* **Labels.** Everything carries ``kraftwerk=1``, ``kraftwerk.tag`` and
  ``kraftwerk.owner=<pid>:<start time>`` of the harness; :func:`sweep`
  (``kraftwerk cleanup``) removes containers and networks whose owner is
  gone, without any state file.
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
import shutil
import signal as _signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.errors import HarnessError, UsageError
from harness.runtimes.net.netns import NODE_HOST_BASE, OWNER_DIR, SUBNET_PREFIX, allocate_subnet, release_subnet
from harness.rundir.state import RUN_ENV, RunState
from reference_impl.server.procs import alive, proc_start_time

REPO_ROOT = Path(__file__).resolve().parents[2]
OWN_DIR = Path("/run/kraftwerk-docker")
OWN_SOCK = OWN_DIR / "docker.sock"
DATA_ROOT = Path("/var/lib/kraftwerk-docker")
SYSTEM_SOCK = Path("/var/run/docker.sock")
IMAGE = "kraftwerk-node"
LABEL = "kraftwerk"
ETC_FILES = ("passwd", "group", "protocols", "services", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "hosts")
#: /etc trees a program under the host's /usr reads (the JVM's jvm.cfg and
#: security files are links from /usr/lib/jvm into /etc/java-17-openjdk)
ETC_TREES = ("java-17-openjdk",)
#: the label value of containers that outlive the command (``cluster up``)
KIND_CLUSTER = "cluster"


def _sdk() -> Any:
    """The Docker SDK, loaded when a docker host is first asked for."""
    import docker  # late: the Docker SDK (0.3 s), which runs on other backends never need

    return docker


def _try(base_url: str) -> Any:
    docker = _sdk()
    try:
        c = docker.DockerClient(base_url=base_url, timeout=30)
        c.ping()
        c.kw_url = base_url  # for the undo argv in the run registry
        return c
    except Exception:  # noqa: BLE001 - any failure means: no engine there
        return None


def engine(start: bool = True) -> Any:
    """A client of a running engine; start the project's own if none runs."""
    if os.environ.get("DOCKER_HOST"):
        c = _try(os.environ["DOCKER_HOST"])
        if c is None:
            raise UsageError(f"no Docker engine answers at DOCKER_HOST={os.environ['DOCKER_HOST']}")
        return c
    for sock in (SYSTEM_SOCK, OWN_SOCK):
        if sock.exists():
            c = _try(f"unix://{sock}")
            if c is not None:
                return c
    if not start:
        return None
    return _start_dockerd()


def _start_dockerd() -> Any:
    if shutil.which("dockerd") is None:
        raise UsageError("--backend docker needs a Docker engine: none runs and dockerd is not installed "
                         "(scripts/bootstrap installs docker.io)")
    OWN_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    DATA_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(OWN_DIR / "dockerd.log", "ab") as log:
        subprocess.Popen(["dockerd", "--iptables=false", "--ip-forward=false", "--bridge=none",
                          "--data-root", str(DATA_ROOT), "--exec-root", str(OWN_DIR / "exec"),
                          "-H", f"unix://{OWN_SOCK}", "--pidfile", str(OWN_DIR / "dockerd.pid")],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        c = _try(f"unix://{OWN_SOCK}") if OWN_SOCK.exists() else None
        if c is not None:
            return c
        time.sleep(0.2)
    raise HarnessError(f"dockerd did not answer within 30s (see {OWN_DIR / 'dockerd.log'})")


def stop_own_dockerd() -> bool:
    """Stop the engine the project started, if it runs; True if it did."""
    try:
        pid = int((OWN_DIR / "dockerd.pid").read_text().strip())
    except (OSError, ValueError):
        return False
    if not alive(pid):
        return False
    os.kill(pid, _signal.SIGTERM)
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not alive(pid):
        _unmount_data_root()
    return True


def _unmount_data_root() -> None:
    """dockerd mounts its data root over itself (private propagation) and a
    clean exit undoes it, but not every exit is clean: one left behind is
    taken off once the engine is gone, so the engine leaves no mount."""
    try:
        with open("/proc/self/mounts") as f:
            points = [line.split()[1] for line in f]
    except OSError:
        return
    if str(DATA_ROOT) in points:
        subprocess.run(["umount", "-l", str(DATA_ROOT)], capture_output=True, timeout=30)


def preflight() -> Any:
    if os.geteuid() != 0:
        raise UsageError("--backend docker needs root (the Docker engine, and iptables in containers)")
    return engine()


def _skeleton() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("usr", "etc", "tmp", "proc", "sys", "dev", "run", "var", "var/tmp", "root", "work"):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o1777 if "tmp" in d else 0o755, 0
            tar.addfile(ti)
        for link in ("bin", "lib", "lib64", "sbin"):
            ti = tarfile.TarInfo(link)
            ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, f"usr/{link}", 0
            tar.addfile(ti)
        for f in ETC_FILES:
            if Path(f"/etc/{f}").exists():
                data = Path(f"/etc/{f}").read_bytes()
                ti = tarfile.TarInfo(f"etc/{f}")
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
                tar.addfile(ti, io.BytesIO(data))
        for tree in ETC_TREES:
            base = Path("/etc") / tree
            for p in sorted(base.rglob("*")) if base.is_dir() else []:
                ti = tarfile.TarInfo(f"etc/{p.relative_to('/etc')}")
                ti.mtime = 0
                if p.is_symlink():
                    ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink(p)
                    tar.addfile(ti)
                elif p.is_dir():
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(ti)
                elif p.is_file():
                    data = p.read_bytes()
                    ti.size, ti.mode = len(data), 0o644
                    tar.addfile(ti, io.BytesIO(data))
        for p in sorted(Path("/etc/alternatives").iterdir()):
            if p.is_symlink():
                ti = tarfile.TarInfo(f"etc/alternatives/{p.name}")
                ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, os.readlink(p), 0
                tar.addfile(ti)
    return buf.getvalue()


def ensure_image(client: Any) -> str:
    """``kraftwerk-node:<hash of the skeleton>``, imported if missing."""
    docker = _sdk()
    data = _skeleton()
    ref = f"{IMAGE}:{hashlib.sha256(data).hexdigest()[:12]}"
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        repo, tag = ref.split(":")
        client.api.import_image_from_data(data, repository=repo, tag=tag, changes=[f"LABEL {LABEL}=1"])
    return ref


def interpreter_paths() -> list[str]:
    """The harness's own interpreter, for containers to run nodes with
    (``sys.executable``): its environment (a virtualenv anywhere, with its
    ``pyvenv.cfg`` and packages), the Python it was made from, and every
    directory on its import path (a ``.pth`` entry, a user site), where
    neither ``/usr`` nor the project directory (mounted already) holds
    them; read-only, each at its own path, none inside another."""
    exe_dir = os.path.dirname(os.path.realpath(sys.executable))
    wanted = [sys.prefix, sys.base_prefix, exe_dir, *(e for e in sys.path if os.path.isabs(e))]
    pairs = sorted({(os.path.realpath(p), p) for p in wanted if os.path.isdir(p)}, key=lambda rp: len(rp[0]))
    out: list[str] = []
    for real, p in pairs:
        if real == "/" or any(real == b or real.startswith(b.rstrip("/") + "/") for b in ("/usr", str(REPO_ROOT), *out)):
            continue
        out.append(real)
        if p != real and not any(p == b or p.startswith(b.rstrip("/") + "/") for b in out):
            out.append(p)  # the path it is known by, if a link leads there
    return out


def _owner() -> str:
    return f"{os.getpid()}:{proc_start_time(os.getpid())}"


class DockerHosts:
    """The host contract (``Remote``) over containers of one labelled network."""

    runtime = "docker"
    shared_fs = True

    def __init__(self, client: Any, tag: str, subnet: int, state: RunState | None, run_dir: Path,
                 detached: bool = False) -> None:
        self.client = client
        #: containers and daemons that outlive the command (``kraftwerk
        #: cluster up``): labelled kind=cluster (never swept), daemons with no lease
        self.detached = detached
        self.tag = tag
        self.subnet = subnet
        self.state = state
        self.run_dir = run_dir
        self.containers: dict[str, Any] = {}
        self.addresses: dict[str, str] = {}
        self.daemons: dict[str, tuple[str, Any, int, int | None]] = {}  # exec id, socket, host pid, start
        self.helpers: list[tuple[str, Any, int, int | None]] = []  # the same, beside the daemons
        self.network: Any = None

    @property
    def client_address(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.1"

    @classmethod
    def create(cls, nodes: Sequence[str], state: RunState | None, run_dir: Path, client: Any = None,
               ro_paths: Sequence[str] = (), detached: bool = False, fuse: bool = False) -> "DockerHosts":
        """Containers for ``nodes``; ``ro_paths`` are this machine's paths
        mounted read-only at the same place (a db's binaries: Kafka's jars);
        ``fuse``: containers may mount FUSE filesystems (/dev/fuse and
        SYS_ADMIN), for ``kraftwerk fs`` under each node (storage lazyfs)."""
        client = client or engine()
        image = ensure_image(client)
        tag = secrets.token_hex(3)
        self = cls(client, tag, allocate_subnet(tag, KIND_CLUSTER if detached else "docker"), state, run_dir,
                   detached)
        try:
            self._make(list(nodes), image, list(ro_paths), fuse)
        except BaseException:
            self.teardown()
            raise
        return self

    @classmethod
    def attach(cls, tag: str, subnet: int, run_dir: Path, daemons: Mapping[str, tuple[int, int | None]]) -> "DockerHosts":
        """The containers of a kept cluster (``cluster down``), found by tag."""
        client = engine(start=False)
        if client is None:
            raise HarnessError("no Docker engine answers: its containers are gone with it")
        self = cls(client, tag, subnet, None, run_dir, detached=True)
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}.tag={tag}"}):
            node = c.labels.get(f"{LABEL}.node") or c.name.rsplit("-", 1)[-1]
            self.containers[node] = c
        nets = client.networks.list(filters={"label": f"{LABEL}.tag={tag}"})
        self.network = nets[0] if nets else None
        for node, (pid, start) in daemons.items():
            self.daemons[node] = ("", None, pid, start)
        return self

    def _labels(self) -> dict[str, str]:
        if self.detached:
            return {LABEL: "1", f"{LABEL}.tag": self.tag, f"{LABEL}.kind": KIND_CLUSTER}
        return {LABEL: "1", f"{LABEL}.tag": self.tag, f"{LABEL}.owner": _owner()}

    def _make(self, nodes: list[str], image: str, ro_paths: list[str], fuse: bool = False) -> None:
        docker = _sdk()
        pool = docker.types.IPAMPool(subnet=f"{SUBNET_PREFIX}.{self.subnet}.0/24", gateway=self.client_address)
        self.network = self.client.networks.create(f"kw-{self.tag}", driver="bridge", labels=self._labels(),
                                                   ipam=docker.types.IPAMConfig(pool_configs=[pool]))
        if self.state is not None:
            names = [f"kw-{self.tag}-{n}" for n in nodes]
            host = ["docker", "-H", getattr(self.client, "kw_url", f"unix://{SYSTEM_SOCK}")]
            self.state.add_resource("docker", f"kw-{self.tag}", undo=[[*host, "rm", "-f", *names],
                                                                      [*host, "network", "rm", f"kw-{self.tag}"],
                                                                      ["rm", "-f", str(OWNER_DIR / f"{self.tag}.json")]])
        (self.run_dir / "nodes").mkdir(parents=True, exist_ok=True)
        for i, n in enumerate(nodes):
            addr = f"{SUBNET_PREFIX}.{self.subnet}.{NODE_HOST_BASE + 1 + i}"
            d = self.run_dir / "nodes" / n
            d.mkdir(parents=True, exist_ok=True)
            api = self.client.api
            binds = {"/usr": {"bind": "/usr", "mode": "ro"}, str(REPO_ROOT): {"bind": str(REPO_ROOT), "mode": "ro"},
                     **{p: {"bind": p, "mode": "ro"} for p in [*interpreter_paths(), *ro_paths]},
                     str(d): {"bind": str(d), "mode": "rw"}}
            made = api.create_container(
                image, ["sleep", "infinity"], name=f"kw-{self.tag}-{n}", hostname=n,
                labels={**self._labels(), f"{LABEL}.node": n},
                working_dir=str(REPO_ROOT),
                host_config=api.create_host_config(
                    binds=binds, cap_add=["NET_ADMIN", *(["SYS_ADMIN"] if fuse else [])],
                    devices=["/dev/fuse:/dev/fuse:rwm"] if fuse else None, network_mode=self.network.name),
                networking_config=api.create_networking_config(
                    {self.network.name: api.create_endpoint_config(ipv4_address=addr)}),
            )
            c = self.client.containers.get(made["Id"])
            self.containers[n] = c
            c.start()
            self.addresses[n] = addr

    # ------------------------------------------------------------ identity
    def node_names(self) -> list[str]:
        return list(self.containers)

    def address(self, node: str) -> str:
        return self.addresses[node]

    def node_dir(self, node: str) -> str:
        return str(self.run_dir / "nodes" / node)

    def kraftwerk_argv(self, node: str | None = None) -> list[str]:
        return [sys.executable, "-c", "from harness.cli import main; main()"]

    # ------------------------------------------------------------ commands and files
    def exec(self, node: str, argv: Sequence[str], timeout: float = 30.0,
             stdin: str | None = None) -> tuple[int, str, str]:
        c = self.containers[node]
        argv = list(argv)
        if stdin is not None:  # exec_run has no stdin: hand it over as a file
            path = f"/tmp/kw-stdin-{secrets.token_hex(4)}"
            self._put(node, path, stdin.encode())
            argv = ["sh", "-c", 'exec "$@" < "$0"', path, *argv]
        r = c.exec_run(["timeout", str(max(1, int(timeout))), *argv], demux=True)
        out, err = r.output if r.output else (b"", b"")
        return r.exit_code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    def _put(self, node: str, path: str, data: bytes) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            ti = tarfile.TarInfo(Path(path).name)
            ti.size, ti.mode = len(data), 0o600
            tar.addfile(ti, io.BytesIO(data))
        self.containers[node].put_archive(str(Path(path).parent), buf.getvalue())

    def upload(self, node: str, local: Path, remote: str) -> None:
        self._put(node, remote, Path(local).read_bytes())

    def download(self, node: str, remote: str, local: Path) -> None:
        stream, _ = self.containers[node].get_archive(remote)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.getmembers()[0]
            f = tar.extractfile(member)
            if f is None:
                raise HarnessError(f"{node}: {remote} is not a file")
            Path(local).parent.mkdir(parents=True, exist_ok=True)
            Path(local).write_bytes(f.read())

    # ------------------------------------------------------------ the daemon
    def start_daemon(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        self.daemons[node] = self._spawn(node, argv, log, env, "node")
        return self.daemons[node][2]

    def start_helper(self, node: str, argv: Sequence[str], log: str) -> int:
        """A process of the run beside the node's daemon (a packet delayer),
        leased and registered like it; it goes with the container."""
        h = self._spawn(node, argv, log, {}, "helper")
        self.helpers.append(h)
        return h[2]

    def _spawn(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str],
               role: str) -> tuple[str, Any, int, int | None]:
        run_id = self.state.run_id if self.state is not None else self.tag
        lease = {} if self.detached else {"KRAFTWERK_LEASE_FD": "0"}
        envs = {RUN_ENV: run_id, **lease, **env}
        eid = self.client.api.exec_create(self.containers[node].id, ["sh", "-c", 'exec "$@" >>"$0" 2>&1', log, *argv],
                                          stdin=not self.detached, stdout=False, stderr=False, environment=envs,
                                          workdir=str(REPO_ROOT))["Id"]
        sock = None if self.detached else self.client.api.exec_start(eid, socket=True)
        if self.detached:
            self.client.api.exec_start(eid, detach=True)
        pid = 0
        deadline = time.monotonic() + 10
        while not pid and time.monotonic() < deadline:
            pid = int(self.client.api.exec_inspect(eid).get("Pid") or 0)
            time.sleep(0.01 if not pid else 0)
        if not pid:
            raise HarnessError(f"{node}: daemon did not start in its container")
        if self.state is not None:
            self.state.add_process(pid, role, node)
        return (eid, sock, pid, proc_start_time(pid))

    def running(self, node: str) -> bool:
        d = self.daemons.get(node)
        return d is not None and alive(d[2], d[3])

    def signal(self, node: str, sig: int) -> None:
        if self.running(node):
            try:
                os.kill(self.daemons[node][2], sig)
            except ProcessLookupError:
                pass

    def wait_exit(self, node: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.running(node):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def teardown(self) -> None:
        for node in list(self.daemons):
            self.signal(node, _signal.SIGCONT)
            self.signal(node, _signal.SIGKILL)
            try:
                if self.daemons[node][1] is not None:
                    self.daemons[node][1].close()
            except OSError:
                pass
        for _, sock, pid, start in self.helpers:
            try:
                if alive(pid, start):
                    os.kill(pid, _signal.SIGKILL)
                if sock is not None:
                    sock.close()
            except OSError:  # gone already
                pass
        for c in self.containers.values():
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001 - gone already
                pass
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:  # noqa: BLE001
                pass
        release_subnet(self.tag)
        if self.state is not None:
            self.state.remove_resource("docker", f"kw-{self.tag}")


def sweep(force: bool = False) -> list[str]:
    """Remove containers and networks labelled ``kraftwerk`` whose owning
    harness is gone (all with ``force``). Needs no state file; idempotent.
    The engine itself is left running (other runs may be using it)."""
    client = engine(start=False) if os.geteuid() == 0 else None
    removed: list[str] = []
    if client is not None:
        def dead(labels: Mapping[str, str]) -> bool:
            pid, _, start = (labels.get(f"{LABEL}.owner") or "").partition(":")
            if not pid.isdigit():
                return True
            return not alive(int(pid), int(start) if start.isdigit() else None) or int(pid) == os.getpid()

        for c in client.containers.list(all=True, filters={"label": LABEL}):
            if c.labels.get(f"{LABEL}.kind") == KIND_CLUSTER:
                continue  # a kept cluster: no run's, removed by `kraftwerk cluster down`
            if force or dead(c.labels):
                c.remove(force=True)
                removed.append(f"container {c.name}")
        for n in client.networks.list(filters={"label": LABEL}):
            if (n.attrs.get("Labels") or {}).get(f"{LABEL}.kind") == KIND_CLUSTER:
                continue
            if force or dead(n.attrs.get("Labels") or {}):
                try:
                    n.remove()
                    removed.append(f"network {n.name}")
                except Exception:  # noqa: BLE001 - still in use by a live run's container
                    pass
    return removed
