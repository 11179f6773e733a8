"""The ``ssh`` backend: nodes on hosts reached with paramiko (VMs, or the
throwaway namespace hosts of ``kraftwerk hosts up``).

* Host keys are verified against known_hosts (the hosts file's, else
  ``~/.ssh/known_hosts``); a key seen for the first time is refused unless
  ``--ssh-accept-new`` (then it is added to that file: trust on first use),
  and a key that differs from the known one is always refused.
* Commands are argv lists, quoted with ``shlex.join`` into the one string
  ssh carries, prefixed with ``sudo -n`` for a non-root user.
* The project reaches each host as its wheel in a venv (:mod:`harness.runtimes.bundle`),
  installed once per content under the host's ``dir``, from wheels chosen
  for that host's own interpreter (its version, ABI, architecture and glibc,
  asked of its ``python3.11``): hosts of two kinds get two bundles.
* Installs are safe under concurrency (two runs, or one host reached under
  two names, or hosts sharing a ``dir``): the install of ``<name>`` holds an
  exclusive ``flock`` on ``<dir>/.<name>.lock`` (held by a process on its
  own channel, so a harness that dies releases it), unpacks into a fresh
  ``<dir>/<name>.<random>`` and publishes it by renaming a symlink onto
  ``<dir>/<name>``: the venv never moves (its paths stay true), nobody
  sees half of one, and one left by a dead install is removed under the
  lock by the next.
* A daemon is started on a channel of its own that stays open for the run
  (:data:`LEASED`), with the channel as its stdin and
  ``KRAFTWERK_LEASE_FD=0``. If the harness dies, the connection drops, sshd
  closes the daemon's stdin and the node ends the run on that host itself
  (:mod:`harness.rundir.lease`); a watcher on the same channel SIGKILLs a daemon
  that knows no lease (Kafka's JVM): a SIGKILLed harness leaves no node
  running on a VM. The channel's exit status says when the daemon has exited.
* Node data lives in ``<dir>/runs/<run-id>/<node>/``; teardown brings the
  logs and traces back, removes that directory and our iptables chains.

Every problem reaching a host before the run (unreachable, refused key,
unknown key, failed login, no python3.11, an interpreter no wheel is made
for: not CPython, not glibc Linux) is one line, exit 2.
"""

from __future__ import annotations

import secrets
import shlex
import signal as _signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Iterator, Mapping, Sequence

import paramiko

from harness.runtimes import bundle
from harness.runtimes.hostsfile import HostSpec, load
from harness.errors import HarnessError, UsageError
from harness.rundir.state import RUN_ENV, RunState

PYTHON = "python3.11"
CONNECT_TIMEOUT = 6.0
#: a daemon held by its channel: the daemon keeps the channel as its stdin
#: (a kraftwerk node ends itself on EOF: harness.rundir.lease), and a watcher kills
#: it when the channel closes, so a daemon that knows no lease (a JVM) goes
#: too when the harness dies; the shell waits for the daemon and exits with
#: its status, so the channel's exit status says when it has exited
LEASED = ('exec 3<&0; "$@" <&3 >>"$0" 2>&1 & c=$!; echo $c; '
          '{ cat <&3 >/dev/null; kill -KILL $c 2>/dev/null; } & w=$!; '
          'wait $c; s=$?; kill $w 2>/dev/null; exit $s')
#: run by the host's interpreter: an exclusive flock on argv[1], held until
#: its stdin closes (we close it, or sshd does when the harness dies)
HOLD = ("import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('held', flush=True); sys.stdin.read()")
#: how long an install waits for another one holding the same lock
LOCK_WAIT = 900.0


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Trust on first use: remember a new key in the known_hosts file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def known_hosts_path(spec: HostSpec) -> Path:
    return Path(spec.known_hosts) if spec.known_hosts else Path.home() / ".ssh" / "known_hosts"


