"""The LSP protocol with the guards pygls 2.1 lacks.

1. A request whose params do not deserialize is answered with InvalidParams. Plain pygls raises while
   decoding the JSON, logs, and never answers, so the client waits forever.
2. A client *response* that does not deserialize (e.g. a malformed ``workspace/applyEdit`` result) fails
   the server's pending request future instead of leaving it unresolved, so a job awaiting it ends.
3. Every message read by :mod:`xpiler_server.framing` is checked as JSON-RPC 2.0 before pygls sees it: a body
   that is not JSON gets ParseError with id null; a value that is not a request, notification or response
   (a batch, a number, no ``"jsonrpc": "2.0"``, a method that is not a string, a notification method sent
   with an id, an id that is neither integer nor string) gets InvalidRequest, with its id where it has one;
   a request after ``shutdown`` gets InvalidRequest (LSP) instead of silence.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.protocol import LanguageServerProtocol
from xpiler_server.framing import Event, Skipped, Unparsable

log = logging.getLogger(__name__)


@dataclass
class MalformedRequest:
    id: Any
    method: str
    error: JsonRpcException
    jsonrpc: str = "2.0"


@dataclass
class MalformedResponse:
    id: Any
    error: JsonRpcException
    jsonrpc: str = "2.0"


class GuardedProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            msg_id = data.get("id") if isinstance(data, dict) else None
            if not isinstance(msg_id, (int, str)):
                raise  # a notification: logged by pygls and dropped, nobody waits for it
            if "method" in data:
                method = str(data.get("method"))
                error = JsonRpcInvalidParams(f"Invalid params for '{method}'")
                return MalformedRequest(msg_id, method, error)
            return MalformedResponse(msg_id, exc if isinstance(exc, JsonRpcException) else JsonRpcInternalError())

    def handle_message(self, message: Any) -> None:
        if isinstance(message, MalformedRequest):
            log.warning("answering request %s (%s) with InvalidParams", message.id, message.method)
            self._send_response(message.id, None, message.error.to_response_error())
            return
        if isinstance(message, MalformedResponse):
            future = self._request_futures.pop(message.id, None)
            self._result_types.pop(message.id, None)
            if future is not None and not future.done():
                future.set_exception(JsonRpcInvalidParams("the client's response did not match the protocol"))
            return
        super().handle_message(message)

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None) -> None:
        """pygls keeps every handler's future by id and removes it only when it answers a request: the futures
        of notification handlers and of the steps of its own generator handlers (didOpen, didChange,
        executeCommand…) stayed forever, one or more per keystroke. Here each goes when it is done."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if future is None:
            return

        def remove(key: Any = msg_id, done: Any = future) -> None:
            if self._request_futures.get(key) is done:
                del self._request_futures[key]

        def remove_later(_done: Any) -> None:
            # on the event loop: a future may finish in a worker thread, or be cancelled by pygls while it
            # iterates over the futures (``shutdown``)
            try:
                loop.call_soon_threadsafe(remove)
            except RuntimeError:
                pass  # the loop is closed: the server has stopped

        future.add_done_callback(remove_later)

    # ------------------------------------------------------------------ messages from the framing layer

    def receive(self, event: Event) -> None:
        """One event of :class:`xpiler_server.framing.FrameDecoder`: answered, handled or logged."""
        if isinstance(event, Skipped):
            log.warning("input skipped: %s", event.reason)
        elif isinstance(event, Unparsable):
            log.warning("answering ParseError: %s", event.reason)
            self.send_error(None, JsonRpcParseError(f"Parse error: {event.reason}"))
        else:
            if event.warning:
                log.warning("broken frame: %s", event.warning)
            self.receive_value(event.value)

    def receive_value(self, value: Any) -> None:
        """A JSON value from the client: checked as JSON-RPC 2.0, then handed to pygls."""
        rejection = self._rejection(value)
        if rejection is not None:
            if not rejection.answer:
                log.warning("dropped a message: %s", rejection.reason)  # nobody waits for an answer to it
                return
            log.warning("answering InvalidRequest (id %r): %s", rejection.msg_id, rejection.reason)
            self.send_error(rejection.msg_id, JsonRpcInvalidRequest(f"Invalid request: {rejection.reason}"))
            return
        try:
            message = self.structure_message(value)
        except JsonRpcException as exc:
            # only notifications get here (a request is answered by structure_message): logged, dropped
            log.warning("dropped a malformed notification %r: %s", value.get("method"), exc)
            return
        self.handle_message(message)

    def _rejection(self, value: Any) -> _Rejection | None:
        """Why ``value`` is not a message this server can handle, or None when it is one."""
        if not isinstance(value, dict):
            kind = "a batch (LSP has none)" if isinstance(value, list) else f"a JSON {type(value).__name__}"
            return _Rejection(f"a message must be a JSON object, not {kind}")
        has_id = "id" in value
        msg_id = value.get("id")
        if "method" not in value:
            if not has_id:
                return _Rejection("neither a method nor an id")
            if value.get("jsonrpc") != "2.0" or not _valid_id(msg_id):
                return _Rejection(f"a malformed response (id {msg_id!r})", answer=False)
            return None  # a response: pygls matches it to its request
        if not has_id:
            answer = False  # a notification: never answered
        elif not _valid_id(msg_id):
            return _Rejection(f"the id {msg_id!r} is neither an integer nor a string")
        else:
            answer = True
        answered_id = msg_id if answer else None
        method = value["method"]
        if value.get("jsonrpc") != "2.0":
            return _Rejection(f"'jsonrpc' must be \"2.0\", not {value.get('jsonrpc')!r}", answer, answered_id)
        if not isinstance(method, str):
            return _Rejection(f"the method {method!r} is not a string", answer, answered_id)
        if answer and _is_notification(method):
            return _Rejection(f"'{method}' is a notification: it takes no id", answer, answered_id)
        if answer and self._shutdown and method != types.EXIT:
            return _Rejection(f"'{method}' after shutdown: the server is shutting down", answer, answered_id)
        return None

    def send_error(self, msg_id: int | str | None, error: JsonRpcException) -> None:
        # sent as plain data: JSON-RPC requires "id": null to be present, and the converter drops None fields
        response = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": error.code, "message": error.message}}
        self._send_data(response)


@dataclass(frozen=True)
class _Rejection:
    reason: str
    answer: bool = True  # False: only logged (a notification or a response: nobody waits for an answer)
    msg_id: int | str | None = None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_notification(method: str) -> bool:
    """A method LSP defines as a notification (its message type has no id)."""
    entry = types.METHOD_TO_TYPES.get(method)
    if entry is None:
        return False
    return "id" not in attrs.fields_dict(entry[0])
