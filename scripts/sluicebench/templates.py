"""Config templates of the peers (nginx, HAProxy) under scripts/bench/: fill
their @NAME@ fields and refuse a file with a field left unfilled."""

import os
import re

BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def fill(template, out, values):
    """Writes scripts/bench/TEMPLATE to OUT with each @KEY@ replaced by
    str(VALUES[KEY]); raises RuntimeError if a field outside a comment line is
    left unfilled."""
    with open(os.path.join(BENCH_DIR, template)) as f:
        text = f.read()
    for k, v in values.items():
        text = text.replace("@%s@" % k, str(v))
    left = re.findall(r"@[A-Z_]+@", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
    if left:
        raise RuntimeError("unfilled fields %s in %s" % (left, template))
    with open(out, "w") as f:
        f.write(text)
