"""tf.logging: TensorFlow 1.x's logging names over Python's logging
module (logger "distflow", to stderr), with TF1's levels and
set_verbosity. INFO is shown once a program sets it, as in TF1 (the
default level is WARN)."""
import logging as _logging
import sys as _sys

DEBUG, INFO, WARN, ERROR, FATAL = _logging.DEBUG, _logging.INFO, _logging.WARN, _logging.ERROR, _logging.FATAL



class _StderrHandler(_logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (a test may swap it)."""

    @property
    def stream(self):
        return _sys.stderr

    @stream.setter
    def stream(self, value):
        pass


_logger = _logging.getLogger("distflow")
if not _logger.handlers:
    _handler = _StderrHandler()
    _handler.setFormatter(_logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    _logger.addHandler(_handler)
    _logger.setLevel(WARN)
    _logger.propagate = False


def get_logger():
    return _logger


def set_verbosity(v):
    _logger.setLevel(v)


def get_verbosity():
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs):
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs):
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs):
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs):
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs):
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs):
    _logger.critical(msg, *args, **kwargs)


_counts = {}


def log_every_n(level, msg, n, *args):
    """Logs the 1st, (n+1)th, (2n+1)th, ... call from one place."""
    caller = _sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count % n == 0:
        log(level, msg, *args)


def log_first_n(level, msg, n, *args):
    caller = _sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno, "first")
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count < n:
        log(level, msg, *args)


def log_if(level, msg, condition, *args):
    if condition:
        log(level, msg, *args)


def vlog(level, msg, *args):
    log(level, msg, *args)


def flush():
    for h in _logger.handlers:
        h.flush()
