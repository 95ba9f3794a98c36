"""Prometheus metrics (optional `metrics.listen`). Names are documented in docs/log-events.md."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class Metrics:
    """One registry per daemon (tests make their own); recording is cheap when unscraped."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry or CollectorRegistry()
        self.registry = r
        self.polls = Counter(
            "bot_polls",
            "Discovery cycles by platform and result",
            ["platform", "result"],
            registry=r,
        )
        self.api_requests = Counter(
            "bot_api_requests",
            "Forge API calls by platform and outcome",
            ["platform", "outcome"],
            registry=r,
        )
        # One series per bucket: GitHub's core, search, ... are separate limits (a search
        # answer says 30 a minute; it must not stand for the core bucket's 5,000 an hour).
        self.rate_limit_remaining = Gauge(
            "bot_rate_limit_remaining",
            "Requests left in the forge's rate-limit window, per bucket",
            ["platform", "bucket"],
            registry=r,
        )
        self.tasks = Gauge("bot_tasks", "Tasks in the state dir by status", ["status"], registry=r)
        self.llm_tokens = Counter(
            "bot_llm_tokens", "LLM tokens used, by kind", ["kind"], registry=r
        )
        # Counted where a model call is recorded (bot/task/turn.py), at `llm.price`; without a
        # price it never moves.
        self.llm_cost = Counter(
            "bot_llm_cost", "What the model's tokens cost, by currency", ["currency"], registry=r
        )
        self.comment_delivery = Histogram(
            "bot_comment_delivery_seconds",
            "From a human comment being written to it being in the model's context",
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
            registry=r,
        )

    def serve(self, listen: str) -> Callable[[], None]:
        """Serve `/metrics` on `listen` (host:port); returns what stops it again."""
        host, _, port = listen.rpartition(":")
        server, thread = start_http_server(
            int(port), addr=host or "127.0.0.1", registry=self.registry
        )

        def close() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        return close
