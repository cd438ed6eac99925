"""load_data() of the MNIST-format data sets, from files on this machine:
an .npz with x_train, y_train, x_test, y_test (Keras's cache format), a
directory of the four IDX files (gzip or not), or Debian's
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), the only such
data Debian ships. There is no network to download from."""
import os
import sys

import numpy as np

from distflow.examples.tutorials.mnist import input_data as _input_data


def _from_npz(path):
    with np.load(path, allow_pickle=False) as f:
        missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in f]
        if missing:
            raise ValueError(f"{path}: an MNIST .npz needs x_train, y_train, x_test and y_test; {missing} missing")
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])


def _from_idx(directory):
    arrays = {}
    for key, base in _input_data._FILES.items():
        found = _input_data._find(directory, base)
        if found is None:
            raise FileNotFoundError(f"{directory} has no {base} (or {base}.gz); an MNIST-format directory holds "
                                    f"{', '.join(_input_data._FILES.values())}")
        arrays[key] = _input_data._read_idx(found, 3 if key.endswith("images") else 1)
    return (arrays["train_images"], arrays["train_labels"]), (arrays["test_images"], arrays["test_labels"])


def load_data(what, path):
    """((x_train, y_train), (x_test, y_test)): uint8 images [n, 28, 28] and
    uint8 labels [n], as Keras returns them."""
    candidates = [path, os.path.join(os.path.expanduser("~"), ".keras", "datasets", path)] if path else []
    for p in candidates:
        if os.path.isfile(p) and p.endswith(".npz"):
            return _from_npz(p)
        if os.path.isdir(p) and _input_data._find(p, _input_data._FILES["train_images"]) is not None:
            return _from_idx(p)
    found = [d for d in _input_data.DEFAULT_DIRS if _input_data._find(d, _input_data._FILES["train_images"])]
    if not found:
        raise FileNotFoundError(
            f"{what}.load_data({path!r}): no such .npz or directory of IDX files, and Debian's "
            f"dataset-fashion-mnist is not installed ({', '.join(_input_data.DEFAULT_DIRS)}); nothing is "
            f"downloaded: install it or give the path of the data")
    if what != "fashion_mnist":
        print(f"{what}.load_data: no {path!r} here; reading Fashion-MNIST from {found[0]} (nothing is downloaded)",
              file=sys.stderr)
    return _from_idx(found[0])
