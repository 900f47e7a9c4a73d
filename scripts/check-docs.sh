#!/usr/bin/env bash
# Drift checks between the code and the documentation (a step of
# scripts/test.sh; reads files only: no build, no network, well under a
# second). Fails, naming each gap and where to fill it, when:
#   - a field of `Config` (src/config.rs), of an upstream group, its
#     health_check, a route or a certificate (src/upstreams/spec.rs,
#     src/config.rs) has no row in docs/configuration.md;
#   - a `Config` field has no line (`key = …`, commented or not) in
#     examples/sluice.toml;
#   - a command-line flag (the `#[arg]`s of `Config`, the `Arg`s of
#     src/cli/args.rs) has no row in docs/configuration.md;
#   - a metric named in the code ("sluice_…" in src/), or an access record
#     termination (src/conn/access/termination.rs), has no row in
#     docs/observability.md;
#   - a relative link in README.md or docs/*.md points to no file, or to a
#     heading that does not exist;
#   - a heading in README.md or docs/ names an internal issue number.
#
# Usage: scripts/check-docs.sh
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
lib_help 2 19 "${1:-}"
need python3

exec python3 - <<'PY'
import os, re, sys

problems = []

def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()

def struct_fields(src, struct):
    """Field names of `pub struct NAME {` … its closing brace (4-space indented
    or top-level), with the attribute text above each field."""
    m = re.search(r"pub struct " + struct + r"\b[^{]*\{", src)
    if not m:
        problems.append(f"check-docs.sh: `pub struct {struct}` not found; update scripts/check-docs.sh")
        return []
    depth, i = 1, m.end()
    while depth and i < len(src):
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    body = src[m.end():i - 1]
    fields, attrs = [], []
    for line in body.splitlines():
        s = line.strip()
        fm = re.match(r"pub (\w+):", s)
        if fm:
            fields.append((fm.group(1), " ".join(attrs)))
            attrs = []
        elif not s:
            attrs = []
        elif not s.startswith("///"):
            attrs.append(s)
    return fields

config_rs = read("src/config.rs")
kinds_rs = read("src/config/kinds.rs")
spec_rs = read("src/upstreams/spec.rs")
conf_doc = read("docs/configuration.md")
example = read("examples/sluice.toml")
obs_doc = read("docs/observability.md")

def doc_rows(doc):
    return [l for l in doc.splitlines() if l.startswith("|")]

conf_rows = doc_rows(conf_doc)

def has_row(rows, token):
    return any(token in r for r in rows)

# --- Config fields: a row in docs/configuration.md, a line in the example ---
config_fields = struct_fields(config_rs, "Config")
flags = []
for name, attrs in config_fields:
    if not has_row(conf_rows, f"`{name}`"):
        problems.append(
            f"docs/configuration.md: no row for the key `{name}` (a field of Config in src/config.rs): "
            f"add `| `{name}` | type | default | … |` to the table of its section")
    if not re.search(rf"^#?\s*(\[\[)?{re.escape(name)}(\]\])?\s*(=|$|\s)", example, re.M):
        problems.append(
            f"examples/sluice.toml: no line for the key `{name}` (src/config.rs): "
            f"add `{name} = <default>` (or `# {name} = …` when it has no default) with a comment")
    am = re.search(r"#\[arg\((.*?)\)\]", attrs)
    if am and "skip" not in am.group(1).split(",")[0]:
        lm = re.search(r'\blong\s*=\s*"([^"]+)"', am.group(1))
        flags.append((lm.group(1) if lm else name.replace("_", "-"), f"Config.{name} in src/config.rs"))

# --- the binary's own flags ---
args_rs = read("src/cli/args.rs")
for m in re.finditer(r'(?:Arg::new|path_arg)\("([a-z0-9-]+)"', args_rs):
    flags.append((m.group(1), "src/cli/args.rs"))
for flag, where in flags:
    if not re.search(rf"`--{re.escape(flag)}[` =]", "\n".join(conf_rows)):
        problems.append(
            f"docs/configuration.md: no row for the flag `--{flag}` ({where}): "
            f"add it to the row of its key, or to the table \"Flags of the binary\"")

# --- group, health check, route, certificate keys ---
for struct, src, where in [("GroupSpec", spec_rs, "src/upstreams/spec.rs"),
                           ("HealthCheck", spec_rs, "src/upstreams/spec.rs"),
                           ("RouteSpec", spec_rs, "src/upstreams/spec.rs"),
                           ("RespondSpec", spec_rs, "src/upstreams/spec.rs"),
                           ("CertificateSpec", kinds_rs, "src/config/kinds.rs")]:
    for name, attrs in struct_fields(src, struct):
        if re.search(r"serde\((?:[^)]*,\s*)?skip\s*[,)]", attrs):
            continue
        if not has_row(conf_rows, f"`{name}`"):
            problems.append(
                f"docs/configuration.md: no row for `{name}` of {struct} ({where}): "
                f"add it to the table of [[upstream]], health_check, [[route]] or [[certificate]]")

# --- metrics ---
names = set()
for dirpath, _, files in os.walk("src"):
    if "/tests" in dirpath:
        continue
    for f in files:
        if f.endswith(".rs"):
            names.update(re.findall(r'"(sluice_[a-z0-9_]+)"', read(os.path.join(dirpath, f))))
obs_rows = "\n".join(doc_rows(obs_doc))
for n in sorted(names):
    if not re.search(rf"`{n}(_total)?`", obs_rows):
        problems.append(
            f"docs/observability.md: metric `{n}` (registered in src/) has no row: "
            f"add `| `{n}` (+ `_total` for a counter) | type | labels | meaning |` to the metrics table")

# --- access record terminations ---
access_rs = read("src/conn/access/termination.rs")
for t in sorted(set(re.findall(r'Termination::\w+ => "([a-z_]+)"', access_rs))):
    if not re.search(rf"^\| `{t}` \|", obs_doc, re.M):
        problems.append(
            f"docs/observability.md: termination `{t}` (src/conn/access/termination.rs) has no row: "
            f"add `| `{t}` | meaning |` to the termination table")

# --- relative links and headings ---
def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")

def anchors(path):
    out, seen, fence = set(), {}, False
    for line in read(path).splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"#+\s+(.*)", line)
        if m:
            a = slug(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else f"{a}-{n}")
    return out

pages = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir("docs") if f.endswith(".md"))
for page in pages:
    text = read(page)
    fence = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if re.match(r"#+\s.*\bissues?\s+#?\d+", line, re.I):
            problems.append(f"{page}:{lineno}: a heading names an internal issue number: {line.strip()}")
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                problems.append(f"{page}:{lineno}: link ({target}) points to {dest}, which does not exist")
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                problems.append(f"{page}:{lineno}: link ({target}): no heading #{frag} in {dest}")

if problems:
    print(f"check-docs: {len(problems)} gap(s) between the code and the docs:", file=sys.stderr)
    for p in problems:
        print("  " + p, file=sys.stderr)
    sys.exit(1)
print(f"check-docs: OK ({len(config_fields)} keys, {len(flags)} flags, {len(names)} metrics, "
      f"{len(pages)} pages' links)")
PY
