"""pip install --no-build-isolation of the package into a fresh venv
(--system-site-packages, for Debian's numpy), offline, then a program run
from outside the tree imports the installed copy and trains."""
import os
import shutil
import subprocess
import sys

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))

PROGRAM = """
import distflow, distflow.compat.v1 as tf
print(distflow.__file__)
x = tf.placeholder(tf.float32, [None, 1])
w = tf.Variable(tf.zeros([1, 1]))
loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 3 * x))
train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
summary = tf.summary.scalar("w", tf.reduce_sum(w))
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(50):
        sess.run(train, feed_dict={x: [[1.0], [2.0]]})
    assert tf.Summary.FromString(sess.run(summary)).value[0].tag == "w"  # the generated protobuf classes
    print("w", float(sess.run(w)[0][0]))
"""


def test_pip_install_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    # Installed from a copy, so the build leaves nothing in the checkout.
    src = tmp_path / "python"
    shutil.copytree(os.path.join(SOURCE, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    env = dict(os.environ, DISTFLOW_SOURCE_DIR=os.path.abspath(SOURCE), DISTFLOW_BUILD_DIR=os.path.abspath(BUILD))
    env.pop("PYTHONPATH", None)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", str(src)],
                         capture_output=True, text=True, env=env, timeout=900)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    run = subprocess.run([str(venv / "bin" / "python"), "-c", PROGRAM], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    where, result = run.stdout.strip().splitlines()[0], run.stdout.strip().splitlines()[-1]
    assert where.startswith(str(venv)), where  # the installed copy, not the build tree
    assert abs(float(result.split()[1]) - 3.0) < 1e-3, run.stdout
    # The extension finds the packaged libdistflow.so.0 beside itself.
    pkg = os.path.dirname(where)
    ldd = subprocess.run(["ldd"] + [os.path.join(pkg, f) for f in os.listdir(pkg) if f.startswith("_distflow")],
                         capture_output=True, text=True).stdout
    assert os.path.join(pkg, "libdistflow.so.0") in ldd, ldd
