"""Soft assertions for the Python checks in this folder: every failed check
is printed and counted, so one run reports all of them; finish() gives the
exit code."""

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
    return cond


def finish():
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0