def connect(spec: HostSpec, accept_new: bool = False, timeout: float = CONNECT_TIMEOUT) -> paramiko.SSHClient:
    """A verified, logged-in connection, or a one-line UsageError."""
    where = f"host {spec.name} ({spec.address}:{spec.port})"
    kh = known_hosts_path(spec)
    client = paramiko.SSHClient()
    try:
        if kh.exists():
            client.load_host_keys(str(kh))
    except (OSError, paramiko.SSHException) as e:
        raise UsageError(f"{where}: cannot read known_hosts {kh}: {e}") from None
    client.set_missing_host_key_policy(_AcceptNew(kh) if accept_new else paramiko.RejectPolicy())
    try:
        client.connect(spec.address, port=spec.port, username=spec.user, key_filename=spec.key,
                       timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                       allow_agent=False, look_for_keys=spec.key is None)
    except paramiko.BadHostKeyException as e:
        raise UsageError(f"{where}: host key mismatch: it offers {e.key.get_name()} {e.key.get_fingerprint().hex()}, "
                         f"{kh} has another (a different machine, or a reinstalled one: fix known_hosts)") from None
    except paramiko.AuthenticationException:
        raise UsageError(f"{where}: login as {spec.user} refused (key {spec.key or 'default keys'})") from None
    except paramiko.SSHException as e:
        text = str(e)
        if "known_hosts" in text:
            raise UsageError(f"{where}: host key not in {kh}; add it, or pass --ssh-accept-new to trust it on first use") from None
        raise UsageError(f"{where}: ssh failed: {text.splitlines()[0] if text else type(e).__name__}") from None
    except (socket.timeout, TimeoutError):
        raise UsageError(f"{where}: unreachable (no answer in {timeout:.0f}s)") from None
    except OSError as e:
        raise UsageError(f"{where}: unreachable ({e.strerror or e})") from None
    except ValueError as e:  # a malformed key file
        raise UsageError(f"{where}: {e}") from None
    return client


def preflight(hosts_file: str, nodes: Sequence[str], accept_new: bool = False) -> dict[str, tuple[HostSpec, Any]]:
    """Parse the hosts file, map nodes onto hosts, connect to each and check
    it can run a node. Returns {node: (host, connection)}."""
    specs = load(hosts_file)
    if len(specs) < len(nodes):
        raise UsageError(f"hosts file {hosts_file}: {len(specs)} host(s) for {len(nodes)} nodes "
                         f"({', '.join(nodes)}); one host per node")
    out: dict[str, tuple[HostSpec, Any]] = {}

    def check(spec: HostSpec) -> paramiko.SSHClient:
        client = connect(spec, accept_new)
        probe = "import sys; assert sys.version_info[:2] == (3, 11)\n" + bundle.TARGET_PROBE
        rc, out, err = _run(client, _prefix(spec) + [PYTHON, "-c", probe], 20)
        if rc != 0:
            client.close()
            raise UsageError(f"host {spec.name} ({spec.address}): no {PYTHON} there ({err.strip()[:120] or f'exit {rc}'})")
        try:
            bundle.Target.parse(out, f"host {spec.name} ({spec.address})")  # one we can ship wheels to
        except UsageError:
            client.close()
            raise
        return client

    pairs = list(zip(nodes, specs))
    with ThreadPoolExecutor(max_workers=min(16, len(pairs))) as pool:
        futs = [(node, spec, pool.submit(check, spec)) for node, spec in pairs]
        errors = []
        for node, spec, f in futs:
            try:
                out[node] = (spec, f.result())
            except UsageError as e:
                errors.append(e)
    if errors:
        for _, c in out.values():
            c.close()
        raise errors[0]
    return out


def _prefix(spec: HostSpec) -> list[str]:
    return ["sudo", "-n", "--"] if spec.sudo else []


def _run(client: paramiko.SSHClient, argv: Sequence[str], timeout: float,
         stdin: str | None = None) -> tuple[int, str, str]:
    try:
        i, o, e = client.exec_command(shlex.join(argv), timeout=timeout)
        if stdin is not None:
            i.write(stdin)
        i.channel.shutdown_write()
        out, err = o.read().decode(errors="replace"), e.read().decode(errors="replace")
        return o.channel.recv_exit_status(), out, err
    except (socket.timeout, TimeoutError):
        return 124, "", f"timed out after {timeout:.0f}s"
    except (paramiko.SSHException, OSError) as ex:
        return 255, "", f"ssh: {ex}"


def host_passes(spec: HostSpec, client: paramiko.SSHClient, test_args: Sequence[str], timeout: float = 20) -> bool:
    """Whether ``test TEST_ARGS`` succeeds on the host (as root where its
    hosts-file entry says sudo): what a run needs there, asked before
    anything starts."""
    return _run(client, _prefix(spec) + ["test", *test_args], timeout)[0] == 0


