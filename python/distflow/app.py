"""tf.app.flags and tf.app.run, as TensorFlow 1.x programs use them:
DEFINE_* at module level, FLAGS.<name> read anywhere (the command line is
parsed on first read), tf.app.run() calling main(argv)."""
import argparse
import sys as _sys


class _Flags:
    def __init__(self):
        object.__setattr__(self, "_parser", argparse.ArgumentParser(allow_abbrev=False))
        object.__setattr__(self, "_values", None)
        object.__setattr__(self, "_defaults", {})

    def _define(self, name, default, help_text, type_fn):
        if name in self._defaults:
            raise ValueError(f"flag --{name} is defined twice")
        self._defaults[name] = default
        if type_fn is bool:
            self._parser.add_argument(f"--{name}", nargs="?", const=True, default=default, type=_parse_bool,
                                      help=help_text)
            self._parser.add_argument(f"--no{name}", dest=name, action="store_false")
        else:
            self._parser.add_argument(f"--{name}", default=default, type=type_fn, help=help_text)
        object.__setattr__(self, "_values", None)  # parse again with the new flag

    def _parse(self, argv=None):
        argv = list(_sys.argv if argv is None else argv)
        # A bare boolean flag (--sync) takes no value from the next argument.
        bools = {n for n, d in self._defaults.items() if isinstance(d, bool)}
        args_in = [f"{a}=true" if a.startswith("--") and a[2:] in bools else a for a in argv[1:]]
        args, rest = self._parser.parse_known_args(args_in)
        unknown = [a for a in rest if a.startswith("--")]
        if unknown:
            self._parser.error(f"unknown flag(s): {' '.join(unknown)}")
        object.__setattr__(self, "_values", vars(args))
        return [argv[0]] + rest

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if self._values is None:
            self._parse()
        if name not in self._values:
            raise AttributeError(f"no flag named --{name} is defined (define it with tf.app.flags.DEFINE_*)")
        return self._values[name]

    def __setattr__(self, name, value):
        if self._values is None:
            self._parse()
        self._values[name] = value

    @property
    def __flags(self):
        if self._values is None:
            self._parse()
        return dict(self._values)


def _parse_bool(text):
    if text.lower() in ("1", "true", "t", "yes"):
        return True
    if text.lower() in ("0", "false", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


FLAGS = _Flags()


class flags:  # noqa: N801 (tf.app.flags)
    FLAGS = FLAGS

    @staticmethod
    def DEFINE_string(name, default, help=None):  # noqa: A002,N802
        FLAGS._define(name, default, help, str)

    @staticmethod
    def DEFINE_integer(name, default, help=None):  # noqa: A002,N802
        FLAGS._define(name, default, help, int)

    @staticmethod
    def DEFINE_float(name, default, help=None):  # noqa: A002,N802
        FLAGS._define(name, default, help, float)

    @staticmethod
    def DEFINE_boolean(name, default, help=None):  # noqa: A002,N802
        FLAGS._define(name, default, help, bool)

    DEFINE_bool = DEFINE_boolean


def run(main=None, argv=None):
    """Parses the flags, then exits with main(argv)'s result."""
    rest = FLAGS._parse(argv)
    main = main or _sys.modules["__main__"].main
    _sys.exit(main(rest))
