#!/usr/bin/env python3
"""Checks lib/dyn's module graph against lib/README.md, the one place it is declared.

Usage: scripts/check-module-graph.py [ROOT]   (ROOT = the repository, default: this script's parent)

lib/README.md's module table lists each module, the modules it may use (column "uses", a comma
list or "—") and the modules it must never reach, directly or through others (column "never").
Its program table gives the same "never" rule to programs built on the library (the tools in
cmd/, the programs of bench/ and fuzz/). Linking cannot enforce the tables (every module's include
directory is the same lib/, and a header-only use links fine), so this script does, and fails
(exit 1, one line per problem) on:
  - an #include "dyn/X/..." in lib/dyn/M/ where X is not among M's uses (an undeclared edge);
  - a declared use that no file of M includes (an edge that is not used);
  - a module's CMakeLists.txt whose dyn_add_module(M DEPS ...) modules differ from its uses;
  - a module folder without a table row, a row without a folder, a cycle among the uses;
  - a "never" rule broken by the declared uses, by the transitive link closure of a CMake target
    (dyn_add_module DEPS for modules; dyn_add_tool DEPS plus dyn_cli for cmd/ tools;
    target_link_libraries for bench/; fuzz_<target>_deps and lib sources compiled in for fuzz/),
    or by the transitive closure of the real #include lines (each hop named by file:line);
  - a program that includes a module header outside its link closure (a use its link hides).
Prints one summary line and exits 0 when the graph is true.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
lib = root / "lib" / "dyn"
readme = root / "lib" / "README.md"
problems = []
SOURCES = (".h", ".cpp", ".hpp", ".inc")


def names(raw):
    return set() if raw in ("—", "-", "") else {d.strip().strip("`") for d in raw.split(",")}


def table(path, key, columns):
    """key -> ({column: set of names}, line), from the markdown table whose header has `key` and columns."""
    rows, cols = {}, None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("|"):
            cols = None  # a table's rows are contiguous
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols is None:
            if key in cells and all(c in cells for c in columns):
                cols = {c: cells.index(c) for c in (key,) + columns}
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        rows[cells[cols[key]].strip("`")] = ({c: names(cells[cols[c]]) for c in columns}, n)
    return rows


modules = table(readme, "module", ("uses", "never"))
if not modules:
    sys.exit(f"{readme}: no table with 'module', 'uses' and 'never' columns")
declared = {m: (cols["uses"], n) for m, (cols, n) in modules.items()}
never = {m: (cols["never"], n) for m, (cols, n) in modules.items()}
programs = table(readme, "program", ("never",))

on_disk = sorted(p.name for p in lib.iterdir() if (p / "CMakeLists.txt").is_file())
for m in on_disk:
    if m not in declared:
        problems.append(f"lib/dyn/{m}: module has no row in lib/README.md")
for m, (deps, n) in declared.items():
    if m not in on_disk:
        problems.append(f"lib/README.md:{n}: module {m} has no folder lib/dyn/{m} with a CMakeLists.txt")
    for d in deps - set(declared):
        problems.append(f"lib/README.md:{n}: {m} uses {d}, which is not a module")
for rules in (never, {p: (cols["never"], n) for p, (cols, n) in programs.items()}):
    for m, (ban, n) in rules.items():
        for d in sorted(ban - set(declared)):
            problems.append(f"lib/README.md:{n}: {m} never reaches {d}, which is not a module")
        if m in ban:
            problems.append(f"lib/README.md:{n}: {m} never reaches itself")
for m, (ban, n) in never.items():
    if m != "cli" and "cli" not in ban:
        problems.append(f"lib/README.md:{n}: the never column of {m} lacks cli (binaries only: no module reaches cli)")

include = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
module_include = re.compile(r"^dyn/([A-Za-z0-9_]+)/")


def includes(f):
    """(line number, path) of each #include "..." of a file."""
    out = []
    for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
        hit = include.match(line)
        if hit:
            out.append((n, hit.group(1)))
    return out


