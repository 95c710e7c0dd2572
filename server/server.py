"""The Xpiler language server: documents, diagnostics, code actions, jobs and hover over the core API.

No translation logic lives here: every analysis, translation, pass, verification and tuning step is a call
into ``xpiler_core`` through :mod:`xpiler_server.core_api`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, TypeVar

import attrs
from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcException, JsonRpcInternalError
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from xpiler_server.config import SECTION, XpilerConfig
from xpiler_server.documents import Analysis, Document, DocumentStore
from xpiler_server.framing import READ_CHUNK, Event, ThreadedReader, read_frames
from xpiler_server.jobs import JobManager
from xpiler_server.lsp_diagnostics import to_lsp
from xpiler_server.positions import shift_range
from xpiler_server.protocol import GuardedProtocol

from xpiler_core import __version__
from xpiler_core import api as core_api

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

TCP_WARNING = (
    "xpiler serve --tcp: the port has no authentication. Any process on this machine can connect and run "
    "translations, verifications and tuning (which compile and run code) as you. Use it for debugging only; "
    "editors should start the server over stdio."
)
# Tasks still pending when the server stops get this long to finish their cancellation.
STOP_GRACE_S = 0.5

# Edits must pause this long before target diagnostics (a pass run) are recomputed.
TARGET_DIAGNOSTICS_IDLE_S = 0.3

COMMANDS = (
    "xpiler.translate",
    "xpiler.runPass",
    "xpiler.verify",
    "xpiler.cancel",
    "xpiler.showManifest",
    "xpiler.tune",
    "xpiler.createSpec",
)


def guarded(name: str) -> Callable[[F], F]:
    """Log a handler's unexpected exception with its traceback and answer with a one-line error.

    pygls would answer too, but with the traceback in the error data; users get ``xpiler: <what>: <why>``.
    """

    def decorate(handler: F) -> F:
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await handler(*args, **kwargs)
                except JsonRpcException:
                    raise
                except Exception as exc:
                    log.exception("handler %s failed", name)
                    raise JsonRpcInternalError(f"xpiler: {name} failed: {exc}") from None

            return run_async  # type: ignore[return-value]

        @functools.wraps(handler)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return handler(*args, **kwargs)
            except JsonRpcException:
                raise
            except Exception as exc:
                log.exception("handler %s failed", name)
                raise JsonRpcInternalError(f"xpiler: {name} failed: {exc}") from None

        return run  # type: ignore[return-value]

    return decorate


class XpilerServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("xpiler", __version__, protocol_cls=GuardedProtocol, max_workers=4)
        self.config = XpilerConfig()
        # initializationOptions: the base every later settings read is applied to (a settings read is the
        # client's whole current view, so a key that disappeared goes back to this base, not stays stale).
        self.initialization_options: Any = None
        self.documents = DocumentStore()
        self.jobs = JobManager(self)
        # One analysis thread: analyses of a document replay edits in order; the parse holds the GIL anyway.
        self.analysis_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xpiler-analysis")
        self._debounce: dict[str, asyncio.TimerHandle] = {}
        self._target_debounce: dict[str, asyncio.TimerHandle] = {}
        # Target diagnostics (warp hazards…) cost a pass run (~40 ms per 1,000 lines), so they are recomputed
        # when edits pause and carried along with the edits in between. uri → diagnostics, version computed.
        self.target_diagnostics: dict[str, list[types.Diagnostic]] = {}
        self._target_version: dict[str, int] = {}
        # uri → job kind → (version, diagnostics) from the last verification/translation; shown for that version only.
        self.job_diagnostics: dict[str, dict[str, tuple[int, list[types.Diagnostic]]]] = {}
        # uri → the last TranslationResult (for manifests and hover).
        self.translations: dict[str, Any] = {}
        # Quick-fix providers (the SMT repair room plugs in here): (document, lsp diagnostic) → actions.
        self.quick_fix_providers: list[Callable[[Document, types.Diagnostic], list[types.CodeAction]]] = []
        # The process's exit code: 0 after shutdown + exit (or when the input closes), 1 for exit alone (LSP).
        self.exit_code = 0

    # ------------------------------------------------------------------ transports
    # pygls' own read loop hangs forever on one frame with a wrong Content-Length (see framing.py); these
    # replace it for stdio and TCP.

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve over stdin/stdout until ``exit`` or the end of the input."""
        log.info("Starting IO server")
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = ThreadedReader(stdin or sys.stdin.buffer)
        self._run(read_frames(reader.read, self.receive_event, self._stop_event))

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one client on ``host:port`` (serve() keeps it on 127.0.0.1); there is no authentication."""
        print(f"WARNING: {TCP_WARNING}", file=sys.stderr, flush=True)
        log.info("Starting TCP server on %s:%s", host, port)
        stop = self._stop_event = threading.Event()

        async def serve_one_client() -> str:
            finished: asyncio.Future[str] = asyncio.get_running_loop().create_future()

            async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                if finished.done() or getattr(self.protocol, "writer", None) is not None:
                    log.warning("refused a second connection from %s", writer.get_extra_info("peername"))
                    writer.close()
                    return
                log.info("client connected from %s", writer.get_extra_info("peername"))
                self.protocol.set_writer(writer)
                try:
                    reason = await read_frames(lambda: reader.read(READ_CHUNK), self.receive_event, stop)
                finally:
                    if not finished.done():
                        finished.set_result("the client disconnected")
                log.info("connection ended: %s", reason)

            server = await asyncio.start_server(connection, host, port)
            addresses = ", ".join(str(sock.getsockname()) for sock in server.sockets)
            log.info("Serving on %s", addresses)
            async with server:
                return await finished

        self._run(serve_one_client())

    def receive_event(self, event: Event) -> None:
        """One event of the frame decoder. ``exit`` raises SystemExit through here, which ends the loop."""
        try:
            self.protocol.receive(event)  # type: ignore[attr-defined]  # GuardedProtocol
        except Exception as exc:
            log.exception("handling a message failed")
            self._report_server_error(exc, JsonRpcInternalError)

    def _run(self, main: Coroutine[Any, Any, str]) -> None:
        """Run the read loop to its end (input closed, ``exit``), then stop everything without waiting for
        worker threads: a job blocked in a compiler must not keep the process alive after ``exit``."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            reason = loop.run_until_complete(main)
            log.info("Stopping: %s", reason)
        except SystemExit as exc:
            self.exit_code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
            log.info("Stopping: exit (code %s)", self.exit_code)
        except BrokenPipeError:
            log.error("Connection to the client is lost! Shutting down the server.")
        except KeyboardInterrupt:
            log.info("Stopping: interrupted")
        finally:
            self.shutdown()
            try:
                pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.wait(pending, timeout=STOP_GRACE_S))
            except BaseException:
                log.debug("cancelling pending tasks failed", exc_info=True)
            finally:
                loop.close()  # does not wait for the default executor's threads

    # ------------------------------------------------------------------ helpers

    def shutdown(self) -> None:
        """Also on a lost connection: stop the jobs so their threads do not keep the process alive."""
        self.jobs.cancel()
        self.jobs.executor.shutdown(wait=False, cancel_futures=True)
        self.analysis_executor.shutdown(wait=False, cancel_futures=True)
        if self._thread_pool is not None:
            # pygls would wait for its handler threads; nothing they do is worth keeping the process alive
            self._thread_pool.shutdown(wait=False, cancel_futures=True)
            self._thread_pool = None
        super().shutdown()

    def workspace_root(self, path: str) -> str | None:
        """The workspace folder holding ``path`` (the deepest one), or None."""
        from pygls.uris import to_fs_path

        try:
            folders = list(self.workspace.folders.values())
        except RuntimeError:
            return None
        roots = [to_fs_path(f.uri) or "" for f in folders]
        inside = [r for r in roots if r and (path == r or path.startswith(r.rstrip("/") + "/"))]
        return max(inside, key=len) if inside else None

    @property
    def encoding(self) -> str:
        try:
            return str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)
        except RuntimeError:
            return types.PositionEncodingKind.Utf16

    async def analysis_of(self, doc: Document) -> Analysis:
        """The analysis of the document's current version (computed now if the debounced one is behind)."""
        current = doc.analysis
        if current is not None and current.version == doc.version and not doc.pending and not doc.full_reparse:
            return current
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.analysis_executor, doc.analyze)

    def log_to_client(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:
            log.debug("could not send log message", exc_info=True)

    def report_server_error(self, error: Exception, source: Any) -> None:
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        if source is FeatureRequestError:
            return  # the request's own error response already says it
        # Out-of-band errors (a notification handler raised, a message did not parse): the log, not a pop-up.
        self.log_to_client(f"xpiler: internal error: {error}", types.MessageType.Error)

    # ------------------------------------------------------------------ diagnostics

    def schedule_diagnostics(self, uri: str, delay_s: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        previous = self._debounce.pop(uri, None)
        if previous is not None:
            previous.cancel()
        delay = self.config.debounce_ms / 1000 if delay_s is None else delay_s
        self._debounce[uri] = loop.call_later(delay, lambda: asyncio.ensure_future(self.publish_diagnostics(uri)))

    def schedule_target_diagnostics(self, uri: str, delay_s: float = TARGET_DIAGNOSTICS_IDLE_S) -> None:
        loop = asyncio.get_running_loop()
        previous = self._target_debounce.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self._target_debounce[uri] = loop.call_later(
            delay_s, lambda: asyncio.ensure_future(self.refresh_target_diagnostics(uri))
        )

    def track_edits(self, uri: str, changes: list[Any]) -> None:
        """Move the carried target diagnostics along with an edit (before the text itself changes)."""
        carried = self.target_diagnostics.get(uri)
        if carried is None:
            return
        encoding = self.encoding
        kept = carried
        for change in changes:
            rng = getattr(change, "range", None)
            if rng is None:
                kept = []
                break
            moved = []
            for diagnostic in kept:
                new_range = shift_range(diagnostic.range, rng, change.text, encoding)
                if new_range is not None:
                    moved.append(attrs.evolve(diagnostic, range=new_range))
            kept = moved
        self.target_diagnostics[uri] = kept

    async def publish_diagnostics(self, uri: str) -> None:
        """Phase 1 (every edit, debounced): syntax + model diagnostics of this version, plus the target
        diagnostics of an earlier version moved along with the edits until phase 2 recomputes them."""
        self._debounce.pop(uri, None)
        doc = self.documents.get(uri)
        if doc is None:
            return
        try:
            analysis = await self.analysis_of(doc)
        except Exception:
            log.exception("analysis of %s failed", uri)
            return
        if self.documents.get(uri) is not doc or doc.version != analysis.version:
            return  # a newer version is on its way; its own run publishes
        self._publish(doc, analysis)

    async def refresh_target_diagnostics(self, uri: str) -> None:
        """Phase 2 (once edits pause): warp-size hazards and unsupported constructs for the target."""
        self._target_debounce.pop(uri, None)
        doc = self.documents.get(uri)
        if doc is None:
            return
        try:
            analysis = await self.analysis_of(doc)
            loop = asyncio.get_running_loop()
            found = await loop.run_in_executor(self.analysis_executor, self._target_diagnostics, analysis)
        except Exception:
            log.exception("target diagnostics of %s failed", uri)
            return
        if self.documents.get(uri) is not doc or doc.version != analysis.version:
            return
        self.target_diagnostics[uri] = [to_lsp(d, analysis.lines, self.encoding, analysis.version) for d in found]
        self._target_version[uri] = analysis.version
        self._publish(doc, analysis)

    def _publish(self, doc: Document, analysis: Analysis) -> None:
        encoding = self.encoding
        items = [to_lsp(d, analysis.lines, encoding, analysis.version) for d in analysis.diagnostics]
        items.extend(self.target_diagnostics.get(doc.uri, []))
        for job_version, job_items in self.job_diagnostics.get(doc.uri, {}).values():
            if job_version == analysis.version:
                items.extend(job_items)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=doc.uri, diagnostics=items, version=analysis.version)
        )

    def _target_diagnostics(self, analysis: Analysis) -> list[Any]:
        if analysis.parsed is None:
            return []
        target = self.config.target_dialect
        if target is analysis.parsed.dialect:
            return []
        return core_api.target_diagnostics(
            analysis.parsed, analysis.model, target, self.config.warp_size_for(target)
        )

    def forget(self, uri: str) -> None:
        for timers in (self._debounce, self._target_debounce):
            timer = timers.pop(uri, None)
            if timer is not None:
                timer.cancel()
        self.job_diagnostics.pop(uri, None)
        self.target_diagnostics.pop(uri, None)
        self._target_version.pop(uri, None)

    async def set_job_diagnostics(self, uri: str, kind: str, version: int, diagnostics: list[types.Diagnostic]) -> None:
        """Store a job's diagnostics for ``version`` and publish now, before the job reports it finished."""
        self.job_diagnostics.setdefault(uri, {})[kind] = (version, diagnostics)
        await self.publish_diagnostics(uri)

    # ------------------------------------------------------------------ configuration

    def apply_settings(self, settings: Any) -> None:
        self.config = XpilerConfig().merged(self.initialization_options).merged(settings)

    def apply_environment(self) -> None:
        """Settings the core reads from the environment: compiler locations and the LLM endpoint."""
        if self.config.llm_enabled and self.config.llm_endpoint:
            core_api.use_llm(self.config.llm_endpoint, self.config.llm_model, self.config.llm_api_key_env)
        if not self.config.toolchains:
            return
        for problem in core_api.use_toolchains(self.config.toolchains):
            self.log_to_client(f"xpiler: {problem}", types.MessageType.Warning)

    async def refresh_configuration(self) -> None:
        """Re-read the ``xpiler`` settings from the client (when it offers them) and apply them."""
        caps = self.client_capabilities
        if getattr(getattr(caps, "workspace", None), "configuration", False):
            try:
                values = await asyncio.wait_for(
                    self.workspace_configuration_async(
                        types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                    ),
                    timeout=5,
                )
                if values:
                    self.apply_settings(values[0])
            except Exception:
                log.warning("workspace/configuration failed; keeping current settings", exc_info=True)
        self.apply_environment()
        for doc in self.documents:
            self._target_version.pop(doc.uri, None)
            self.schedule_target_diagnostics(doc.uri, 0)


def create_server() -> XpilerServer:
    """A server with every feature registered."""
    from xpiler_server import features

    server = XpilerServer()
    features.register(server)
    return server
