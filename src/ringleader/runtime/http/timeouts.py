"""Deadlines for slow and half-sent requests, so idle sockets cannot pile up for ever.

uvicorn's ``timeout_keep_alive`` only runs *between* requests, after a
response: a connection that is opened and left silent, or that sends half of
its headers, or a body shorter than its ``Content-Length``, is held open for
as long as the client likes. Enough of them (a slowloris, or a buggy client
in a retry loop) use up the server's file descriptors and memory, and every
user's next request fails. So:

* **Headers**: from a connection's first moment, and from the first byte of
  each later request on it, the headers must be complete within
  ``HEADERS_S``; else the server answers ``408`` (if anything was sent) and
  closes the connection (``SlowClientProtocol``).
* **Body**: a request's body must arrive within ``BODY_S`` of its headers;
  else the API answers ``408`` with a JSON ``detail`` and closes the
  connection (``BodyDeadline``). The protocol closes any connection still
  sending a body ``BACKSTOP_S`` later (a body the API never read).

Idle connections cost a timer each and nothing else: uvicorn's
``limit_concurrency`` stays unset (it would count idle connections and answer
``503`` to everyone once they are many), and its listen backlog is 2048.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ringleader.runtime.http.asgi import send_json

HEADERS_S = 10.0
"""Seconds a request's headers may take, from the connection's start or its first byte."""
BODY_S = 20.0
"""Seconds a request's body may take after its headers (bodies are 1 MiB at most)."""
BACKSTOP_S = 5.0
"""Extra seconds before the protocol closes a connection whose body never ends."""


def _timeout_reply(detail: str) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class SlowClientProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on every stage a client can stall in.

    After each batch of bytes and each response it looks at what h11 waits
    for from the client: headers (``IDLE``), a body (``SEND_BODY``), or
    nothing. A deadline runs from the moment the wait began, not from the
    last byte, so trickling one byte at a time does not extend it. Between
    requests uvicorn's own keep-alive timer closes the connection.
    """

    _deadline: asyncio.TimerHandle | None = None
    _waiting_for: str | None = None
    headers_s: ClassVar[float] = HEADERS_S
    body_s: ClassVar[float] = BODY_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait("headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._wait(None)
        super().connection_lost(exc)

    def _follow(self) -> None:
        if self.transport.is_closing():
            self._wait(None)
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            # A request not begun yet: between requests uvicorn's keep-alive
            # timer runs; once bytes of the next one came, ours does.
            self._wait(None if self.timeout_keep_alive_task is not None else "headers")
        elif state is h11.SEND_BODY:
            self._wait("body")
        else:
            self._wait(None)

    def _wait(self, what: str | None) -> None:
        if what == self._waiting_for:
            return  # the deadline runs from when the wait began
        if self._deadline is not None:
            self._deadline.cancel()
        self._waiting_for, self._deadline = what, None
        if what is not None:
            seconds = self.headers_s if what == "headers" else self.body_s + BACKSTOP_S
            self._deadline = self.loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._waiting_for == "headers" and self.conn.trailing_data[0]:
            detail = f"the request's headers did not arrive within {self.headers_s:g} s"
            self.transport.write(_timeout_reply(detail))
        self.transport.close()


def with_deadlines(headers_s: float, body_s: float) -> type[SlowClientProtocol]:
    """``SlowClientProtocol`` with these deadlines (uvicorn takes a protocol class)."""
    return type(
        "SlowClientProtocol", (SlowClientProtocol,), {"headers_s": headers_s, "body_s": body_s}
    )


class BodyTimeout(Exception):
    """A request's body did not arrive in time (not an ``OSError``: no handler mistakes it)."""


class BodyDeadline:
    """ASGI middleware: a request's body must arrive within ``seconds`` of its headers.

    Wraps ``receive``: past the deadline the waiting handler is unwound with
    ``BodyTimeout`` and the client gets ``408`` with a JSON ``detail`` and
    ``Connection: close``, instead of a handler parked for ever on a body
    that will never come. Add it last (outermost), so no handler catches it.
    """

    def __init__(self, app: ASGIApp, seconds: float = BODY_S) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        body_done = False
        started = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()  # only a disconnect comes now: no deadline
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise BodyTimeout from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, tracked_send)
        except BodyTimeout:
            if started:
                return  # too late to answer; the protocol closes the connection
            detail = (
                f"the request's body did not arrive within {self.seconds:.0f} s of its "
                "headers (shorter than its Content-Length?)"
            )
            await send_json(send, 408, {"detail": detail}, close=True)