# Module include edges: module -> {used module: "file:line" of the first include}.
actual = {}
for m in on_disk:
    used = actual.setdefault(m, {})
    for f in sorted((lib / m).iterdir()):
        if f.suffix not in SOURCES:
            continue
        for n, path in includes(f):
            hit = module_include.match(path)
            if not hit or hit.group(1) == m:
                continue
            x = hit.group(1)
            used.setdefault(x, f"{f.relative_to(root)}:{n}")
            if m in declared and x not in declared[m][0]:
                problems.append(f"{f.relative_to(root)}:{n}: includes dyn/{x}/, but {m} may not use {x} (lib/README.md)")
    if m in declared:
        for d in sorted(declared[m][0] - set(used)):
            problems.append(f"lib/README.md:{declared[m][1]}: {m} declares a use of {d}, but no file of lib/dyn/{m} includes it")

# Module link edges (dyn_<module> targets only: dyn_httplib is the vendored cpp-httplib, not a module).
add_module = re.compile(r"dyn_add_module\(\s*([A-Za-z0-9_]+)(.*?)\)", re.S)
linked = {}
for m in on_disk:
    cm = lib / m / "CMakeLists.txt"
    hit = add_module.search(cm.read_text())
    if not hit or hit.group(1) != m:
        problems.append(f"{cm.relative_to(root)}: no dyn_add_module({m} ...)")
        linked[m] = set()
        continue
    linked[m] = set(re.findall(r"\bdyn_([A-Za-z0-9_]+)", hit.group(2))) & (set(on_disk) | set(declared))
    want = declared.get(m, (set(), 0))[0]
    for d in sorted(linked[m] - want):
        problems.append(f"{cm.relative_to(root)}: links dyn_{d}, which lib/README.md does not list for {m}")
    for d in sorted(want - linked[m]):
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


def reach(starts, edges):
    """Every module reachable from `starts` over `edges` (module -> iterable), with the first path
    found to each (breadth-first, names in sorted order so reports are stable)."""
    paths = {s: [s] for s in sorted(starts)}
    queue = list(paths)
    while queue:
        m = queue.pop(0)
        for d in sorted(edges.get(m, ())):
            if d not in paths:
                paths[d] = paths[m] + [d]
                queue.append(d)
    return paths


def via_includes(path):
    """The include that makes each hop of a module path, as "file:line"."""
    return " -> ".join(actual[a][b] for a, b in zip(path, path[1:]))


# "never" on modules: the declared uses, the CMake link closure, the real include closure.
for m, (ban, n) in sorted(never.items()):
    rule = f"lib/README.md:{n} says {m} never reaches"
    for x, path in sorted(reach(declared.get(m, (set(), 0))[0], {k: v for k, (v, _) in declared.items()}).items()):
        if x in ban:
            problems.append(f"lib/README.md:{n}: the uses of {m} reach {x} ({' -> '.join([m] + path)}), but {m} never reaches {x}")
    for x, path in sorted(reach(linked.get(m, ()), linked).items()):
        if x in ban:
            chain = " -> ".join(f"dyn_{p}" for p in [m] + path)
            problems.append(f"lib/dyn/{m}/CMakeLists.txt: dyn_{m} links dyn_{x} ({chain}), but {rule} {x}")
    for x, path in sorted(reach(actual.get(m, {}), actual).items()):
        if x in ban:
            problems.append(f"{via_includes([m] + path)}: {m} includes {x} ({' -> '.join([m] + path)}), but {rule} {x}")

# Programs: the tools of cmd/, the programs of bench/ and fuzz/, each with its link closure.
deps_of = re.compile(r"\bdyn_([A-Za-z0-9_]+)")


def module_deps(text):
    return set(deps_of.findall(text)) & set(on_disk)


def program_includes(files, local_dirs):
    """(file:line, module) of each dyn/ include of `files`, following local includes found in
    `local_dirs` (cmd/common's headers) and lib sources compiled in."""
    seen, out, todo = set(), [], list(files)
    while todo:
        f = todo.pop(0)
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        for n, path in includes(f):
            hit = module_include.match(path)
            if hit:
                out.append((f"{f.relative_to(root)}:{n}", hit.group(1)))
                continue
            for d in [f.parent] + local_dirs:
                if (d / path).is_file():
                    todo.append(d / path)
                    break
    return out


