"""pip install --no-build-isolation ./python (Debian's python3-pip and
python3-setuptools; nothing is downloaded). The extension is built by the
project's CMake (of DISTFLOW_SOURCE_DIR, default: the checkout) in
DISTFLOW_BUILD_DIR (default: its build/, configured with Ninja if it is not
yet); it and libdistflow.so.0, which it finds beside itself ($ORIGIN), go
into the package."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("DISTFLOW_SOURCE_DIR", os.path.dirname(HERE)))
BUILD = os.path.abspath(os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(ROOT, "build")))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cache = os.path.join(BUILD, "CMakeCache.txt")
        if not os.path.exists(cache):
            # A portable package: the kernels' AVX2/AVX-512 loops are chosen at run time.
            subprocess.check_call(["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                                   "-DDISTFLOW_ARCH_FLAGS=-march=x86-64-v2"])
        else:
            with open(cache) as f:
                if any(line.startswith("DISTFLOW_ARCH_FLAGS:") and "native" in line for line in f):
                    print(f"distflow: {BUILD} is configured with -march=native, so this package runs only on CPUs "
                          "like this one; for a portable package set DISTFLOW_BUILD_DIR to a new directory",
                          file=sys.stderr)
        subprocess.check_call(["cmake", "--build", BUILD, "--target", "_distflow"])
        built = glob.glob(os.path.join(BUILD, "python", "distflow", "_distflow*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one _distflow extension in {BUILD}/python/distflow, found {built}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)
        shutil.copyfile(os.path.realpath(os.path.join(BUILD, "libdistflow.so")),
                        os.path.join(os.path.dirname(dest), "libdistflow.so.0"))
        # The generated protobuf classes (tf.Summary, tf.Event).
        for generated in glob.glob(os.path.join(BUILD, "python", "distflow", "proto", "*_pb2.py")):
            shutil.copyfile(generated, os.path.join(os.path.dirname(dest), "proto", os.path.basename(generated)))


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(distflow VERSION "):
                return line.split("VERSION ")[1].split()[0].rstrip(")")
    raise RuntimeError("no version in CMakeLists.txt")


setup(
    name="distflow",
    version=version(),
    description="distributed training runtime with a TensorFlow 1.x style Python client",
    packages=find_packages(where=HERE, include=["distflow", "distflow.*"]),
    package_dir={"": "."},
    ext_modules=[Extension("distflow._distflow", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)
