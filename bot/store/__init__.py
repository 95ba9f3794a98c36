"""Where task state lives: one interface (`Store`), two backends.

- files (`bot.store.files.FileStore` over `bot.store.task_files`, the default): one daemon
  per state dir, nothing to install;
- postgres (`bot.store.postgres.PostgresStore`): several daemons on one database, each task
  worked by one daemon at a time under a lease, every write fenced by the lease's token.

Both keep the same things: task state (with the tool journal and the comment delivery state
inside it), the conversation of the current run and the archived ones. Repository snapshots
and heartbeats stay in the local `state_dir` of each machine.
"""

from bot.store.base import (
    ConversationLog,
    DeliveryMemory,
    IndexView,
    Lease,
    LeaseLost,
    QueuedJob,
    Store,
    StoreIndex,
    Unreadable,
)

__all__ = [
    "ConversationLog",
    "DeliveryMemory",
    "IndexView",
    "Lease",
    "LeaseLost",
    "QueuedJob",
    "Store",
    "StoreIndex",
    "Unreadable",
]
