"""A parameter-server job's traffic, without the model: for measuring the network.

``python -m ringleader.net.emulator ps --port P --workers W --steps S --model-bytes M``
``python -m ringleader.net.emulator worker --ps HOST:P --rank R --steps S ...``

Each step, every worker "computes" (sleeps ``compute_ms``, ±``jitter``), sends
its gradient (``grad_bytes``) to the PS; the PS waits for all of them (the
synchronous barrier), then sends the model (``model_bytes``) to every worker
at once, one thread per worker, so the updates of co-located jobs meet in the
PS host's NIC queue. Workers print one JSON line per step with the time their
update arrived; the PS prints when the job started and ended. Stdlib only, so
a process starts in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import threading
import time

CHUNK = 1 << 16


def _recv_exact(sock: socket.socket, n: int) -> None:
    left = n
    while left:
        got = sock.recv(min(CHUNK, left))
        if not got:
            raise ConnectionError("peer closed the connection")
        left -= len(got)


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(payload)


def _wait_until(t: float) -> None:
    delay = t - time.time()
    if delay > 0:
        time.sleep(delay)


def run_ps(
    port: int,
    workers: int,
    steps: int,
    model_bytes: int,
    grad_bytes: int,
    start_at: float,
    host: str,
) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(workers)
    conns = []
    for _ in range(workers):
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conns.append(conn)
    model = b"m" * model_bytes
    _wait_until(start_at)
    started = time.time()
    for step in range(steps):
        for conn in conns:  # the barrier: every gradient before any update
            _recv_exact(conn, grad_bytes)
        print(
            json.dumps({"role": "ps", "port": port, "step": step, "release": time.time()}),
            flush=True,
        )
        senders = [threading.Thread(target=_send, args=(c, model)) for c in conns]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
    print(
        json.dumps({"role": "ps", "port": port, "start": started, "end": time.time()}), flush=True
    )
    for conn in conns:
        conn.close()


def run_worker(
    ps: str,
    rank: int,
    steps: int,
    model_bytes: int,
    grad_bytes: int,
    compute_ms: float,
    jitter: float,
    start_at: float,
    seed: int,
) -> None:
    host, port = ps.rsplit(":", 1)
    rng = random.Random(seed)
    deadline = time.time() + 30
    while True:
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    grad = b"g" * grad_bytes
    _wait_until(start_at)
    for step in range(steps):
        time.sleep(compute_ms / 1000 * (1 + rng.uniform(-jitter, jitter)))
        sent = time.time()
        sock.sendall(grad)
        _recv_exact(sock, model_bytes)
        record = {"role": "worker", "rank": rank, "step": step, "sent": sent, "t": time.time()}
        print(json.dumps(record), flush=True)
    sock.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=["ps", "worker"])
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--ps", default="127.0.0.1:5000")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--model-bytes", type=int, default=500_000)
    parser.add_argument("--grad-bytes", type=int, default=16_000)
    parser.add_argument("--compute-ms", type=float, default=100.0)
    parser.add_argument("--jitter", type=float, default=0.1)
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args(argv)
    if a.role == "ps":
        run_ps(a.port, a.workers, a.steps, a.model_bytes, a.grad_bytes, a.start_at, a.host)
    else:
        run_worker(
            a.ps,
            a.rank,
            a.steps,
            a.model_bytes,
            a.grad_bytes,
            a.compute_ms,
            a.jitter,
            a.start_at,
            a.seed,
        )


if __name__ == "__main__":
    try:
        main()
    except (ConnectionError, OSError) as err:
        print(f"emulator: {err}", file=sys.stderr)
        sys.exit(1)
