"""Prometheus metrics of the answering service, in a registry of its own per app."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Seconds: from a cache-warm short answer (ms) to a long context under load (tens of s).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class ServeMetrics:
    """Requests by route and status, latency, forward-pass sizes and the queue depth."""

    def __init__(
        self, queue_depth: Callable[[], float], skipped: Callable[[], float] = lambda: 0
    ) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "qa_requests",
            "HTTP requests answered, by route and status code.",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "qa_request_duration_seconds",
            "Time from request to response, by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_windows = Histogram(
            "qa_batch_windows",
            "Windows per model forward pass.",
            buckets=SIZE_BUCKETS,
            registry=self.registry,
        )
        self.batch_requests = Histogram(
            "qa_batch_requests",
            "Requests sharing one model forward pass.",
            buckets=SIZE_BUCKETS,
            registry=self.registry,
        )
        self.forward_seconds = Histogram(
            "qa_forward_duration_seconds",
            "Time of one model forward pass.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "qa_requests_in_flight", "Requests being answered now.", registry=self.registry
        )
        depth = Gauge(
            "qa_queue_depth",
            "Requests waiting for a forward pass.",
            registry=self.registry,
        )
        depth.set_function(queue_depth)
        dropped = Gauge(
            "qa_skipped_windows",
            "Windows never run because their request was cancelled (client gone, deadline).",
            registry=self.registry,
        )
        dropped.set_function(skipped)

    def observe_batch(self, windows: int, requests: int, seconds: float) -> None:
        """The micro-batcher's hook, called after every forward pass."""
        self.batch_windows.observe(windows)
        self.batch_requests.observe(requests)
        self.forward_seconds.observe(seconds)

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, status=str(status)).inc()
        self.latency.labels(route=route).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
