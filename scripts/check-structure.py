#!/usr/bin/env python3
"""The house rules CI checks on the source (issue 29), with no Rust toolchain needed:

1. No file-level import circle inside a crate: a file that imports from another (through
   `use crate::...`, `super::...` or a re-export, resolved to the file that defines the
   item) must not be imported back, directly or around a loop. A module and its own
   submodules are one unit (a parent declaring a child is containment, not an import).
2. No function longer than 100 lines and no file longer than 700, in any crate of the
   workspace (tests aside).
3. docs/ARCHITECTURE.md true to the tree: its "Module map" has a section for every crate of
   the workspace (`members` in Cargo.toml; `fuzz` is its own workspace) listing every `.rs`
   file under that crate's `src/` exactly once, and nothing that is not there; every
   repository path the document names in backticks exists.

Usage: scripts/check-structure.py (from anywhere); exits 1 and names each violation.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["core/src", "app/src", "backends/sqlite/src", "backends/postgres/src",
          "providers/src", "mcp/src", "cli/src", "web/src", "bench/src"]
MAX_FUNCTION_LINES = 100
MAX_FILE_LINES = 700
ARCHITECTURE = "docs/ARCHITECTURE.md"
NOT_MAPPED = {"fuzz"}  # its own workspace, with no `src/` of modules


def crate_files(src):
    files = {}
    for dp, dn, fn in os.walk(src):
        for f in fn:
            if f.endswith('.rs'):
                p = os.path.join(dp, f)
                rel = os.path.relpath(p, src)[:-3].split(os.sep)
                if rel[-1] in ('mod', 'lib', 'main'):
                    rel = rel[:-1]
                files[tuple(rel)] = p
    return files

def strip_tests(text):
    # inline test modules see their parent through `super::`; they are not the file's imports
    m = re.search(r'#\[cfg\([^\]]*\btest\b[^\]]*\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\(\w+\))?\s+)?mod\s+\w+\s*\{', text)
    return text if m is None else text[:m.start()]

REEXPORTS = {}
def load_reexports(files):
    REEXPORTS.clear()
    for mod, p in files.items():
        text = strip_tests(open(p).read())
        for m in re.finditer(r'pub(?:\(crate\))?\s+use\s+([\w:]+?)(?:::\{([^}]*)\}|::(\w+))\s*;', text, re.S):
            prefix, group, single = m.group(1), m.group(2), m.group(3)
            parts = [x for x in prefix.split('::') if x]
            if parts and parts[0] == 'crate': base = []; parts = parts[1:]
            elif parts and parts[0] == 'self': base = list(mod); parts = parts[1:]
            elif parts and parts[0] == 'super': base = list(mod[:-1]); parts = parts[1:]
            else: base = list(mod)
            items = [single] if single else [x.strip().split(' as ')[0].strip() for x in group.split(',')]
            for it in items:
                if not it or it == 'self': continue
                sub = it.split('::')
                target = tuple(base + parts + sub[:-1])
                REEXPORTS[(mod, sub[-1])] = target

def resolve(path, files, depth=0):
    # longest prefix that is a file module; an item re-exported there resolves to its source
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in files:
            mod = tuple(path[:n])
            if n < len(path) and (mod, path[n]) in REEXPORTS and depth < 5:
                t = REEXPORTS[(mod, path[n])]
                r = resolve(list(t) + [path[n]], files, depth + 1)
                if r is not None:
                    return r
            return mod
    return None

def graph(src):
    """Each file's imports within the crate, as file -> files."""
    files = crate_files(src)
    load_reexports(files)
    g = defaultdict(set)
    for mod, p in files.items():
        text = re.sub(r'//.*', '', strip_tests(open(p).read()))
        for m in re.finditer(r'\b(crate|super|self)((?:::\w+)+)(?:::\{([^}]*)\})?', text):
            root, rest, group = m.group(1), m.group(2), m.group(3)
            parts = [x for x in rest.split('::') if x]
            if root == 'crate':
                base = []
            elif root == 'self':
                base = list(mod)
            else:
                base = list(mod[:-1])
                while parts and parts[0] == 'super':
                    parts, base = parts[1:], base[:-1]
            targets = [base + parts]
            for item in (group or '').split(','):
                item = item.strip().split(' as ')[0].strip()
                if item and item != 'self' and not item.startswith('{'):
                    targets.append(base + parts + [x for x in item.split('::') if x])
            for t in targets:
                r = resolve(t, files)
                # A module and its ancestors are one unit (containment, not an import).
                if r is not None and r != tuple(mod[:len(r)]) and mod != tuple(r[:len(mod)]):
                    g[mod].add(r)
    return files, g


