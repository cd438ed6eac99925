"""Errors with TensorFlow's names: each C++ status code is one class, all
subclasses of OpError, carrying the C++ status message unchanged."""
from distflow import _distflow

OpError = _distflow.Error
CancelledError = _distflow.CancelledError
UnknownError = _distflow.UnknownError
InvalidArgumentError = _distflow.InvalidArgumentError
DeadlineExceededError = _distflow.DeadlineExceededError
NotFoundError = _distflow.NotFoundError
AlreadyExistsError = _distflow.AlreadyExistsError
PermissionDeniedError = _distflow.PermissionDeniedError
ResourceExhaustedError = _distflow.ResourceExhaustedError
FailedPreconditionError = _distflow.FailedPreconditionError
AbortedError = _distflow.AbortedError
OutOfRangeError = _distflow.OutOfRangeError
UnimplementedError = _distflow.UnimplementedError
InternalError = _distflow.InternalError
UnavailableError = _distflow.UnavailableError
DataLossError = _distflow.DataLossError
UnauthenticatedError = _distflow.UnauthenticatedError
