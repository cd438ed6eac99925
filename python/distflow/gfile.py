"""tf.gfile: TensorFlow 1.x's file API over the local file system (the
only file system distflow reads). Errors are tf.errors classes naming the
path, as TF1 raised them."""
import glob as _glob
import os as _os
import shutil as _shutil

from distflow import errors as _errors


def _not_found(path, e):
    return _errors.NotFoundError(f"{path}; {e.strerror or 'No such file or directory'}")


class GFile:
    """A file object (tf.gfile.GFile / tf.gfile.Open): text or bytes by mode."""

    def __init__(self, name, mode="r"):
        self._name = name
        try:
            self._f = open(name, mode)
        except FileNotFoundError as e:
            raise _not_found(name, e) from None
        except IsADirectoryError:
            raise _errors.FailedPreconditionError(f"{name}; Is a directory") from None
        except PermissionError:
            raise _errors.PermissionDeniedError(f"{name}; Permission denied") from None

    name = property(lambda self: self._name)
    mode = property(lambda self: self._f.mode)

    def read(self, n=-1):
        return self._f.read(n)

    def readline(self):
        return self._f.readline()

    def readlines(self):
        return self._f.readlines()

    def write(self, data):
        self._f.write(data)

    def seek(self, offset=None, whence=0, position=None):
        self._f.seek(position if position is not None else offset, whence)

    def tell(self):
        return self._f.tell()

    def size(self):
        return _os.fstat(self._f.fileno()).st_size

    def flush(self):
        self._f.flush()

    def close(self):
        self._f.close()

    def __iter__(self):
        return iter(self._f)

    def __next__(self):
        return next(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


Open = GFile
FastGFile = GFile


def Exists(filename):  # noqa: N802 (TensorFlow's names)
    return _os.path.exists(filename)


def IsDirectory(dirname):  # noqa: N802
    return _os.path.isdir(dirname)


def MakeDirs(dirname):  # noqa: N802
    _os.makedirs(dirname, exist_ok=True)


def MkDir(dirname):  # noqa: N802
    try:
        _os.mkdir(dirname)
    except FileExistsError:
        raise _errors.AlreadyExistsError(f"{dirname}; File exists") from None
    except FileNotFoundError as e:
        raise _not_found(dirname, e) from None


def DeleteRecursively(dirname):  # noqa: N802
    if not _os.path.exists(dirname):
        raise _errors.NotFoundError(f"{dirname}; No such file or directory")
    if _os.path.isdir(dirname) and not _os.path.islink(dirname):
        _shutil.rmtree(dirname)
    else:
        _os.remove(dirname)


def Remove(filename):  # noqa: N802
    try:
        _os.remove(filename)
    except FileNotFoundError as e:
        raise _not_found(filename, e) from None


def Rename(oldname, newname, overwrite=False):  # noqa: N802
    if not overwrite and _os.path.exists(newname):
        raise _errors.AlreadyExistsError(f"{newname}; File already exists")
    _os.replace(oldname, newname)


def Copy(oldpath, newpath, overwrite=False):  # noqa: N802
    if not overwrite and _os.path.exists(newpath):
        raise _errors.AlreadyExistsError(f"{newpath}; File already exists")
    try:
        _shutil.copyfile(oldpath, newpath)
    except FileNotFoundError as e:
        raise _not_found(oldpath, e) from None


def Glob(filename):  # noqa: N802
    return sorted(_glob.glob(filename))


def ListDirectory(dirname):  # noqa: N802
    try:
        return sorted(_os.listdir(dirname))
    except FileNotFoundError as e:
        raise _not_found(dirname, e) from None


def Walk(top, in_order=True):  # noqa: N802
    for root, dirs, files in _os.walk(top, topdown=in_order):
        yield root, dirs, files


class _FileStatistics:
    def __init__(self, st):
        self.length = st.st_size
        self.mtime_nsec = st.st_mtime_ns
        self.is_directory = _os.path.isdir


def Stat(filename):  # noqa: N802
    try:
        st = _os.stat(filename)
    except FileNotFoundError as e:
        raise _not_found(filename, e) from None
    out = _FileStatistics(st)
    out.is_directory = _os.path.isdir(filename)
    return out
