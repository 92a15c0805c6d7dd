"""Dependency-graph helpers shared by the index (at staging) and the resolver (at selection)."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def cycles(nodes: Iterable[str], deps: Callable[[str], Iterable[str]]) -> list[list[str]]:
    """Every dependency cycle among `nodes` (Tarjan's strongly connected components, iterative).

    `deps(node)` gives a node's required dependencies; edges to names outside `nodes` are ignored.
    Each cycle is returned sorted; the list is sorted by its first member.
    """
    inside = set(nodes)
    members = sorted(n for n in inside if any(d in inside for d in deps(n)))  # a cycle member has an edge
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in members:
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            edges = [d for d in deps(node) if d in inside]
            if i < len(edges):
                work.append((node, i + 1))
                dep = edges[i]
                if dep not in index:
                    work.append((dep, 0))
                elif dep in on_stack:
                    low[node] = min(low[node], index[dep])
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def describe_cycle(members: list[str]) -> str:
    """`a -> b -> a` (members in sorted order; the exact edge order is not needed to fix it)."""
    return " -> ".join([*members, members[0]])
