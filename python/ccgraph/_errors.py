"""Exceptions: one class per exit class of the `ccgraph` tool."""
from __future__ import annotations

from typing import Any, Dict, Optional

from . import _lib


class Error(Exception):
    """A failure of the ccgraph library. `status` is the library's status
    name ("SHAPE", "IO", ...; "" where Python found the fault itself) and
    `message` the library's message (ccg_last_error), which names the file,
    node, op, value or rank at fault."""

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class BadInput(Error):
    """What the caller gave is wrong: a file, a model, a plan, a mesh, an
    input's dtype or shape (statuses PARSE, SHAPE, DTYPE, INVALID_ARG,
    UNSUPPORTED, IO; the tool's exit status 2)."""


class RuntimeFailure(Error):
    """Running failed: communication, a timeout, the backend, memory, or the
    library itself (statuses COMM, TIMEOUT, BACKEND, OOM, INTERNAL; the
    tool's exit status 3)."""


class CheckFailed(Error):
    """A check found a mismatch: verify's ranks disagree (the tool's
    `verify` failure), or a comparison is above its tolerance (exit 4).
    `report` holds what the check found."""

    def __init__(self, message: str, status: str = "",
                 report: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message, status)
        self.report = report or {}


_BAD = {"PARSE", "SHAPE", "DTYPE", "INVALID_ARG", "UNSUPPORTED", "IO"}


def from_status(status: int, message: str) -> Error:
    """The exception for a library status and its message."""
    name = (_lib.STATUS_NAMES[status]
            if 0 <= status < len(_lib.STATUS_NAMES) else "UNKNOWN")
    cls = BadInput if name in _BAD else RuntimeFailure
    return cls(message or name.lower(), name)


def check(status: int, handle: Any = None, prefix: str = "") -> None:
    """Raises the exception for a failed call; its message is the one
    recorded on `handle` (None: the calling thread's context)."""
    if status == 0:
        return
    msg = _lib.text(_lib.lib.ccg_last_error(handle))
    raise from_status(status, prefix + msg)
