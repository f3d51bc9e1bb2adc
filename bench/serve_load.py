"""Load test of ``qa-finetune serve`` on loopback: throughput, latency, batching, a soak.

    .venv/bin/python bench/serve_load.py --model outputs/demo \\
        --data ../shared/data/squad-v1.1-dev.json

SQuAD dev questions with their own contexts are sent to a real server process on 127.0.0.1
(nothing else is ever addressed) by 1, 8, 32 and 64 concurrent clients: questions/s, latency
percentiles, errors and the server's RSS. The server runs with its default batch size (the
one it measures on this machine) unless ``--max-batch`` is given, and its default
``--passes`` unless ``--passes`` is given (to both servers). The same requests at 32
clients, then at 1 client, go to it and to a second server with ``--max-batch 1`` (rounds
alternate between the two servers, so machine noise hits both alike), and
``QuestionAnswerer.answer_batch`` answers them offline in this process at several batch
sizes after each 32-client round (each size's rate over all rounds, as the servers' are);
three ratios are printed with their targets: 32 clients vs ``--max-batch 1`` (>= 1.0x), vs
the best offline batch (>= 0.9x), and the 1-client p50 latency vs ``--max-batch 1``
(<= 1.1x). A soak sends ``--soak`` requests at 32 clients, counting 5xx and lost requests and
comparing the RSS after the first and the last 1,000. Finally the answers the service gave
are compared with ``qa-finetune ask --batch`` on the same inputs.

Bounded: a fixed number of requests per phase and ``--time-cap`` seconds in all; a phase that
reaches the cap stops and says so. The clients share the machine with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402

HOST = "127.0.0.1"  # loopback only
# The server's own count of its forward passes, their windows and their time.
PASS_METRICS = ("qa_batch_windows_count", "qa_batch_windows_sum", "qa_forward_duration_seconds_sum")


def load_pairs(path: Path, count: int) -> list[dict[str, str]]:
    """The first ``count`` questions of a SQuAD file, each with its own paragraph."""
    pairs = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                pairs.append({"question": qa["question"], "context": paragraph["context"]})
                if len(pairs) == count:
                    return pairs
    return pairs


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its threads so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Server:
    """One ``qa-finetune serve`` process."""

    model: str
    max_batch: int | None  # None: the server's default (the batch size it measures)
    max_wait_ms: float | None  # None: the server's default (adaptive) wait
    in_flight: int | None = None  # --passes; None: the server's default
    extra: tuple[str, ...] = ()  # more serve flags (e.g. --backend onnx --quantized)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, log: Path) -> None:
        command = [
            sys.executable,
            "-m",
            "qa_finetune.cli.app",
            "serve",
            self.model,
            "--host",
            HOST,
            "--port",
            str(self.port),
            *(["--max-batch", str(self.max_batch)] if self.max_batch is not None else []),
            *(["--max-wait-ms", str(self.max_wait_ms)] if self.max_wait_ms is not None else []),
            *(["--passes", str(self.in_flight)] if self.in_flight is not None else []),
            "--no-access-log",
            *self.extra,
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with log.open("wb") as handle:
            self.process = subprocess.Popen(command, env=env, stdout=handle, stderr=handle)

    def wait_ready(self, seconds: float = 300) -> None:
        assert self.process is not None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server on port {self.port} exited {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("server not ready in time")

    def rss(self) -> float:
        assert self.process is not None
        return rss_mib(self.process.pid)

    def cpu(self) -> float:
        assert self.process is not None
        return cpu_seconds(self.process.pid)

    def passes(self) -> tuple[float, float, float]:
        """Forward passes so far, from ``/metrics``: (passes, windows, seconds in passes)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        values = {
            sample.name: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        return tuple(values.get(name, 0.0) for name in PASS_METRICS)  # type: ignore[return-value]

    def stop(self) -> int:
        """SIGTERM, then the exit status (0 when it drained and stopped cleanly)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)


@dataclass
class Phase:
    """What one burst of requests measured."""

    name: str
    clients: int
    sent: int = 0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    lost: int = 0  # no HTTP response at all (connection error, timeout)
    seconds: float = 0.0
    capped: bool = False
    rss_before: float = 0.0
    rss_after: float = 0.0
    answers: dict[int, Any] = field(default_factory=dict)
    server_cpu: float = 0.0  # CPU seconds the server used during the phase
    client_cpu: float = 0.0  # CPU seconds this process (the clients) used
    passes: tuple[float, float, float] = (0.0, 0.0, 0.0)  # as Server.passes, in the phase

    @property
    def ok(self) -> int:
        return self.statuses.get(200, 0)

    @property
    def errors(self) -> int:
        return self.sent - self.ok

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] * 1000

    def row(self) -> str:
        throughput = self.ok / self.seconds if self.seconds else 0.0
        cap = " (time cap)" if self.capped else ""
        return (
            f"| {self.name}{cap} | {self.clients} | {self.sent} | {throughput:.1f} | "
            f"{self.percentile(50):.0f} | {self.percentile(95):.0f} | {self.percentile(99):.0f} | "
            f"{self.errors} | {self.rss_before:.0f} -> {self.rss_after:.0f} |"
        )


async def post(
    http: aiohttp.ClientSession, url: str, payload: dict[str, str]
) -> tuple[int | None, bytes]:
    """POST ``payload`` as JSON: (status, body), or (None, b"") when no response came."""
    try:
        async with http.post(url, json=payload) as response:
            return response.status, await response.read()
    except (TimeoutError, aiohttp.ClientError):
        return None, b""


async def run_phase(
    server: Server,
    phase: Phase,
    pairs: list[dict[str, str]],
    count: int,
    deadline: float,
    keep_answers: bool = False,
    rss_every: int = 0,
    rss_samples: list[tuple[int, float]] | None = None,
) -> Phase:
    """``count`` requests from ``phase.clients`` concurrent clients, pairs taken in order."""
    phase.rss_before = server.rss()
    passes_before = server.passes()
    cpu_before = server.cpu(), time.process_time()
    next_index = done = 0

    async def client(http: aiohttp.ClientSession) -> None:
        nonlocal next_index, done
        while next_index < count:
            if time.monotonic() > deadline:
                phase.capped = True
                return
            index = next_index
            next_index += 1
            pair = pairs[index % len(pairs)]
            began = time.perf_counter()
            phase.sent += 1
            status, body = await post(http, f"{server.url}/v1/answer", pair)
            done += 1
            if rss_every and rss_samples is not None and done % rss_every == 0:
                rss_samples.append((done, server.rss()))
            if status is None:
                phase.lost += 1
                continue
            phase.statuses[status] = phase.statuses.get(status, 0) + 1
            if status == 200:
                phase.latencies.append(time.perf_counter() - began)
                if keep_answers:
                    phase.answers[index] = json.loads(body)["answers"][0]

    began = time.perf_counter()
    # aiohttp rather than httpx for the load: on loopback its client used 0.35 ms of CPU per
    # request against httpx's 5 ms (AMD EPYC), and the clients share the server's cores here
    # while on a real deployment they are elsewhere.
    connector = aiohttp.TCPConnector(limit=phase.clients)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        await asyncio.gather(*(client(http) for _ in range(phase.clients)))
    phase.seconds = time.perf_counter() - began
    phase.rss_after = server.rss()
    phase.server_cpu = server.cpu() - cpu_before[0]
    phase.client_cpu = time.process_time() - cpu_before[1]
    phase.passes = tuple(b - a for a, b in zip(passes_before, server.passes(), strict=True))  # type: ignore[assignment]
    return phase


def compare_with_ask(model: str, pairs: list[dict[str, str]], answers: dict[int, Any]) -> str:
    """Run ``qa-finetune ask --batch`` on the same inputs; count span and score differences."""
    with tempfile.TemporaryDirectory() as folder:
        batch, output = Path(folder) / "in.jsonl", Path(folder) / "out.jsonl"
        indices = sorted(answers)
        with batch.open("w", encoding="utf-8") as handle:
            for i in indices:
                handle.write(json.dumps({**pairs[i], "id": str(i)}) + "\n")
        command = [sys.executable, "-m", "qa_finetune.cli.app", "ask", "--model", model]
        subprocess.run(
            [*command, "--batch", str(batch), "--output", str(output)],
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
        )
        asked = {int(r["id"]): r for r in map(json.loads, output.read_text().splitlines())}
    spans = sum(
        (answers[i]["answer"], answers[i]["start"], answers[i]["end"])
        != (asked[i]["answer"], asked[i]["start"], asked[i]["end"])
        for i in indices
    )
    score = max(abs(answers[i]["score"] - asked[i]["score"]) for i in indices)
    return (
        f"answers vs `qa-finetune ask --batch` on {len(indices)} questions: "
        f"{spans} spans differ, largest score difference {score:.2e}"
    )


HEADER = (
    "| phase | clients | requests | questions/s | p50 ms | p95 ms | p99 ms | errors | "
    "server RSS MiB |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
)


def batch_name(max_batch: int | None) -> str:
    return "default (measured)" if max_batch is None else f"max-batch {max_batch}"


def chosen_batch(log: Path) -> str:
    """The ``--max-batch`` and ``--passes`` a server logged at start-up, or "?"."""
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if "serving with --max-batch" in line:
            return line.split("serving with ", 1)[1].strip()
    return "?"


async def alternate(
    args: argparse.Namespace,
    servers: tuple[Server, Server],
    pairs: list[dict[str, str]],
    clients: int,
    deadline: float,
    between: Callable[[], None] | None = None,
) -> tuple[list[Phase], list[Phase]]:
    """``args.rounds`` rounds of the same requests to each server in turn; ``between`` runs
    after each round (the offline passes, so they see the same drift of the machine)."""
    phases: tuple[list[Phase], list[Phase]] = ([], [])
    for round_number in range(args.rounds):
        for server, kept in zip(servers, phases, strict=True):
            name = f"{batch_name(server.max_batch)}, round {round_number + 1}"
            phase = await run_phase(server, Phase(name, clients), pairs, args.requests, deadline)
            kept.append(phase)
            print(phase.row(), flush=True)
        if between is not None:
            between()
    return phases


def throughput(phases: list[Phase]) -> float:
    """Questions per second over all the phases together."""
    seconds = sum(p.seconds for p in phases)
    return sum(p.ok for p in phases) / seconds if seconds else float("nan")


def cpu_per_question(phases: list[Phase]) -> tuple[float, float]:
    """Milliseconds of CPU per answered question: the server's, the clients'."""
    answered = sum(p.ok for p in phases) or 1
    server = sum(p.server_cpu for p in phases)
    return server / answered * 1000, sum(p.client_cpu for p in phases) / answered * 1000


def pass_line(name: str, phases: list[Phase]) -> str:
    """Windows per forward pass and how many passes ran on average over the phases' time:
    up to ``--passes``; the rest of the time the model waited (requests windowed, answers
    decoded, HTTP)."""
    count, windows, busy = (sum(p.passes[i] for p in phases) for i in range(3))
    seconds = sum(p.seconds for p in phases)
    if not count or not seconds:
        return f"{name}: no forward passes counted"
    return (
        f"{name}: {windows / count:.1f} windows per pass, {busy / count * 1000:.0f} ms each, "
        f"{busy / seconds:.2f} passes running on average"
    )


class Offline:
    """``QuestionAnswerer.answer_batch`` over all the questions at once, in this process, at
    several batch sizes: one pass per size each time it is called (while the servers idle).

    Called once per round between the servers' rounds, and each size's rate taken over all
    its rounds, as the servers' are: the best size of single passes would be the luckiest
    of several noisy figures (on a shared machine the same pass moves 10-25%), a yardstick
    biased upwards."""

    def __init__(self, model: str, pairs: list[dict[str, str]], sizes: list[int]) -> None:
        from qa_finetune.inference.answerer import QuestionAnswerer

        self.answerer = QuestionAnswerer.load(model, batch_size=1)
        self.questions = [(p["question"], p["context"]) for p in pairs]
        self.sizes = sizes
        # per size: (wall seconds, CPU seconds) of each pass
        self.passes: dict[int, list[tuple[float, float]]] = {size: [] for size in sizes}
        head = self.answerer.windows(*zip(*self.questions[:4], strict=True))
        self.answerer.predict_windows(head.encoding, True)  # trace the graph outside the timing

    def run_round(self) -> None:
        for size in self.sizes:
            self.answerer.settings = replace(self.answerer.settings, batch_size=size)
            began, cpu = time.perf_counter(), time.process_time()
            self.answerer.answer_batch(self.questions)
            self.passes[size].append((time.perf_counter() - began, time.process_time() - cpu))
        print(
            "offline round, questions/s by batch size: "
            + ", ".join(f"{size}: {self.rate(size, -1):.1f}" for size in self.sizes),
            flush=True,
        )

    def rate(self, size: int, last: int | None = None) -> float:
        """Questions per second at ``size``: over every round, or of round ``last`` alone."""
        kept = self.passes[size] if last is None else [self.passes[size][last]]
        return len(self.questions) * len(kept) / sum(wall for wall, _ in kept)

    def cpu_ms(self, size: int) -> float:
        """CPU milliseconds per question at ``size``, over every round."""
        kept = self.passes[size]
        return sum(cpu for _, cpu in kept) / (len(self.questions) * len(kept)) * 1000


async def batching_check(
    args: argparse.Namespace, servers: tuple[Server, Server], pairs: list[dict[str, str]]
) -> None:
    """The three targets: 32 clients vs --max-batch 1, vs the best offline batch, and the
    1-client p50 latency vs --max-batch 1."""
    deadline = time.monotonic() + args.time_cap
    used = pairs[: args.requests]
    offline = Offline(args.model, used, args.offline_sizes)
    print(f"\n{HEADER}")
    busy = await alternate(args, servers, used, 32, deadline, between=offline.run_round)
    idle = await alternate(args, servers, used, 1, deadline)
    rates = {size: offline.rate(size) for size in offline.sizes}
    best_size = max(rates, key=rates.__getitem__)
    default_qps, single_qps = throughput(busy[0]), throughput(busy[1])
    p50 = [statistics.median(q for p in phases for q in p.latencies) * 1000 for phases in idle]
    print(
        f"\noffline answer_batch, questions/s by batch size over {args.rounds} rounds: "
        + ", ".join(f"{size}: {speed:.1f}" for size, speed in rates.items())
    )
    print(
        f"32 clients: default server {default_qps:.1f} q/s, --max-batch 1 {single_qps:.1f} q/s: "
        f"{default_qps / single_qps:.2f}x (target >= 1.0x)"
    )
    print(
        f"32 clients vs the best offline batch ({best_size}: {rates[best_size]:.1f} q/s): "
        f"{default_qps / rates[best_size]:.2f}x (target >= 0.9x)"
    )
    print(
        f"1 client p50: default server {p50[0]:.0f} ms, --max-batch 1 {p50[1]:.0f} ms: "
        f"{p50[0] / p50[1]:.2f}x (target <= 1.1x)"
    )
    print(
        "passes at 32 clients: "
        + "; ".join(
            pass_line(batch_name(server.max_batch), phases)
            for server, phases in zip(servers, busy, strict=True)
        )
    )
    server_ms, client_ms = cpu_per_question(busy[0])
    print(
        f"CPU per question at 32 clients: default server {server_ms:.0f} ms, the clients "
        f"{client_ms:.0f} ms; offline at batch {best_size}: {offline.cpu_ms(best_size):.0f} ms "
        f"({os.cpu_count()} cores shared by all)"
    )


async def main_async(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.time_cap
    pairs = load_pairs(Path(args.data), args.questions)
    logs = Path(tempfile.mkdtemp(prefix="serve-load-"))
    batched = Server(args.model, args.max_batch, args.max_wait_ms, args.passes)
    single = Server(args.model, 1, args.max_wait_ms, args.passes)
    batched.start(logs / "batched.log")
    try:
        # One at a time: the default server may time its forward passes at start-up (its batch
        # size), which another server loading beside it would make slower and noisier.
        batched.wait_ready(args.ready_timeout)
        single.start(logs / "single.log")
        kept = await measure_servers(args, (batched, single), pairs, logs, deadline)
    finally:
        for server in (batched, single):  # a failed phase leaves no server behind
            if server.process is not None and server.process.poll() is None:
                server.process.kill()
    if args.check and kept:
        first = dict(sorted(kept.items())[: args.check])
        print(compare_with_ask(args.model, pairs, first))


async def measure_servers(
    args: argparse.Namespace,
    servers: tuple[Server, Server],
    pairs: list[dict[str, str]],
    logs: Path,
    deadline: float,
) -> dict[int, Any]:
    """Every phase against the two running servers, then SIGTERM to both; the answers of
    the first phases, by question."""
    batched, single = servers
    batched.wait_ready(args.ready_timeout)
    single.wait_ready(args.ready_timeout)
    print(machine_line())
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"model {args.model}; {len(pairs)} SQuAD dev questions; server logs in {logs}")
    print(
        f"server RSS after warm-up: {batched.rss():.0f} MiB ({batch_name(args.max_batch)}: "
        f"{chosen_batch(logs / 'batched.log')})\n"
    )
    print(HEADER)
    kept: dict[int, Any] = {}
    for clients in args.levels:
        phase = Phase(batch_name(args.max_batch), clients)
        await run_phase(batched, phase, pairs, args.requests, deadline, keep_answers=True)
        kept.update(phase.answers)
        print(phase.row(), flush=True)
    if args.rounds:
        await batching_check(args, servers, pairs)
    if args.soak:
        await soak(batched, pairs, args.soak, deadline)
    codes = batched.stop(), single.stop()
    print(f"servers stopped with SIGTERM: exit {codes[0]} and {codes[1]}")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return kept


async def soak(server: Server, pairs: list[dict[str, str]], count: int, deadline: float) -> None:
    """``count`` requests at 32 clients: 5xx, lost requests and the RSS every 1,000."""
    samples: list[tuple[int, float]] = []
    phase = Phase("soak", 32)
    await run_phase(server, phase, pairs, count, deadline, rss_every=1000, rss_samples=samples)
    print(f"\n{HEADER}\n{phase.row()}")
    five_xx = sum(n for status, n in phase.statuses.items() if status >= 500)
    print(
        f"soak: {phase.sent} sent, {phase.ok} ok, {five_xx} 5xx, {phase.lost} lost, statuses "
        f"{dict(sorted(phase.statuses.items()))}; RSS every 1,000: "
        + ", ".join(f"{n}: {rss:.0f}" for n, rss in samples)
    )
    if len(samples) >= 2:
        growth = (samples[-1][1] - samples[0][1]) / samples[0][1] * 100
        print(f"RSS growth between the first and the last 1,000 requests: {growth:+.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Run dir or model folder to serve.")
    parser.add_argument("--data", required=True, help="SQuAD v1.1 dev JSON.")
    parser.add_argument("--questions", type=int, default=2000, help="Distinct questions used.")
    parser.add_argument(
        "--levels",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 8, 32, 64],
        help="Concurrent clients per phase.",
    )
    parser.add_argument("--requests", type=int, default=256, help="Requests per phase.")
    parser.add_argument(
        "--rounds", type=int, default=2, help="Default / --max-batch 1 rounds (32 and 1 client)."
    )
    parser.add_argument("--soak", type=int, default=5000, help="Requests in the soak (0: none).")
    parser.add_argument("--check", type=int, default=300, help="Answers compared with ask.")
    parser.add_argument(
        "--max-batch", type=int, default=None, help="Default: the server's own (measured)."
    )
    parser.add_argument(
        "--offline-sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 2, 4, 8, 16, 64],
        help="Batch sizes of the offline answer_batch comparison.",
    )
    parser.add_argument(
        "--max-wait-ms", type=float, default=None, help="default: the server's own (adaptive)"
    )
    parser.add_argument(
        "--passes", type=int, default=None, help="Both servers' --passes (default: their own)."
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=900, help="Seconds for a server to load."
    )
    parser.add_argument("--time-cap", type=float, default=1500, help="Seconds for all phases.")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
