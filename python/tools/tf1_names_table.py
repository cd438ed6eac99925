#!/usr/bin/env python3
"""Writes python/README.md's table of the TensorFlow 1.x names that
distflow.compat.v1 has, read from the package itself (between the markers
<!-- tf1-names:begin --> and <!-- tf1-names:end -->).

    PYTHONPATH=build/python /usr/bin/python3 python/tools/tf1_names_table.py [--check]

--check exits 1 (printing the difference) when the README is not current;
the Python tests run it that way."""
import argparse
import difflib
import os
import sys
import types

BEGIN, END = "<!-- tf1-names:begin -->", "<!-- tf1-names:end -->"
MODULES = ["nn", "nn.rnn_cell", "train", "layers", "losses", "metrics", "summary", "gfile", "logging", "app", "errors",
           "contrib.framework", "contrib.layers", "contrib.learn.datasets", "contrib.rnn", "contrib.slim",
           "data", "data.experimental", "contrib.data", "estimator", "estimator.inputs"]


def public_names(obj):
    names = []
    for n in dir(obj):
        if n.startswith("_"):
            continue
        try:
            v = getattr(obj, n)
        except Exception:  # noqa: BLE001 (a name that raises is not there)
            continue
        if isinstance(v, types.ModuleType):
            continue  # a module: listed as its own row, or an import of the implementation
        names.append(n)
    return sorted(names)


def table():
    import distflow.compat.v1 as tf
    rows = ["| module | names |", "| --- | --- |"]
    top = [n for n in public_names(tf) if not isinstance(getattr(tf, n), types.ModuleType)]
    rows.append(f"| `tf` ({len(top)}) | {', '.join(f'`{n}`' for n in top)} |")
    for m in MODULES:
        obj = tf
        try:
            for part in m.split("."):
                obj = getattr(obj, part)
        except Exception:  # noqa: BLE001
            rows.append(f"| `tf.{m}` | not yet |")
            continue
        names = public_names(obj)
        rows.append(f"| `tf.{m}` ({len(names)}) | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
    with open(readme) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{readme} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + table() + END + tail
    if args.check:
        if new != text:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), "README.md",
                                                       "generated"))
            print("python/README.md's TF1 name table is not current: run python/tools/tf1_names_table.py")
            sys.exit(1)
        return
    with open(readme, "w") as f:
        f.write(new)


if __name__ == "__main__":
    main()
