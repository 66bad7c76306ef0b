#!/usr/bin/env python3
"""Draw the library's layers and the imports between them as docs/architecture.svg, from the code itself.

    python scripts/draw_architecture.py           # write docs/architecture.svg
    python scripts/draw_architecture.py --check   # exit 1 when the picture is stale or an import runs back up

Each unit is a subpackage of `asyncodebench/` or one of its top-level modules (`files.py`, `untrusted.py`,
`cli.py`); `incontainer/` folders are left out, because they are copied into containers, never imported. An arrow
runs from the importer to what it imports (one arrow however many imports, so the picture changes only when
a new pair of units starts importing, not with every import). LAYERS below is the
design: a unit may import only from units on lower rows. The check fails on any arrow that runs up or sideways,
on an import between two modules of one package that closes a circle, and on a picture that no longer matches the
code, so the picture in the docs is always the code's.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "asyncodebench"
PICTURE = ROOT / "docs" / "architecture.svg"

# Bottom row first. The order inside a row only places the boxes.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("files", "untrusted"),
    ("dataset",),
    ("scoring",),
    ("harness",),
    ("images",),
    ("run",),
    ("agents", "reports"),
    ("cli",),
)

BOX_W, BOX_H, ROW_GAP, MARGIN = 130, 32, 40, 20


@dataclass(frozen=True)
class Imports:
    between_units: Counter[tuple[str, str]]  # (importer, imported) -> import statements
    between_modules: set[tuple[str, str]]  # dotted module names, for the circle check


def unit_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    if "incontainer" in parts or parts == ("__init__.py",):
        return None  # copied into containers; or the package's own __init__ (its version only, on every row)
    return parts[0].removesuffix(".py") if len(parts) == 1 else parts[0]


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.AST, here: str, is_package: bool) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = here.split(".")[: len(here.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append(module)
            found += [f"{module}.{alias.name}" for alias in node.names]  # `from pkg import module`
    return [name for name in found if name == "asyncodebench" or name.startswith("asyncodebench.")]


def read_imports() -> Imports:
    files = {module_of(path): path for path in sorted(PACKAGE.rglob("*.py")) if unit_of(path) is not None}
    units: Counter[tuple[str, str]] = Counter()
    modules: set[tuple[str, str]] = set()
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for target in set(imported_modules(tree, name, path.name == "__init__.py")):
            if target not in files or target == name:
                continue  # a name imported from a module, not a module
            modules.add((name, target))
        source_unit = unit_of(path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = {unit_of(files[t]) for t in imported_modules(node, name, path.name == "__init__.py")
                           if t in files}
                for target_unit in targets - {source_unit, None}:
                    units[(str(source_unit), str(target_unit))] += 1
    return Imports(units, modules)


def row_of(unit: str) -> int:
    for row, members in enumerate(LAYERS):
        if unit in members:
            return row
    raise SystemExit(f"error: {unit} is not in LAYERS of {Path(__file__).name}: add it to the row it belongs on")


def problems(imports: Imports) -> list[str]:
    found = [f"{a} imports {b}: {a} is on row {row_of(a)}, {b} on row {row_of(b)} (only lower rows)"
             for a, b in sorted(imports.between_units) if row_of(b) >= row_of(a)]
    graph: dict[str, set[str]] = {}
    for a, b in imports.between_modules:
        graph.setdefault(a, set()).add(b)
    found += [f"import circle: {' -> '.join(circle)}" for circle in circles(graph)]
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected group of modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group) + [sorted(group)[0]])
    return groups


def edge_point(centre: tuple[float, float], towards: tuple[float, float]) -> tuple[float, float]:
    """Where the line from a box's centre towards another point leaves the box."""
    dx, dy = towards[0] - centre[0], towards[1] - centre[1]
    scale = min(BOX_W / 2 / abs(dx) if dx else float("inf"), BOX_H / 2 / abs(dy) if dy else float("inf"))
    return centre[0] + dx * scale, centre[1] + dy * scale


def draw(imports: Imports) -> str:
    # The boxes sit on a parabola (the first of a row on its left arm, the second on its right): a straight line
    # between two points of a parabola never crosses a third, so an arrow that skips rows passes beside the boxes.
    rows, step, half_width = len(LAYERS), BOX_H + ROW_GAP, 400
    width, height = 2 * half_width + BOX_W + 2 * MARGIN + 60, (rows - 1) * step + BOX_H + 2 * MARGIN
    cx, cy, half_height = width / 2 + 30, height / 2, (rows - 1) * step / 2 * 1.06
    centre: dict[str, tuple[float, float]] = {}
    for row, members in enumerate(LAYERS):
        y = height - MARGIN - BOX_H / 2 - row * step
        reach = max(half_width * (1 - ((y - cy) / half_height) ** 2), 0.6 * BOX_W)
        for side, unit in zip((-1, 1), members):
            centre[unit] = (cx + side * reach, y)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" '
           'aria-label="The asyncodebench library in layers: each arrow is an import, from importer to imported, '
           'always pointing down">',
           "<title>asyncodebench: layers and imports (generated by scripts/draw_architecture.py)</title>",
           '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
           f'<rect width="{width}" height="{height}" fill="#fff"/>']
    for a, b in sorted(imports.between_units):
        (x1, y1), (x2, y2) = centre[a], centre[b]
        start, end = edge_point((x1, y1), (x2, y2)), edge_point((x2, y2), (x1, y1))
        out.append(f'<line x1="{start[0]:.0f}" y1="{start[1]:.0f}" x2="{end[0]:.0f}" y2="{end[1]:.0f}" '
                   f'stroke="#888" stroke-width="1.2" marker-end="url(#head)"><title>{escape(a)} imports '
                   f'{escape(b)}</title></line>')
    for row, members in enumerate(LAYERS):
        for unit in members:
            x, y = centre[unit]
            label = f"{unit}/" if (PACKAGE / unit).is_dir() else f"{unit}.py"
            out.append(f'<rect x="{x - BOX_W / 2:.0f}" y="{y - BOX_H / 2:.0f}" width="{BOX_W}" height="{BOX_H}" '
                       'rx="6" fill="#eef3fb" stroke="#3a5a8c"/>')
            out.append(f'<text x="{x:.0f}" y="{y + 5:.0f}" text-anchor="middle" fill="#111">{escape(label)}</text>')
        out.append(f'<text x="{MARGIN}" y="{centre[members[0]][1] + 5:.0f}" fill="#555">row {row}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the picture is stale or an import breaks the layers")
    args = parser.parse_args(argv)
    imports = read_imports()
    found = problems(imports)
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    picture = draw(imports)
    shown = PICTURE.relative_to(ROOT) if PICTURE.is_relative_to(ROOT) else PICTURE
    if args.check:
        current = PICTURE.exists() and PICTURE.read_text(encoding="utf-8") == picture
        if not current:
            print(f"error: {shown} is stale: run python scripts/draw_architecture.py",
                  file=sys.stderr)
        return 1 if found or not current else 0
    PICTURE.write_text(picture, encoding="utf-8")
    print(f"wrote {shown}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
