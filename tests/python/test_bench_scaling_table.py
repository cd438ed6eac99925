"""bench/scaling_table.py, the paper scaling table of issue 29: its model
sizes come from real graphs, and its rows follow the formulas the docstring
gives (the ring's bytes per rank are asserted against the runtime by
collective_test's AllReduce.EachRankSendsWhatTheAlgorithmsCost)."""
import os
import re
import subprocess
import sys

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def run_table(*args):
    out = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "scaling_table.py"), *args],
                         capture_output=True, text=True, check=True, env=dict(os.environ))
    return out.stdout


def test_the_cnn_and_the_bert_shaped_model_have_their_sizes_and_the_ring_its_bytes():
    out = run_table("--workers", "8", "--link_gbps", "8")  # 1 GB/s: ms equal MB
    # The book's CNN: conv 5x5x1x32, conv 5x5x32x64, dense 3136x500, dense 500x10, with biases.
    params = 5 * 5 * 32 + 32 + 5 * 5 * 32 * 64 + 64 + 3136 * 500 + 500 + 500 * 10 + 10
    assert "book's CNN: 8 variables, %.1f MB, largest 6.3 MB" % (4 * params / 1e6) in out, out
    assert re.search(r"BERT-base-shaped: 197 variables, 43\d\.\d MB, largest 93\.8 MB", out), out
    rows = [line for line in out.splitlines() if line.startswith("| | 8 |")]
    assert len(rows) == 4, out  # 1 and 8 ps tasks, for each model
    cnn_one_ps = [c.strip() for c in rows[0].split("|")]
    # 1 ps: it carries all 8 workers' 6.5 MB; the ring 2 x 7/8 of 6.5 MB per worker.
    assert cnn_one_ps[5] == "52.0 MB" and cnn_one_ps[8] == "11.4 MB", rows[0]
    assert abs(float(cnn_one_ps[9]) - 2 * 7 / 8 * 4 * params / 1e6) < 0.1, rows[0]
    # 8 ps tasks, partitioned: 6.5 MB each; whole variables: the 6.3 MB dense weight
    # still lands on one ps, which carries it for all 8 workers.
    cnn_eight_ps = [c.strip() for c in rows[1].split("|")]
    assert cnn_eight_ps[6] == "6.5 MB" and cnn_eight_ps[5] == "50.2 MB", rows[1]
