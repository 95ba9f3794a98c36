"""One error hierarchy for both forges, raised by the adapters with `raise ... from exc`."""

from __future__ import annotations


class ForgeError(Exception):
    """Any failed forge operation. Messages never contain tokens."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.operation: str | None = None  # set by `RequestPolicy`: which call failed


class AuthError(ForgeError):
    """The token is missing, invalid or lacks a scope: retrying will not help."""


class Forbidden(ForgeError):
    """A 403 that is not a rate limit: archived repository, protected branch, missing role.
    The token itself works (that would be `AuthError`); this one action is refused."""


class EmptyRepository(ForgeError):
    """The repository has no commit yet: there is nothing to work on."""


class NotFound(ForgeError):
    """The repository, thread, comment or file does not exist (or is hidden from the token)."""


class TransientError(ForgeError):
    """A 5xx, timeout or connection reset: safe to retry later."""


# A rate limit that holds every request to the host, whatever its bucket.
ALL_BUCKETS = "*"


class RateLimited(ForgeError):
    """The forge asked us to wait `retry_after` seconds before the next request in `bucket`
    (the limit the forge named: GitHub's `x-ratelimit-resource` such as core or search;
    `ALL_BUCKETS` for one that holds every request; None when the forge named none, which
    holds the bucket of the request that was refused)."""

    def __init__(
        self,
        message: str,
        retry_after: float,
        status: int | None = None,
        bucket: str | None = None,
    ) -> None:
        super().__init__(message, status)
        self.retry_after = max(0.0, retry_after)
        self.bucket = bucket


class BranchMoved(ForgeError):
    """A commit was refused because the branch (or a file it changes) moved since it was read:
    someone pushed meanwhile. Read the branch again; never force."""
