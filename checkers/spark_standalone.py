"""A Spark standalone cluster (one master, N workers) from the installed PySpark.

The checking pipeline and campaigns take any Spark master URL; this starts a
real one on this machine, as separate JVM processes, so the distributed path
(tasks shipped to executors in other processes, results sent back) is
exercised without a cluster elsewhere. Tests and bench/ use it; against an
existing cluster, pass its URL (``--spark-master spark://HOST:7077``) and make
sure every worker has Python 3.11 with kraftwerk installed and sees the
results directory at the same path (campaign seeds run on the executors and
write their run directories there).

    with StandaloneCluster(workers=1, cores=2) as url:
        ...  # url is spark://127.0.0.1:PORT

The processes are started in their own session with the parent-death signal,
and stopped (the whole process group) on exit.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _preexec() -> None:  # pragma: no cover - runs in the child
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class StandaloneCluster:
    def __init__(self, workers: int = 1, cores: int = 2, memory: str = "2g", timeout: float = 90.0) -> None:
        self.workers, self.cores, self.memory, self.timeout = workers, cores, memory, timeout
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dir = Path(tempfile.mkdtemp(prefix="kraftwerk-spark-standalone-"))
        self.url = ""

    def _start(self, cls: str, args: list[str], log: str) -> subprocess.Popen[bytes]:
        home = Path(pyspark.__file__).parent
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.dir), "SPARK_WORKER_DIR": str(self.dir / "work"),
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        out = open(self.dir / log, "wb")
        p = subprocess.Popen([str(home / "bin" / "spark-class"), cls, *args], stdout=out, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True, preexec_fn=_preexec)
        out.close()
        self.procs.append(p)
        return p

    def _wait_log(self, log: str, text: str) -> None:
        deadline = time.monotonic() + self.timeout
        path = self.dir / log
        while time.monotonic() < deadline:
            if text in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.2)
        tail = path.read_text(errors="replace").strip().splitlines()[-1:] or ["(empty log)"]
        self.stop()
        raise RuntimeError(f"spark standalone: {log} did not report {text!r}: {tail[0]}")

    def start(self) -> str:
        port = _free_port()
        self._start("org.apache.spark.deploy.master.Master",
                    ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())], "master.log")
        self._wait_log("master.log", "I have been elected leader")
        self.url = f"spark://127.0.0.1:{port}"
        for i in range(self.workers):
            log = f"worker-{i}.log"
            self._start("org.apache.spark.deploy.worker.Worker",
                        [self.url, "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                         "--webui-port", str(_free_port()), "--work-dir", str(self.dir / f"work-{i}")], log)
            self._wait_log(log, "Successfully registered with master")
        return self.url

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