def sccs(nodes, g):
    index = {}; low = {}; st = []; on = set(); out = []; c = [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in nodes:
        if v not in index: visit(v)
    return out


def import_cycles():
    found = []
    for crate in CRATES:
        src = os.path.join(ROOT, crate)
        files, g = graph(src)
        for comp in sccs(list(files), g):
            names = sorted("/".join(c) or "<root>" for c in comp)
            edges = sorted(("/".join(a) or "<root>") + " -> " + ("/".join(b) or "<root>")
                           for a in comp for b in g[a] if b in comp)
            found.append(f"{crate}: import circle {' '.join(names)} ({'; '.join(edges)})")
    return found


def source_files():
    """Every crate's library and binary sources, tests aside: the conformance suite's
    crate (`tests`), `tests.rs` files, `tests/` folders and the inline `#[cfg(test)]`
    module at a file's end are left out."""
    for crate in workspace_members():
        if crate == "tests":
            continue
        for dp, dn, fn in os.walk(os.path.join(ROOT, crate, "src")):
            dn[:] = sorted(d for d in dn if d != "tests")
            for f in sorted(fn):
                if f.endswith(".rs") and f != "tests.rs":
                    yield os.path.join(dp, f)


def long_functions():
    found = []
    for path in source_files():
        found += long_functions_in(path)
    return found


def long_files():
    found = []
    for path in source_files():
        n = strip_tests(open(path).read()).rstrip("\n").count("\n") + 1
        if n > MAX_FILE_LINES:
            rel = os.path.relpath(path, ROOT)
            found.append(f"{rel}: {n} lines outside its tests (at most {MAX_FILE_LINES})")
    return found


def long_functions_in(path):
    found = []
    lines = strip_tests(open(path).read()).split("\n")
    i = 0
    start = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
    while i < len(lines):
        m = start.match(lines[i])
        if not m:
            i += 1
            continue
        indent, name = m.group(1), m.group(7)
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j < len(lines) and lines[j].rstrip().endswith(";"):
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and lines[k] != indent + "}":
            k += 1
        if k - i + 1 > MAX_FUNCTION_LINES:
            rel = os.path.relpath(path, ROOT)
            found.append(f"{rel}:{i + 1}: fn {name} is {k - i + 1} lines (at most {MAX_FUNCTION_LINES})")
        i = k + 1
    return found


def workspace_members():
    """The crate directories of the root Cargo.toml's [workspace] members."""
    text = open(os.path.join(ROOT, "Cargo.toml")).read()
    try:
        import tomllib
        members = tomllib.loads(text)["workspace"]["members"]
    except ImportError:  # Python before 3.11
        m = re.search(r'^\[workspace\][^\[]*?^members\s*=\s*\[(.*?)\]', text, re.S | re.M)
        members = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return [c for c in members if c not in NOT_MAPPED]


def module_map(text):
    """The "## Module map" section as crate dir -> the files listed under its "### <dir>"
    heading, in order; None when there is no such section."""
    m = re.search(r'^## Module map[^\n]*\n(.*?)(?=^## |\Z)', text, re.S | re.M)
    if m is None:
        return None
    sections, crate = {}, None
    for line in m.group(1).split("\n"):
        h = re.match(r'^### `?([\w./-]+?)/?`?(?:\s|$)', line)
        if h:
            crate = h.group(1)
            sections.setdefault(crate, [])
            continue
        e = re.match(r'^- `([^`]+\.rs)`', line)
        if e and crate is not None:
            sections[crate].append(e.group(1))
    return sections


def architecture():
    text = open(os.path.join(ROOT, ARCHITECTURE)).read()
    return module_map_problems(text) + named_path_problems(text)


def module_map_problems(text):
    sections = module_map(text)
    if sections is None:
        return [f"{ARCHITECTURE}: no \"## Module map\" section"]
    found = []
    members = workspace_members()
    for crate in members:
        src = os.path.join(ROOT, crate, "src")
        on_disk = sorted(os.path.relpath(os.path.join(dp, f), src).replace(os.sep, "/")
                         for dp, _, fn in os.walk(src) for f in fn if f.endswith(".rs"))
        if crate not in sections:
            found.append(f"{ARCHITECTURE}: the module map has no section for {crate} "
                         f"({len(on_disk)} modules)")
            continue
        listed = sections[crate]
        for f in sorted({f for f in listed if listed.count(f) > 1}):
            found.append(f"{ARCHITECTURE}: the module map lists {crate}/src/{f} more than once")
        for f in on_disk:
            if f not in listed:
                found.append(f"{crate}/src/{f}: not in {ARCHITECTURE}'s module map")
        for f in listed:
            if f not in on_disk:
                found.append(f"{ARCHITECTURE}: the module map lists {crate}/src/{f}, "
                             "which does not exist")
    for crate in sections:
        if crate not in members:
            found.append(f"{ARCHITECTURE}: the module map has a section for {crate}, "
                         "which is not a workspace member")
    return found


def named_path_problems(text):
    """Paths named in backticks that start at a top-level directory must exist."""
    tops = {d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d))
            and not d.startswith(".") and d != "target"}
    found = []
    for path in sorted(set(re.findall(r'`([\w./-]+)`', text))):
        top = path.split("/")[0]
        if "/" in path and top in tops and not os.path.exists(os.path.join(ROOT, path)):
            found.append(f"{ARCHITECTURE}: names {path}, which does not exist")
    return found


if __name__ == "__main__":
    problems = import_cycles() + long_functions() + long_files() + architecture()
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)
