"""The systemd notify protocol: a few datagrams on a Unix socket.

READY=1 once the daemon works, STATUS= lines, WATCHDOG=1 from the main loop, STOPPING=1 on
shutdown. Without $NOTIFY_SOCKET (not under systemd) every call is a no-op.
"""

from __future__ import annotations

import socket

from bot.core.log import get_logger

log = get_logger(__name__)


class Notifier:
    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self._address = "\0" + address[1:] if address and address.startswith("@") else address
        self.watchdog_interval = watchdog_usec / 2_000_000 if watchdog_usec else None

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def send(self, *fields: str) -> None:
        if not self._address:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                # Never block the main loop on a slow reader: the next ping will do.
                sock.sendto("\n".join(fields).encode(), socket.MSG_DONTWAIT, self._address)
        except OSError as exc:
            # The supervisor may be gone (shutdown); notification is best effort.
            log.warning("notify_failed", error=f"{type(exc).__name__}: {exc.strerror}")

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def stopping(self) -> None:
        self.send("STOPPING=1", "STATUS=stopping: checkpointing running tasks")
