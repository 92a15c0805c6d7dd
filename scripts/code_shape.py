"""Print the shape figures of a source tree as JSON (issue 21): functions over 100 lines, modules over
700 lines, median function length.

    .venv/bin/python scripts/code_shape.py [DIR]     # default: src

A function's length is from its `def` line to its last line (decorators not counted; nested functions
and methods count on their own too); a module's length is its number of lines.
"""

from __future__ import annotations

import ast
import json
import statistics
import sys
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    lengths: list[int] = []
    long_functions: list[tuple[str, int]] = []
    long_modules: list[tuple[str, int]] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > 700:
            long_modules.append((str(path), lines))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                lengths.append(length)
                if length > 100:
                    long_functions.append((f"{path}:{node.lineno} {node.name}", length))
    doc = {
        "functions": len(lengths),
        "median_function_lines": statistics.median(lengths),
        "functions_over_100_lines": long_functions,
        "modules_over_700_lines": long_modules,
    }
    sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
