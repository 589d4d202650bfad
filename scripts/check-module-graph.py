#!/usr/bin/env python3
"""Checks lib/dyn's module graph against lib/README.md, the one place it is declared.

Usage: scripts/check-module-graph.py [ROOT]   (ROOT = the repository, default: this script's parent)

lib/README.md's table lists each module and the modules it may use (column "uses", a comma list or
"—"). Linking cannot enforce that table (every module's include directory is the same lib/, and a
header-only use links fine), so this script does, and fails (exit 1, one line per problem) on:
  - an #include "dyn/X/..." in lib/dyn/M/ where X is not among M's uses (an undeclared edge);
  - a declared use that no file of M includes (an edge that is not used);
  - a module's CMakeLists.txt whose dyn_add_module(M DEPS ...) modules differ from its uses;
  - a module folder without a table row, a row without a folder, a cycle among the uses.
Prints one summary line and exits 0 when the graph is true.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
lib = root / "lib" / "dyn"
readme = root / "lib" / "README.md"
problems = []


def table(path):
    """module -> set of declared uses, from the markdown table whose header has 'module' and 'uses'."""
    uses, cols = {}, None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("|"):
            cols = None  # a table's rows are contiguous
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols is None:
            if "module" in cells and "uses" in cells:
                cols = (cells.index("module"), cells.index("uses"))
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        name = cells[cols[0]].strip("`")
        raw = cells[cols[1]]
        deps = set() if raw in ("—", "-", "") else {d.strip().strip("`") for d in raw.split(",")}
        uses[name] = (deps, n)
    return uses


declared = table(readme)
if not declared:
    sys.exit(f"{readme}: no table with 'module' and 'uses' columns")
on_disk = sorted(p.name for p in lib.iterdir() if (p / "CMakeLists.txt").is_file())
for m in on_disk:
    if m not in declared:
        problems.append(f"lib/dyn/{m}: module has no row in lib/README.md")
for m, (deps, n) in declared.items():
    if m not in on_disk:
        problems.append(f"lib/README.md:{n}: module {m} has no folder lib/dyn/{m} with a CMakeLists.txt")
    for d in deps - set(declared):
        problems.append(f"lib/README.md:{n}: {m} uses {d}, which is not a module")

include = re.compile(r'^\s*#\s*include\s*"dyn/([A-Za-z0-9_]+)/')
actual = {}
for m in on_disk:
    used = actual.setdefault(m, set())
    for f in sorted((lib / m).iterdir()):
        if f.suffix not in (".h", ".cpp", ".hpp", ".inc"):
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            hit = include.match(line)
            if not hit or hit.group(1) == m:
                continue
            x = hit.group(1)
            used.add(x)
            if m in declared and x not in declared[m][0]:
                problems.append(f"{f.relative_to(root)}:{n}: includes dyn/{x}/, but {m} may not use {x} (lib/README.md)")
    if m in declared:
        for d in sorted(declared[m][0] - used):
            problems.append(f"lib/README.md:{declared[m][1]}: {m} declares a use of {d}, but no file of lib/dyn/{m} includes it")

add_module = re.compile(r"dyn_add_module\(\s*([A-Za-z0-9_]+)(.*?)\)", re.S)
for m in on_disk:
    cm = lib / m / "CMakeLists.txt"
    hit = add_module.search(cm.read_text())
    if not hit or hit.group(1) != m:
        problems.append(f"{cm.relative_to(root)}: no dyn_add_module({m} ...)")
        continue
    # dyn_<module> targets only (dyn_httplib is the vendored cpp-httplib, not a module).
    linked = set(re.findall(r"\bdyn_([A-Za-z0-9_]+)", hit.group(2))) & (set(on_disk) | set(declared))
    want = declared.get(m, (set(), 0))[0]
    for d in sorted(linked - want):
        problems.append(f"{cm.relative_to(root)}: links dyn_{d}, which lib/README.md does not list for {m}")
    for d in sorted(want - linked):
        problems.append(f"{cm.relative_to(root)}: does not link dyn_{d}, which lib/README.md lists for {m}")

# Cycles among the declared uses (depth-first search, white/grey/black).
state = {}


def visit(m, path):
    state[m] = 1
    for d in sorted(declared.get(m, (set(), 0))[0]):
        if state.get(d) == 1:
            problems.append("lib/README.md: a cycle: " + " -> ".join(path[path.index(d):] + [d]))
        elif d in declared and not state.get(d):
            visit(d, path + [d])
    state[m] = 2


for m in sorted(declared):
    if not state.get(m):
        visit(m, [m])

if problems:
    print("\n".join(problems))
    print(f"module graph: {len(problems)} problem(s)")
    sys.exit(1)
edges = sum(len(d) for d, _ in declared.values())
print(f"module graph: {len(declared)} modules, {edges} declared uses, every include declared and every use included")
