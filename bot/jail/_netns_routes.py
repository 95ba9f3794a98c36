"""Run as its own process: `python -I _netns_routes.py PID`. Adds an `unreachable` route for
link-local addresses (169.254.0.0/16: cloud metadata services) to the network namespace of
PID, a jail waiting to start. Standard library only, single-threaded (setns into a user
namespace refuses threaded callers).

The jailed command cannot remove the route: it has no capabilities in the namespace (bwrap
--cap-drop ALL, no new privileges), and a user namespace it makes gives it none over this one.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
NS_GET_USERNS = 0xB701  # ioctl: the user namespace owning a namespace (Linux 4.9)
RTM_NEWROUTE = 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_UNREACHABLE = 254, 4, 0, 7
RTA_DST = 1
BLOCKED = (("169.254.0.0", 16),)


def enter(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    if os.geteuid() != 0:  # root may enter directly; others through the owning namespace
        owner = fcntl.ioctl(net, NS_GET_USERNS)
        if libc.setns(owner, CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "setns(user)")
    if libc.setns(net, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns(net)")


def unreachable(address: str, prefix: int) -> bytes:
    body = struct.pack(
        "=BBBBBBBBI",
        socket.AF_INET,
        prefix,
        0,
        0,
        RT_TABLE_MAIN,
        RTPROT_STATIC,
        RT_SCOPE_UNIVERSE,
        RTN_UNREACHABLE,
        0,
    )
    body += struct.pack("=HH4s", 8, RTA_DST, socket.inet_aton(address))
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return struct.pack("=IHHII", 16 + len(body), RTM_NEWROUTE, flags, 1, 0) + body


def add_routes() -> None:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as sock:
        for address, prefix in BLOCKED:
            sock.send(unreachable(address, prefix))
            error = struct.unpack_from("=i", sock.recv(4096), 16)[0]  # the nlmsgerr's code
            if error != 0:
                raise OSError(-error, f"route {address}/{prefix}")


def main(argv: list[str]) -> int:
    try:
        enter(int(argv[1]))
        add_routes()
    except OSError as exc:
        print(f"blocking link-local addresses failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
