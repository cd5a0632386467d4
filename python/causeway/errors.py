"""Runtime errors as Python exceptions: one class per status code.

Every error the runtime reports is a `causeway.Error` carrying the code
(`.code`, the canonical absl/gRPC number; `.code_name`, e.g.
"INVALID_ARGUMENT") and the runtime's message, which names the program and
op for a failed execution. Some classes are also the builtin exception a
Python programmer would catch: an invalid argument is a `ValueError`, a
deadline a `TimeoutError`, an unimplemented feature a `NotImplementedError`.

An error inside an array (a failed program, a lost host) is raised where the
array's value is used: `numpy.asarray(a)`, `a.block_until_ready()`. The
session goes on.
"""

from __future__ import annotations

from . import _causeway


class Error(Exception):
    """Base class of every runtime error."""

    code: int = 2
    code_name: str = "UNKNOWN"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code_name}: {self.message}"


class CancelledError(Error):
    code, code_name = 1, "CANCELLED"


class UnknownError(Error):
    code, code_name = 2, "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    code, code_name = 3, "INVALID_ARGUMENT"


class DeadlineExceededError(Error, TimeoutError):
    code, code_name = 4, "DEADLINE_EXCEEDED"


class NotFoundError(Error):
    code, code_name = 5, "NOT_FOUND"


class AlreadyExistsError(Error):
    code, code_name = 6, "ALREADY_EXISTS"


class PermissionDeniedError(Error):
    code, code_name = 7, "PERMISSION_DENIED"


class ResourceExhaustedError(Error):
    code, code_name = 8, "RESOURCE_EXHAUSTED"


class FailedPreconditionError(Error):
    code, code_name = 9, "FAILED_PRECONDITION"


class AbortedError(Error):
    code, code_name = 10, "ABORTED"


class OutOfRangeError(Error):
    code, code_name = 11, "OUT_OF_RANGE"


class UnimplementedError(Error, NotImplementedError):
    code, code_name = 12, "UNIMPLEMENTED"


class InternalError(Error):
    code, code_name = 13, "INTERNAL"


class UnavailableError(Error):
    code, code_name = 14, "UNAVAILABLE"


class DataLossError(Error):
    """A host holding part of the data was lost (see causeway.elastic)."""

    code, code_name = 15, "DATA_LOSS"


class UnauthenticatedError(Error):
    code, code_name = 16, "UNAUTHENTICATED"


_BY_CODE = {cls.code: cls for cls in Error.__subclasses__()}


def _from_status(code: int, message: str) -> Error:
    """The exception for a non-OK status (called by the extension)."""
    cls = _BY_CODE.get(code, UnknownError)
    return cls(message)


_causeway._set_error_factory(_from_status)

__all__ = ["Error"] + [cls.__name__ for cls in _BY_CODE.values()]
