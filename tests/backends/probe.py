"""Which directed links carry packets: a UDP datagram over each link, to a
receiver on every host and one for the clients in this process's namespace.
Used by each backend's partition test (the hosts are any ``Remote``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from itertools import permutations
from pathlib import Path

from nemesis.control import CLIENT

PORT = 7000

RECEIVER = """
import socket, sys, threading
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((sys.argv[1], int(sys.argv[2]) + 1)); t.listen(64)
def tcp():
    while True:
        c, _ = t.accept(); c.close()
threading.Thread(target=tcp, daemon=True).start()
with open(sys.argv[3], "a") as f:
    while True:
        data, _ = s.recvfrom(100)
        f.write(data.decode() + "\\n"); f.flush()
"""

SENDER = """
import socket, sys
me, targets = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    for t in targets:
        name, addr = t.split("=")
        try:
            s.sendto(f"{me}->{name}".encode(), (addr, %d))
        except PermissionError:  # dropped on its way out by our OUTPUT chain
            pass
""" % PORT


def all_links(nodes: list[str]) -> set[tuple[str, str]]:
    return set(permutations([*nodes, CLIENT], 2))


class Prober:
    def __init__(self, hosts, nodes: list[str], workdir: Path, python: str = sys.executable,
                 remote_dir=lambda n: None) -> None:
        self.hosts, self.nodes, self.workdir, self.python = hosts, nodes, workdir, python
        self.remote_dir = remote_dir
        self.client_rx: subprocess.Popen | None = None

    def got_file(self, n: str) -> str:
        return f"{self.remote_dir(n) or self.workdir}/{n}.got"

    def start(self) -> None:
        for n in self.nodes:
            self.hosts.exec(n, ["mkdir", "-p", str(Path(self.got_file(n)).parent)], 10)
            self.hosts.start_daemon(n, [self.python, "-c", RECEIVER, self.hosts.address(n), str(PORT), self.got_file(n)],
                                    self.got_file(n) + ".log", {})
        self.client_rx = subprocess.Popen([sys.executable, "-c", RECEIVER, self.hosts.client_address, str(PORT),
                                           str(self.workdir / "client.got")])
        time.sleep(0.7)

    def stop(self) -> None:
        if self.client_rx is not None:
            self.client_rx.kill()
            self.client_rx.wait()

    def delivered(self) -> set[tuple[str, str]]:
        """Send a datagram over every directed link; return the links it crossed."""
        for n in self.nodes:
            self.hosts.exec(n, ["truncate", "-s", "0", self.got_file(n)], 10)
        (self.workdir / "client.got").write_text("")
        addr = {**{n: self.hosts.address(n) for n in self.nodes}, CLIENT: self.hosts.client_address}
        for src in [*self.nodes, CLIENT]:
            argv = [self.python, "-c", SENDER, src, *[f"{d}={addr[d]}" for d in addr if d != src]]
            if src == CLIENT:
                subprocess.run([sys.executable, *argv[1:]], check=True, timeout=10)
            else:
                rc, _, err = self.hosts.exec(src, argv, 20)
                assert rc == 0, err
        time.sleep(0.4)
        got = set()
        texts = [(self.workdir / "client.got").read_text()]
        for n in self.nodes:
            local = self.workdir / f"{n}.got.copy"
            self.hosts.download(n, self.got_file(n), local)
            texts.append(local.read_text())
        for text in texts:
            for line in text.split():
                a, b = line.split("->")
                got.add((a, b))
        return got

    def tcp_connects(self, src: str, dst: str) -> bool:
        if src == CLIENT:
            try:
                socket.create_connection((self.hosts.address(dst), PORT + 1), timeout=1).close()
                return True
            except OSError:
                return False
        code = f"import socket; socket.create_connection(('{self.hosts.address(dst)}', {PORT + 1}), timeout=1).close()"
        return self.hosts.exec(src, [self.python, "-c", code], 10)[0] == 0
