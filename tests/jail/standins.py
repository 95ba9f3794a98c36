"""Stand-in servers for the network tests: one on the host's 127.0.0.1, one "outside".

"Outside" is the machine's own non-loopback IPv4 address, or, where it has none, the far end
of a veth pair into a network namespace this module makes (we are root). No traffic leaves the
machine either way. Each server is a real process that prints every request it gets.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("hit", self.path, flush=True)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached-" + self.path.strip("/").encode())
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer((sys.argv[1], 0), H)
print("port", srv.server_address[1], flush=True)
srv.serve_forever()
"""
# The command a jail runs to try each URL: one line per URL, what came back or what failed.
FETCH = (
    'python3 -c "import sys, urllib.request\n'
    "for u in sys.argv[1:]:\n"
    " try: print(u, urllib.request.urlopen(u, timeout=5).read().decode())\n"
    " except Exception as e: print(u, 'failed', type(e).__name__, e)\""
)


@dataclass
class StandIn:
    address: str
    port: int
    proc: subprocess.Popen[str]
    hits: list[str] = field(default_factory=list)

    def url(self, name: str, address: str | None = None) -> str:
        return f"http://{address or self.address}:{self.port}/{name}"


@contextlib.contextmanager
def serve(address: str, prefix: tuple[str, ...] = ()) -> Iterator[StandIn]:
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", SERVER, address],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[:1] == ["port"], f"the stand-in server did not start: {first}"
        server = StandIn(address, int(first[1]), proc)
        reader = threading.Thread(target=_collect, args=(server,), daemon=True)
        reader.start()
        yield server
    finally:
        proc.kill()
        proc.wait()


def _collect(server: StandIn) -> None:
    assert server.proc.stdout is not None
    for line in server.proc.stdout:
        server.hits.append(line.strip())


def own_address() -> str | None:
    """The machine's first global-scope IPv4 address, if it has one."""
    try:
        listing = subprocess.run(
            ["ip", "-4", "-o", "addr", "show", "scope", "global"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except FileNotFoundError:
        return None
    for line in listing.splitlines():
        words = line.split()
        if "inet" in words:
            return words[words.index("inet") + 1].split("/")[0]
    return None


@contextlib.contextmanager
def outside() -> Iterator[tuple[str, tuple[str, ...]] | None]:
    """(address, argv prefix to run the server there), or None when neither is possible."""
    address = own_address()
    if address is not None:
        yield address, ()
        return
    with _veth_namespace() as made:
        yield made


@contextlib.contextmanager
def _veth_namespace() -> Iterator[tuple[str, tuple[str, ...]] | None]:
    if os.geteuid() != 0:
        yield None
        return
    name = f"botjail{os.getpid() % 100000}"
    host, far = f"bj{os.getpid() % 100000}h", f"bj{os.getpid() % 100000}n"
    steps = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", host, "type", "veth", "peer", "name", far],
        ["ip", "link", "set", far, "netns", name],
        ["ip", "addr", "add", "10.213.0.1/30", "dev", host],
        ["ip", "link", "set", host, "up"],
        ["ip", "netns", "exec", name, "ip", "addr", "add", "10.213.0.2/30", "dev", far],
        ["ip", "netns", "exec", name, "ip", "link", "set", far, "up"],
    ]
    try:
        ok = all(
            subprocess.run(step, capture_output=True, check=False).returncode == 0 for step in steps
        )
        yield ("10.213.0.2", ("ip", "netns", "exec", name)) if ok else None
    finally:
        subprocess.run(["ip", "link", "del", host], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def children_named(name: str, parent: int | None = None) -> list[int]:
    """Processes called `name` whose parent is `parent` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if comm == name[:15] and ppid == parent:
            found.append(int(entry))
    return found
