"""read_data_sets(dir, one_hot=True) as TensorFlow's MNIST tutorial has it,
reading MNIST or Fashion-MNIST IDX files (gzip or not) from `dir`. When
`dir` holds no data set (the tutorials' 'MNIST_data', which TensorFlow
downloaded), Debian's Fashion-MNIST (dataset-fashion-mnist) is used, with a
line saying so: there is no network to download from.

Images are float32 in [0, 1], shape [n, 784]; labels are one-hot float64
[n, 10] (or uint8 class ids without one_hot), as TensorFlow's."""
import collections
import gzip
import os
import struct
import sys

import numpy as np

DEFAULT_DIRS = ["/usr/share/datasets/fashion-mnist"]  # Debian's dataset-fashion-mnist
_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


def _find(directory, base):
    for name in (base, base + ".gz"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    return None


def _read_idx(path, want_dims):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        raise ValueError(f"{path}: {len(data)} bytes, too short for an IDX file")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08 or ndim != want_dims:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes with {want_dims} dimension(s) "
                         f"(header {data[:4].hex()})")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: header says {dims} ({int(np.prod(dims))} bytes) but {body.size} bytes follow")
    return body.reshape(dims)


class DataSet:
    """Examples served in shuffled mini-batches (TF1's mnist.DataSet)."""

    def __init__(self, images, labels, fake_data=False, one_hot=False, dtype=None, reshape=True, seed=None):
        if isinstance(fake_data, (int, np.integer)) and not isinstance(fake_data, bool) and seed is None:
            seed = fake_data  # the old positional DataSet(images, labels, seed)
            fake_data = False
        self._images = images
        self._labels = labels
        self._fake_data, self._one_hot = bool(fake_data), one_hot
        self._n = 10000 if fake_data else images.shape[0]
        self._rng = np.random.RandomState(seed)
        self._order = self._rng.permutation(self._n)
        self._pos = 0
        self.epochs_completed = 0

    images = property(lambda self: self._images)
    labels = property(lambda self: self._labels)
    num_examples = property(lambda self: self._n)

    def next_batch(self, batch_size, fake_data=False, shuffle=True):
        """The next `batch_size` examples; a new shuffled pass each epoch.
        With fake_data, batches of ones with label 0, as TF1's tests used."""
        if fake_data or self._fake_data:
            image = np.ones(784, dtype=np.float32)
            label = np.eye(10)[0] if self._one_hot else 0
            return np.stack([image] * batch_size), np.asarray([label] * batch_size)
        if batch_size > self._n:
            raise ValueError(f"batch of {batch_size} from a data set of {self._n}")
        if self._pos + batch_size > self._n:
            self.epochs_completed += 1
            self._order = self._rng.permutation(self._n) if shuffle else np.arange(self._n)
            self._pos = 0
        idx = self._order[self._pos:self._pos + batch_size]
        self._pos += batch_size
        return self._images[idx], self._labels[idx]


def _dtype_name(dtype):
    if dtype is None:
        return "float32"
    return getattr(dtype, "name", None) or np.dtype(dtype).name


def read_data_sets(train_dir, fake_data=False, one_hot=False, dtype=None, reshape=True, validation_size=5000,
                   seed=None, source_url=None):
    """TF1's read_data_sets: float32 images in [0, 1] (dtype uint8: the raw
    bytes), [n, 784] (reshape=False: [n, 28, 28, 1]), labels one-hot
    float64 or uint8 class ids."""
    if fake_data:
        fake = DataSet([], [], fake_data=True, one_hot=one_hot, seed=seed)
        return Datasets(train=fake, validation=fake, test=fake)
    want = _dtype_name(dtype)
    if want not in ("float32", "uint8"):
        raise TypeError(f"Invalid image dtype {want}, expected uint8 or float32")
    directory = train_dir
    if _find(directory, _FILES["train_images"]) is None:
        found = [d for d in DEFAULT_DIRS if _find(d, _FILES["train_images"]) is not None]
        if not found:
            raise FileNotFoundError(
                f"No MNIST/Fashion-MNIST IDX files in '{train_dir}' or {', '.join(DEFAULT_DIRS)}: put "
                f"train-images-idx3-ubyte(.gz) and the other three files there, or install Debian's "
                f"dataset-fashion-mnist")
        directory = found[0]
        print(f"input_data: '{train_dir}' has no data set; reading Fashion-MNIST from {directory}",
              file=sys.stderr)
    arrays = {}
    for key, base in _FILES.items():
        path = _find(directory, base)
        if path is None:
            raise FileNotFoundError(f"{directory} has {_FILES['train_images']} but not {base}")
        arrays[key] = _read_idx(path, 3 if key.endswith("images") else 1)
    n_train = arrays["train_images"].shape[0]
    if not 0 <= validation_size <= n_train:
        raise ValueError(f"Validation size should be between 0 and {n_train}. Received: {validation_size}.")

    def images(a):
        a = a.reshape(a.shape[0], -1) if reshape else a.reshape(a.shape[0], a.shape[1], a.shape[2], 1)
        return a if want == "uint8" else a.astype(np.float32) / 255.0

    def labels(a):
        if not one_hot:
            return a
        out = np.zeros((a.shape[0], 10), dtype=np.float64)
        out[np.arange(a.shape[0]), a] = 1.0
        return out

    train_x, train_y = images(arrays["train_images"]), labels(arrays["train_labels"])
    return Datasets(train=DataSet(train_x[validation_size:], train_y[validation_size:], seed=seed),
                    validation=DataSet(train_x[:validation_size], train_y[:validation_size], seed=seed),
                    test=DataSet(images(arrays["test_images"]), labels(arrays["test_labels"]), seed=seed))


def load_mnist(train_dir="MNIST-data"):
    return read_data_sets(train_dir)