def sources(folder):
    return sorted(p for p in folder.iterdir() if p.suffix in SOURCES)


progs = {}  # name -> (CMakeLists.txt, linked modules, [files])
for cm in sorted((root / "cmd").glob("*/CMakeLists.txt")):
    for hit in re.finditer(r"dyn_add_tool\(\s*([^\s)]+)(.*?)\)", cm.read_text(), re.S):
        # dyn_add_tool links dyn_cli itself (cmake/DynTool.cmake).
        progs[hit.group(1)] = (cm, module_deps(hit.group(2)) | {"cli"}, sources(cm.parent))
bench_cm = root / "bench" / "CMakeLists.txt"
if bench_cm.is_file():
    text = bench_cm.read_text()
    for hit in re.finditer(r"add_executable\(\s*([A-Za-z0-9_-]+)\s+([^)]*)\)", text):
        name = hit.group(1)
        link = re.search(r"target_link_libraries\(\s*" + re.escape(name) + r"\s(.*?)\)", text, re.S)
        files = [bench_cm.parent / s for s in hit.group(2).split()]
        progs[name] = (bench_cm, module_deps(link.group(1)) if link else set(), files)
fuzz_cm = root / "fuzz" / "CMakeLists.txt"
if fuzz_cm.is_file():
    text = fuzz_cm.read_text()
    var = {k: v for k, v in re.findall(r"set\(\s*([A-Za-z0-9_]+)\s*(.*?)\)", text, re.S)}

    def expand(v):
        return re.sub(r"\$\{([A-Za-z0-9_]+)\}", lambda h: expand(var[h.group(1)]) if h.group(1) in var else h.group(0), v)

    for name in expand(var.get("DYN_FUZZ_TARGETS", "")).split():
        files = [fuzz_cm.parent / f"{name}.cpp"]
        mods = module_deps(var.get(f"{name}_deps", ""))
        for s in expand(var.get(f"{name}_src", "")).split():
            s = pathlib.Path(s.replace("${PROJECT_SOURCE_DIR}", str(root)))
            files.append(s)
            part = s.relative_to(root).parts if s.is_relative_to(root) else ()
            if part[:2] == ("lib", "dyn"):
                mods.add(part[2])  # a module's source compiled in: the target holds that module's code
        progs[name] = (fuzz_cm, mods, files)

for p, (cols, n) in programs.items():
    if p not in progs:
        problems.append(f"lib/README.md:{n}: program {p} is built by no CMakeLists.txt of cmd/, bench/ or fuzz/")
common = [root / "cmd" / "common"]
for name, (cm, mods, files) in sorted(progs.items()):
    cols, n = programs.get(name, ({"never": set()}, 0))
    ban = cols["never"]
    closure = reach(mods, linked)
    for x, path in sorted(closure.items()):
        if x in ban:
            chain = " -> ".join([name] + [f"dyn_{p}" for p in path])
            problems.append(f"{cm.relative_to(root)}: {name} links dyn_{x} ({chain}), but lib/README.md:{n} says {name} never reaches {x}")
    for where, x in program_includes(files, common):
        if x not in closure:
            problems.append(f"{where}: {name} includes dyn/{x}/ but does not link dyn_{x} (nor reach it)")
        elif x in ban:
            problems.append(f"{where}: {name} includes dyn/{x}/, but lib/README.md:{n} says {name} never reaches {x}")

if problems:
    print("\n".join(problems))
    print(f"module graph: {len(problems)} problem(s)")
    sys.exit(1)
edges = sum(len(d) for d, _ in declared.values())
rules = sum(len(b) for b, _ in never.values()) + sum(len(c["never"]) for c, _ in programs.values())
print(f"module graph: {len(declared)} modules, {edges} declared uses, every include declared and every use included; "
      f"{rules} never rules hold on the uses, the link closures and the includes of {len(declared)} modules "
      f"and {len(progs)} programs")
