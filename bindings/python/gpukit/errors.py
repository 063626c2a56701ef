"""Exceptions raised for failed C ABI calls: one class per gk_status code."""
from __future__ import annotations

__all__ = [
    "GpukitError", "Cancelled", "UnknownError", "InvalidArgument", "DeadlineExceeded",
    "NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted",
    "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "InternalError",
    "Unavailable", "DataLoss", "Unauthenticated", "error_for_status",
]


class GpukitError(RuntimeError):
    """A GPUkit call failed. ``status`` is the gk_status code, ``message`` the C message."""

    status = 2
    status_name = "UNKNOWN"

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class Cancelled(GpukitError):
    status, status_name = 1, "CANCELLED"


class UnknownError(GpukitError):
    status, status_name = 2, "UNKNOWN"


class InvalidArgument(GpukitError, ValueError):
    status, status_name = 3, "INVALID_ARGUMENT"


class DeadlineExceeded(GpukitError, TimeoutError):
    status, status_name = 4, "DEADLINE_EXCEEDED"


class NotFound(GpukitError, LookupError):
    status, status_name = 5, "NOT_FOUND"


class AlreadyExists(GpukitError):
    status, status_name = 6, "ALREADY_EXISTS"


class PermissionDenied(GpukitError, PermissionError):
    status, status_name = 7, "PERMISSION_DENIED"


class ResourceExhausted(GpukitError, MemoryError):
    status, status_name = 8, "RESOURCE_EXHAUSTED"


class FailedPrecondition(GpukitError):
    status, status_name = 9, "FAILED_PRECONDITION"


class Aborted(GpukitError):
    status, status_name = 10, "ABORTED"


class OutOfRange(GpukitError, IndexError):
    status, status_name = 11, "OUT_OF_RANGE"


class Unimplemented(GpukitError, NotImplementedError):
    status, status_name = 12, "UNIMPLEMENTED"


class InternalError(GpukitError):
    status, status_name = 13, "INTERNAL"


class Unavailable(GpukitError):
    status, status_name = 14, "UNAVAILABLE"


class DataLoss(GpukitError):
    status, status_name = 15, "DATA_LOSS"


class Unauthenticated(GpukitError):
    status, status_name = 16, "UNAUTHENTICATED"


_BY_STATUS = {cls.status: cls for cls in GpukitError.__subclasses__()}


def error_for_status(status: int, message: str) -> GpukitError:
    cls = _BY_STATUS.get(int(status), GpukitError)
    return cls(message, int(status))
