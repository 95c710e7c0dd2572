"""The LSP protocol with two guards pygls 2.1 lacks.

1. A request whose params do not deserialize is answered with InvalidParams. Plain pygls raises while
   decoding the JSON, logs, and never answers, so the client waits forever.
2. A client *response* that does not deserialize (e.g. a malformed ``workspace/applyEdit`` result) fails
   the server's pending request future instead of leaving it unresolved, so a job awaiting it ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

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
