#!/usr/bin/python3
"""The status page and metrics of real tasks, read as a person and a scraper would.

A ps (distflow-server) and the chief (mnist_distributed) train on
Fashion-MNIST, each serving --status_port. While they train, this test
  * parses both tasks' /metrics with a parser written to the Prometheus text
    exposition format (0.0.4) and checks the values a task must report;
  * renders the chief's /status in headless Chromium, checks the screenshot
    is not blank and shows the curves' colour, and checks that the page's
    SVG holds the loss curve's points;
  * starts a server whose status port is taken: it still serves gRPC and
    says the status page is off.
Every process is stopped at the end, whatever happened.
"""
import argparse
import html.parser
import math
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

from checks import FAILURES, check, finish
from ports import free_port


def fetch(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")


# ---- Prometheus text format 0.0.4, as the spec writes it ----

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


def parse_value(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    return float(s)  # raises on anything else


def parse_labels(s, pos):
    """Parses '{a="x",b="y"}' starting at s[pos] == '{'; returns (dict, next pos)."""
    assert s[pos] == "{"
    pos += 1
    labels = {}
    while True:
        while s[pos] == " ":
            pos += 1
        if s[pos] == "}":
            return labels, pos + 1
        eq = s.index("=", pos)
        name = s[pos:eq].strip()
        if not LABEL_NAME.match(name):
            raise ValueError("bad label name %r" % name)
        pos = eq + 1
        if s[pos] != '"':
            raise ValueError("label value must be quoted")
        pos += 1
        value = []
        while s[pos] != '"':
            if s[pos] == "\\":
                nxt = s[pos + 1]
                value.append({"\\": "\\", '"': '"', "n": "\n"}[nxt])  # KeyError: bad escape
                pos += 2
            else:
                value.append(s[pos])
                pos += 1
        pos += 1
        if name in labels:
            raise ValueError("label %s twice" % name)
        labels[name] = "".join(value)
        while s[pos] == " ":
            pos += 1
        if s[pos] == ",":
            pos += 1


def parse_prometheus(text):
    """Returns {family: {"type": t, "help": h, "samples": [(name, labels, value)]}}; raises on bad input."""
    families = {}
    current = None
    for lineno, line in enumerate(text.split("\n"), 1):
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                fam = families.setdefault(parts[2], {"type": "untyped", "help": "", "samples": []})
                if not NAME.match(parts[2]):
                    raise ValueError("line %d: bad metric name" % lineno)
                if parts[1] == "TYPE":
                    if fam["samples"]:
                        raise ValueError("line %d: TYPE after samples of %s" % (lineno, parts[2]))
                    if parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                        raise ValueError("line %d: bad type %s" % (lineno, parts[3]))
                    fam["type"] = parts[3]
                else:
                    fam["help"] = parts[3] if len(parts) > 3 else ""
                current = parts[2]
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if not m:
            raise ValueError("line %d: no metric name: %r" % (lineno, line))
        name = m.group(0)
        pos = m.end()
        labels = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = parse_labels(line, pos)
        rest = line[pos:].split()
        if len(rest) not in (1, 2):
            raise ValueError("line %d: expected a value and an optional timestamp: %r" % (lineno, line))
        value = parse_value(rest[0])
        base = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in families:
                base = name[: -len(suffix)]
        fam = families.setdefault(base, {"type": "untyped", "help": "", "samples": []})
        if base != current:
            raise ValueError("line %d: samples of %s are not grouped under their TYPE" % (lineno, base))
        fam["samples"].append((name, labels, value))
    # Semantic checks of the types.
    for base, fam in families.items():
        if fam["type"] == "counter":
            for _, _, v in fam["samples"]:
                if not v >= 0:
                    raise ValueError("counter %s is %r" % (base, v))
        if fam["type"] == "histogram":
            series = {}
            for name, labels, v in fam["samples"]:
                key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
                series.setdefault(key, {"buckets": [], "count": None, "sum": None})
                if name == base + "_bucket":
                    series[key]["buckets"].append((parse_value(labels["le"]), v))
                elif name == base + "_count":
                    series[key]["count"] = v
                elif name == base + "_sum":
                    series[key]["sum"] = v
                else:
                    raise ValueError("histogram %s has sample %s" % (base, name))
            for key, h in series.items():
                les = [le for le, _ in h["buckets"]]
                counts = [c for _, c in h["buckets"]]
                if les != sorted(les) or les[-1] != math.inf:
                    raise ValueError("histogram %s%s: buckets not ascending to +Inf" % (base, key))
                if counts != sorted(counts):
                    raise ValueError("histogram %s%s: buckets not cumulative" % (base, key))
                if h["count"] != counts[-1] or h["sum"] is None:
                    raise ValueError("histogram %s%s: _count differs from the +Inf bucket" % (base, key))
    return families


def sample(families, name, **labels):
    """The value of the sample `name` with exactly these labels, or None."""
    base = name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            base = name[: -len(suffix)]
    for n, l, v in families.get(base, {"samples": []})["samples"]:
        if n == name and l == labels:
            return v
    return None


def self_test_parser():
    good = ('# HELP a_total A "thing"\\n.\n# TYPE a_total counter\na_total{x="q\\"\\\\\\n"} 3 1700000000\n'
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n")
    f = parse_prometheus(good)
    check(sample(f, "a_total", x='q"\\\n') == 3, "parser: escaped label value")
    check(sample(f, "h_count") == 2, "parser: histogram count")
    for bad in ("a{x=1} 2\n", "# TYPE a counter\na -1\n", "a 1 2 3\n", "# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", "a{x=\"\\q\"} 1\n", "1a 2\n"):
        try:
            parse_prometheus(bad)
            check(False, "parser accepted %r" % bad)
        except (ValueError, KeyError, IndexError):
            pass


# ---- PNG, enough to look at a screenshot ----

def decode_png(data):
    """Returns (width, height, rows of (r, g, b)) for 8-bit RGB/RGBA non-interlaced PNGs."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("unsupported PNG kind %r" % (ihdr,))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, p = [], bytearray(stride), 0
    for _ in range(height):
        ftype = raw[p]
        line = bytearray(raw[p + 1:p + 1 + stride])
        p += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


class SvgFinder(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs = []  # (attrs, [polyline points attr])
        self.text = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg":
            self.svgs.append((attrs, []))
        elif tag == "polyline" and self.svgs:
            self.svgs[-1][1].append(attrs.get("points", ""))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception:  # not up yet
            pass
        time.sleep(0.3)
    raise TimeoutError("timed out waiting for " + what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--mnist", required=True)
    ap.add_argument("--hello", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    self_test_parser()

    work = tempfile.mkdtemp(prefix="status_page_test.")
    ps_port, w_port, ps_status, w_status = free_port(), free_port(), free_port(), free_port()
    spec = "ps|127.0.0.1:%d,worker|127.0.0.1:%d" % (ps_port, w_port)
    procs = []
    logs = {}

    def start(name, cmd):
        logs[name] = open(os.path.join(work, name + ".log"), "w+")
        procs.append(subprocess.Popen(cmd, stdout=logs[name], stderr=subprocess.STDOUT, start_new_session=True))
        return procs[-1]

    try:
        start("ps", [args.server, "--cluster_spec=" + spec, "--job_name=ps", "--task_index=0",
                     "--status_port=%d" % ps_status])
        start("chief", [args.mnist, "--cluster_spec=" + spec, "--job_name=worker", "--task_index=0",
                        "--status_port=%d" % w_status, "--train_steps=1000000", "--progress=false",
                        "--intra_op_threads=1"])
        chief_metrics = "http://127.0.0.1:%d/metrics" % w_status

        def trained():
            fams = parse_prometheus(fetch(chief_metrics)[2])
            steps = sample(fams, "distflow_steps_total", status="OK") or 0
            return fams if steps >= 30 else None

        fams = wait_for(trained, 180, "the chief to train 30 steps")
        status, ctype, text = fetch(chief_metrics)
        check(status == 200 and ctype.startswith("text/plain; version=0.0.4"), "chief /metrics content type " + ctype)
        fams = parse_prometheus(text)
        check(sample(fams, "distflow_step_seconds_count") >= 30, "chief: step latency histogram counts the steps")
        check(sample(fams, "distflow_active_sessions", task="/job:worker/replica:0/task:0") == 1,
              "chief: one active session")
        loss = sample(fams, "distflow_scalar", series="loss")
        check(loss is not None and 0 < loss < 10, "chief: the last loss is exported: %r" % loss)
        check((sample(fams, "distflow_tensor_bytes_received_total", peer="/job:ps/replica:0/task:0") or 0) > 1e5,
              "chief: tensor bytes received from the ps")
        check(fams["distflow_rpc_server_handled_total"]["type"] == "counter", "rpc counts are counters")
        check((sample(fams, "distflow_rpc_server_handled_total", method="/distflow.proto.WorkerService/RecvTensor",
                      code="OK") or 0) > 0, "chief: served RecvTensor calls of the ps")

        ps_fams = parse_prometheus(fetch("http://127.0.0.1:%d/metrics" % ps_status)[2])
        ps_task = "/job:ps/replica:0/task:0"
        check((sample(ps_fams, "distflow_rpc_server_handled_total", method="/distflow.proto.WorkerService/RunGraph",
                      code="OK") or 0) >= 30, "ps: RunGraph calls counted")
        check((sample(ps_fams, "distflow_rpc_server_handling_seconds_count",
                      method="/distflow.proto.WorkerService/RunGraph") or 0) >= 30, "ps: RunGraph latency histogram")
        check((sample(ps_fams, "distflow_variables", task=ps_task) or 0) >= 8, "ps: holds the model's variables")
        # The CNN's weights alone are over 3 MB of float32.
        check((sample(ps_fams, "distflow_variable_bytes", task=ps_task) or 0) > 3e6, "ps: variable bytes")
        check((sample(ps_fams, "distflow_tensor_bytes_sent_total", peer="/job:worker/replica:0/task:0") or 0) > 1e5,
              "ps: tensor bytes sent to the worker")

        # The page, as a browser shows it.
        page_url = "http://127.0.0.1:%d/status" % w_status
        status, ctype, page = fetch(page_url)
        check(status == 200 and ctype.startswith("text/html"), "status page content type " + ctype)
        check(not any(t in page for t in ("<script", "<link", "src=", "url(", "@import", "href=\"http")),
              "the page loads nothing else (no scripts, no external resources)")
        finder = SvgFinder()
        finder.feed(page)
        text = " ".join(finder.text)
        check("/job:worker/replica:0/task:0" in text and "/job:ps/replica:0/task:0" in text, "the page names the tasks")
        check(text.count("up") >= 2, "both tasks answer")
        charts = {a.get("data-series"): (a, pl) for a, pl in finder.svgs}
        check("loss" in charts and "accuracy" in charts, "loss and accuracy curves: %r" % list(charts))
        if "loss" in charts:
            attrs, polylines = charts["loss"]
            n = int(attrs.get("data-points", "0"))
            points = polylines[0].split() if polylines else []
            check(n >= 20 and len(points) == n, "the loss curve holds its %d points (drew %d)" % (n, len(points)))
            coords = [tuple(map(float, p.split(","))) for p in points]
            xs = [x for x, _ in coords]
            w, h = float(attrs["width"]), float(attrs["height"])
            check(xs == sorted(xs) and all(0 <= x <= w and 0 <= y <= h for x, y in coords),
                  "the points run left to right inside the chart")
            check(len(set(y for _, y in coords)) > 5, "the curve is not flat")

        png = os.path.join(work, "status.png")
        shot = subprocess.run([args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--window-size=900,1300", "--screenshot=" + png, page_url],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        check(os.path.exists(png), "chromium wrote a screenshot:\n" + shot.stdout.decode(errors="replace")[-2000:])
        if os.path.exists(png):
            width, height, rows = decode_png(open(png, "rb").read())
            check((width, height) == (900, 1300), "screenshot size %dx%d" % (width, height))
            colours = {}
            for row in rows[::2]:
                for px in row[::2]:
                    colours[px] = colours.get(px, 0) + 1
            total = sum(colours.values())
            top = max(colours.values())
            check(top < 0.97 * total, "the screenshot is not blank (%d colours)" % len(colours))
            dark = sum(c for (r, g, b), c in colours.items() if r + g + b < 200)
            check(dark > 500, "there is text on it (%d dark pixels)" % dark)
            # The curves' colour (#1f6feb) and its anti-aliased neighbours.
            blue = sum(c for (r, g, b), c in colours.items() if b > 200 and r < 120 and g < 160)
            check(blue > 200, "the curves are drawn (%d curve-blue pixels)" % blue)
        print("screenshot:", png, flush=True)

        # A taken status port turns only the page off.
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            taken = holder.getsockname()[1]
            solo_port = free_port()
            solo = start("solo", [args.server, "--cluster_spec=local|127.0.0.1:%d" % solo_port, "--job_name=local",
                                  "--task_index=0", "--status_port=%d" % taken])
            hello = subprocess.run([args.hello, "grpc://127.0.0.1:%d" % solo_port], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=60)
            check(b"Hello, distributed" in hello.stdout, "the server with a taken status port serves gRPC")
            check(solo.poll() is None, "and keeps running")
            logs["solo"].flush()
            log = open(os.path.join(work, "solo.log")).read()
            check("status page is off" in log and str(taken) in log, "it says the status page is off:\n" + log)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if FAILURES:
            for name, f in logs.items():
                f.flush()
                print("---- %s log (tail) ----" % name)
                print(open(os.path.join(work, name + ".log")).read()[-3000:])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