def undo_argv(spec: HostSpec, run_id: str) -> list[list[str]]:
    """What ``kraftwerk cleanup`` runs (the OpenSSH client, the same known
    host key) if the harness dies: our chains emptied (a partition in force
    would outlive it) and the run's directory removed; the node processes
    end by themselves (their lease). Every piece from the hosts file is
    quoted for the remote shell."""
    sudo = "sudo -n " if spec.sudo else ""
    remote = (f"{sudo}iptables -w -F kw-in; {sudo}iptables -w -F kw-out; "
              f"{sudo}rm -rf -- {shlex.quote(f'{spec.dir}/runs/{run_id}')}")
    argv = ["ssh", "-p", str(spec.port), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts_path(spec)}", "-o", "ConnectTimeout=5"]
    if spec.key:
        argv += ["-i", spec.key, "-o", "IdentitiesOnly=yes"]
    return [argv + [f"{spec.user}@{spec.address}", remote]]


class SshHosts:
    """The host contract (``Remote``) over ssh connections, one host per node."""

    runtime = "ssh"
    shared_fs = False
    ephemeral_net = False  # hosts outlive the run: our iptables chains are removed at teardown

    def __init__(self, hosts: dict[str, tuple[HostSpec, Any]], state: RunState | None, run_id: str,
                 detached: bool = False) -> None:
        self.hosts = hosts
        self.state = state
        self.run_id = run_id
        #: daemons that outlive the connection (``kraftwerk cluster up``): no
        #: lease, their own session; the pid is all there is to hold
        self.detached = detached
        self.daemons: dict[str, tuple[Any, int]] = {}  # node -> (channel or None, pid)
        self.helpers: list[tuple[str, Any, int]] = []  # (node, channel, pid) beside the daemons
        self._sftp: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.app: dict[str, str] = {}
        self.client_address = self._client_address()

    @classmethod
    def open(cls, checked: dict[str, tuple[HostSpec, Any]], names: Sequence[str], state: RunState | None,
             run_dir: Path, detached: bool = False, run_id: str | None = None) -> "SshHosts":
        self = cls(checked, state, run_id or (state.run_id if state is not None else run_dir.name), detached)
        if state is not None:
            for node, (spec, _) in checked.items():
                state.add_resource("ssh-host", f"{spec.name} ({node})", undo=undo_argv(spec, self.run_id))
        self.install()
        return self

    def _client_address(self) -> str:
        node = next(iter(self.hosts))
        rc, out, _ = _run(self.hosts[node][1], ["sh", "-c", 'echo "$SSH_CONNECTION"'], 10)
        if rc != 0 or not out.split():
            raise HarnessError(f"host {self.hosts[node][0].name}: cannot tell the harness's address ($SSH_CONNECTION)")
        return out.split()[0]

    # ------------------------------------------------------------ identity
    @property
    def control_ports(self) -> tuple[int, ...]:
        """The hosts' sshd ports: the harness's own path to every host, which
        no client partition may cut (a cut connection could not even carry
        the heal)."""
        return tuple(sorted({spec.port for spec, _ in self.hosts.values()}))

    def node_names(self) -> list[str]:
        return list(self.hosts)

    def address(self, node: str) -> str:
        addr = self.hosts[node][0].address
        try:
            return socket.gethostbyname(addr)
        except OSError:
            return addr

    def node_dir(self, node: str) -> str:
        return f"{self.hosts[node][0].dir}/runs/{self.run_id}/{node}"

    def kraftwerk_argv(self, node: str) -> list[str]:
        """The project's command on the node's host: its venv's interpreter."""
        return [f"{self.app[node]}/{bundle.VENV_PYTHON}", "-c", "from harness.cli import main; main()"]

    # ------------------------------------------------------------ install
    def install(self) -> None:
        """The project's wheel and a node's dependencies into a venv on every
        host that lacks it (once per content; :mod:`harness.runtimes.bundle`),
        one bundle per kind of interpreter among the hosts."""
        with ThreadPoolExecutor(max_workers=min(16, len(self.hosts))) as pool:
            targets = dict(zip(self.hosts, pool.map(self.target, list(self.hosts))))
        self.app = {}
        for target in sorted(set(targets.values()), key=lambda t: t.key):
            digest, path = bundle.build(target)
            wheels, pip_wheel = bundle.contents(path)
            self.app.update(self.install_archive(
                f"app-{digest}", path, lambda d: bundle.install_argvs(d, PYTHON, wheels, pip_wheel),
                nodes=[n for n, t in targets.items() if t == target]))

    def target(self, node: str) -> bundle.Target:
        """What the node's host's interpreter accepts as wheels."""
        spec = self.hosts[node][0]
        out = self._check(node, [PYTHON, "-c", bundle.TARGET_PROBE])
        return bundle.Target.parse(out, f"host {spec.name} ({spec.address})")

    def install_archive(self, name: str, path: Path, then: Any = None,
                        nodes: Sequence[str] | None = None) -> dict[str, str]:
        """Unpack the tar ``path`` as ``<dir>/<name>`` on every host (of
        ``nodes``, else all) that lacks it, running ``then(dir)``'s argvs
        there; {node: that directory}. Under the host's lock on that name,
        into a directory of its own, published by renaming a symlink onto
        ``<dir>/<name>`` (module docstring)."""

        def one(node: str) -> tuple[str, str]:
            base = self.hosts[node][0].dir
            d = f"{base}/{name}"
            if self._complete(node, d):
                return node, d
            self._check(node, ["mkdir", "-p", base])
            with self._host_lock(node, f"{base}/.{name}.lock"):
                if self._complete(node, d):  # made by the install we waited for
                    return node, d
                # what an install that died left (we hold the lock: nobody is at work on it)
                self._check(node, ["sh", "-c", 'rm -rf -- "$1" "$1".*', "sh", d])
                real = f"{d}.{secrets.token_hex(6)}"
                self._check(node, ["mkdir", real])
                # beside it, not in it: sftp writes as the login user, and with
                # sudo ``real`` is root's (``dir`` is the user's: vagrant/)
                self.upload(node, path, f"{real}.tar")
                self._check(node, ["tar", "-xf", f"{real}.tar", "-C", real])
                self._check(node, ["rm", "-f", f"{real}.tar"])
                for argv in then(real) if then is not None else []:
                    self._check(node, argv)
                self._check(node, ["touch", f"{real}/.complete"])
                self._check(node, ["ln", "-s", PurePosixPath(real).name, f"{real}.link"])
                self._check(node, ["mv", "-T", f"{real}.link", d])  # rename(2): all or nothing
            return node, d

        names = list(nodes if nodes is not None else self.hosts)
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(names)))) as pool:
            return dict(pool.map(one, names))

    def _complete(self, node: str, d: str) -> bool:
        return self.exec(node, ["test", "-f", f"{d}/.complete"], 10)[0] == 0

    @contextmanager
    def _host_lock(self, node: str, path: str) -> Iterator[None]:
        """An exclusive lock on ``path`` on the node's host for the block's
        length: a process holding a ``flock`` until its channel closes, so a
        lock is never left behind by a harness that dies."""
        spec, client = self.hosts[node]
        where = f"host {spec.name}"
        try:
            chan = client.get_transport().open_session(timeout=CONNECT_TIMEOUT)
            chan.settimeout(LOCK_WAIT)
            chan.exec_command(shlex.join(_prefix(spec) + [PYTHON, "-c", HOLD, path]))
            got = b""
            while not got.endswith(b"\n"):
                chunk = chan.recv(64)
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, TimeoutError):
            raise HarnessError(f"{where}: {path} held by another install for {LOCK_WAIT:.0f} s") from None
        except (paramiko.SSHException, OSError, AttributeError) as e:
            raise HarnessError(f"{where}: cannot lock {path}: ssh: {e}") from None
        if got.strip() != b"held":
            err = chan.recv_stderr(4096).decode(errors="replace").strip().splitlines() if chan.recv_stderr_ready() else []
            chan.close()
            raise HarnessError(f"{where}: cannot lock {path}: {(err or ['no answer'])[-1][:200]}")
        try:
            yield
        finally:
            try:
                chan.shutdown_write()  # the holder reads EOF and exits: released
                chan.status_event.wait(10)
            finally:
                chan.close()

    def _check(self, node: str, argv: list[str]) -> str:
        rc, out, err = self.exec(node, argv, 120)
        if rc != 0:
            raise HarnessError(f"host {self.hosts[node][0].name}: {' '.join(argv[:3])}: {(err or out).strip()[:200]}")
        return out

    # ------------------------------------------------------------ commands and files
    def exec(self, node: str, argv: Sequence[str], timeout: float = 30.0,
             stdin: str | None = None) -> tuple[int, str, str]:
        spec, client = self.hosts[node]
        return _run(client, _prefix(spec) + list(argv), timeout, stdin)

    def _sftp_for(self, node: str) -> Any:
        with self._lock:
            if node not in self._sftp:
                self._sftp[node] = self.hosts[node][1].open_sftp()
            return self._sftp[node]

    def upload(self, node: str, local: Path, remote: str) -> None:
        try:
            self._sftp_for(node).put(str(local), remote)
        except (OSError, paramiko.SSHException) as e:
            raise HarnessError(f"host {self.hosts[node][0].name}: upload to {remote}: {e}") from None

    def download(self, node: str, remote: str, local: Path) -> None:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._sftp_for(node).get(remote, str(local))
        except (OSError, paramiko.SSHException) as e:
            raise HarnessError(f"host {self.hosts[node][0].name}: download {remote}: {e}") from None

    # ------------------------------------------------------------ the daemon
    def start_daemon(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        if self.detached:
            return self._start_detached(node, argv, log, env)
        self.daemons[node] = self._start_leased(node, argv, log, env)
        return self.daemons[node][1]

    def start_helper(self, node: str, argv: Sequence[str], log: str) -> int:
        """A process of the run beside the node's daemon (a packet delayer),
        on a leased channel of its own like it; killed at teardown."""
        chan, pid = self._start_leased(node, argv, log, {})
        self.helpers.append((node, chan, pid))
        return pid

    def _start_leased(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> tuple[Any, int]:
        spec, client = self.hosts[node]
        envs = {RUN_ENV: self.run_id, "KRAFTWERK_LEASE_FD": "0", **env}
        cmd = _prefix(spec) + ["env", *[f"{k}={v}" for k, v in envs.items()], "sh", "-c", LEASED, log, *argv]
        chan = client.get_transport().open_session()
        chan.exec_command(shlex.join(cmd))
        line = chan.makefile("r").readline().strip()
        if not line.isdigit():
            raise HarnessError(f"host {spec.name}: daemon did not start ({line[:200] or 'no pid'})")
        return chan, int(line)

    def _start_detached(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        """A daemon in a session of its own on the host, with no lease:
        ``setsid`` execs in a background child (not a group leader), and
        so do ``env`` and ``sh``, so ``$!`` is the daemon's pid."""
        envs = {RUN_ENV: self.run_id, **env}
        inner = ["env", *[f"{k}={v}" for k, v in envs.items()], "sh", "-c", 'exec "$@" >>"$0" 2>&1', log, *argv]
        rc, out, err = self.exec(node, ["sh", "-c", 'setsid "$@" </dev/null >/dev/null 2>&1 & echo $!', "sh", *inner], 20)
        if rc != 0 or not out.strip().isdigit():
            raise HarnessError(f"host {self.hosts[node][0].name}: daemon did not start ({(err or out).strip()[:200]})")
        self.daemons[node] = (None, int(out.strip()))
        return int(out.strip())

    def adopt(self, node: str, pid: int) -> None:
        """Hold a detached daemon another command started (``cluster down``)."""
        self.daemons[node] = (None, pid)

    def running(self, node: str) -> bool:
        d = self.daemons.get(node)
        if d is None:
            return False
        if d[0] is None:
            return self.exec(node, ["kill", "-0", str(d[1])], 10)[0] == 0
        return not d[0].exit_status_ready()

    def signal(self, node: str, sig: int) -> None:
        if self.running(node):
            self.exec(node, ["kill", "-s", _signal.Signals(sig).name.removeprefix("SIG"), str(self.daemons[node][1])], 10)

    def wait_exit(self, node: str, timeout: float) -> bool:
        d = self.daemons.get(node)
        if d is None:
            return True
        if d[0] is not None:
            return d[0].status_event.wait(timeout)
        deadline = time.monotonic() + timeout
        while self.running(node):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def close(self) -> None:
        """Drop the connections, leaving the hosts as they are."""
        for s in self._sftp.values():
            s.close()
        self._sftp.clear()
        for _, client in self.hosts.values():
            client.close()

    def teardown(self) -> None:
        for node in list(self.daemons):
            self.signal(node, _signal.SIGCONT)
            self.signal(node, _signal.SIGKILL)
        for node, chan, pid in self.helpers:
            if not chan.exit_status_ready():
                self.exec(node, ["kill", "-s", "KILL", str(pid)], 10)
            chan.status_event.wait(10)
            chan.close()
        self.helpers.clear()
        for node, (chan, _) in list(self.daemons.items()):
            if chan is None:
                self.wait_exit(node, 10)
                continue
            chan.status_event.wait(10)
            chan.close()
        for node, (spec, _) in self.hosts.items():
            self.exec(node, ["rm", "-rf", f"{spec.dir}/runs/{self.run_id}"], 60)
        self.close()
        if self.state is not None:
            for node, (spec, _) in self.hosts.items():
                self.state.remove_resource("ssh-host", f"{spec.name} ({node})")
