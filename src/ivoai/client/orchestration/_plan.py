"""Plan validation (AUTO.md, "Plan validation"): pure, every error names its field.

The plan is what the orchestrator's `orchestration_plan` tool takes and `ivoai auto plan --check`
reads::

    {"objective": "...",
     "tasks": [{"id": "scan", "role": "research", "task": "...", "dependencies": [],
                "signals": {complexity, risk, reasoning_depth, context_breadth,
                            verification_need, parallel_value, latency_sensitivity},
                "acceptance_criteria": ["..."], "delegate": true}],
     "weights": "default" | "quality" | {five weights}}          # optional

Optional task fields: `intentional_redundancy` (allows a duplicate task text), `vendor`
(`codex`/`claude`), `model` and `effort` (an explicit choice that must be available; never a silent
fallback). Everything else is refused, and fields that would carry a shell, an executable, an
environment, an endpoint or a credential get their own message: a plan describes work, never how
to run it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ivoai.client.orchestration._scoring import (
    SIGNAL_NAMES,
    WEIGHT_PROFILES,
    Signals,
    check_weights,
    role_min_tier,
)
from ivoai.common.limits import (
    AUTO_ACCEPTANCE_CRITERIA_MAX,
    AUTO_BRIEF_ITEM_MAX_CHARS,
    AUTO_BRIEF_OBJECTIVE_MAX_CHARS,
    AUTO_MAX_TASKS,
    AUTO_TASK_TEXT_MAX_BYTES,
)
from ivoai.common.validate import is_int

TASK_ID_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
ROLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\[\]/-]{0,127}$")
VENDORS = ("codex", "claude")
EFFORTS = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")

PLAN_FIELDS = frozenset({"objective", "tasks", "weights"})
TASK_FIELDS = frozenset(
    {
        "id",
        "role",
        "task",
        "dependencies",
        "signals",
        "acceptance_criteria",
        "delegate",
        "intentional_redundancy",
        "vendor",
        "model",
        "effort",
    }
)
REQUIRED_TASK_FIELDS = ("id", "role", "task", "dependencies", "signals", "acceptance_criteria", "delegate")
# A field whose name says it would tell ivoai *how to run* something is refused with its own message.
_FORBIDDEN_RE = re.compile(
    r"(shell|exec|command|cmd|argv|binary|program|script|env|path|cwd|endpoint|url|uri|host|port|base_?url|"
    r"credential|token|secret|password|passwd|api_?key|auth|cookie|header|key)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PlanIssue:
    """One validation error: the field it concerns (`tasks[2].signals.risk`) and what is wrong."""

    field: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """`{"field", "message"}` as in the `--json` contract."""
        return {"field": self.field, "message": self.message}


@dataclass(frozen=True)
class PlanTask:
    """One validated task."""

    id: str
    role: str
    task: str
    dependencies: tuple[str, ...]
    signals: Signals
    acceptance_criteria: tuple[str, ...]
    delegate: bool
    intentional_redundancy: bool = False
    vendor: str | None = None
    model: str | None = None
    effort: str | None = None


@dataclass(frozen=True)
class Plan:
    """A validated plan: 1-12 tasks forming a DAG, plus the scoring weights it asked for."""

    objective: str
    tasks: tuple[PlanTask, ...]
    weights: Mapping[str, float]

    def task(self, task_id: str) -> PlanTask | None:
        """The task with this ID, or None."""
        return next((t for t in self.tasks if t.id == task_id), None)

    def order(self) -> list[str]:
        """Task IDs in a dependency order (stable: ties keep the plan's order)."""
        return topological_order({t.id: t.dependencies for t in self.tasks}) or []


def _forbidden(name: str) -> bool:
    return bool(_FORBIDDEN_RE.search(name))


def _unknown_fields(
    doc: Mapping[str, Any], allowed: frozenset[str], where: str, out: list[PlanIssue]
) -> None:
    for name in sorted(set(doc) - allowed, key=str):
        field = f"{where}.{name}" if where else str(name)
        if _forbidden(str(name)):
            out.append(
                PlanIssue(
                    field,
                    "forbidden field: a plan cannot carry a shell, executable, environment, endpoint or "
                    "credential; ivoai decides how workers run",
                )
            )
        else:
            out.append(PlanIssue(field, f"unknown field; allowed: {', '.join(sorted(allowed))}"))


def _text_problem(value: str) -> str | None:
    if "\x00" in value:
        return "contains a NUL character"
    if "\x1b" in value:
        return "contains an ESC (terminal control) character"
    return None


def normalized_text(value: str) -> str:
    """The form duplicate detection compares: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def _check_str_list(
    value: Any, field: str, out: list[PlanIssue], *, min_items: int, max_items: int, max_chars: int
) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        out.append(PlanIssue(field, "must be a list of strings"))
        return None
    if not min_items <= len(value) <= max_items:
        out.append(PlanIssue(field, f"must hold {min_items}-{max_items} items (has {len(value)})"))
        return None
    ok = True
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            out.append(PlanIssue(f"{field}[{i}]", "must be a non-empty string"))
            ok = False
        elif len(item) > max_chars:
            out.append(PlanIssue(f"{field}[{i}]", f"exceeds {max_chars} characters ({len(item)})"))
            ok = False
        elif (problem := _text_problem(item)) is not None:
            out.append(PlanIssue(f"{field}[{i}]", problem))
            ok = False
    return tuple(value) if ok else None


def _check_signals(value: Any, field: str, out: list[PlanIssue]) -> Signals | None:
    if not isinstance(value, dict):
        out.append(PlanIssue(field, f"must be an object with the seven signals {', '.join(SIGNAL_NAMES)}"))
        return None
    before = len(out)
    _unknown_fields(value, frozenset(SIGNAL_NAMES), field, out)
    for name in SIGNAL_NAMES:
        if name not in value:
            out.append(PlanIssue(f"{field}.{name}", "required signal is missing (integer 0-100)"))
            continue
        v = value[name]
        if not is_int(v):
            out.append(PlanIssue(f"{field}.{name}", f"must be an integer 0-100, got {type(v).__name__}"))
        elif not 0 <= v <= 100:
            out.append(PlanIssue(f"{field}.{name}", f"must be 0-100, got {v}"))
    if len(out) != before:
        return None
    return Signals(**{name: value[name] for name in SIGNAL_NAMES})


def _check_task(doc: Any, where: str, out: list[PlanIssue]) -> PlanTask | None:
    if not isinstance(doc, dict):
        out.append(PlanIssue(where, "must be an object"))
        return None
    before = len(out)
    _unknown_fields(doc, TASK_FIELDS, where, out)
    for name in REQUIRED_TASK_FIELDS:
        if name not in doc:
            out.append(PlanIssue(f"{where}.{name}", "required field is missing"))
    tid = doc.get("id")
    if "id" in doc and (not isinstance(tid, str) or not TASK_ID_RE.match(tid)):
        out.append(PlanIssue(f"{where}.id", "must match ^[a-z][a-z0-9_-]{0,63}$ (e.g. scan_api)"))
    role = doc.get("role")
    if "role" in doc:
        if not isinstance(role, str) or not ROLE_RE.match(role):
            out.append(PlanIssue(f"{where}.role", "must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$"))
        elif role_min_tier(role) is None:
            out.append(
                PlanIssue(
                    f"{where}.role",
                    f"unknown role {role!r}; known roles: research, documentation, implementation, review, "
                    "security, ops, synthesis",
                )
            )
    text = doc.get("task")
    if "task" in doc:
        if not isinstance(text, str):
            out.append(PlanIssue(f"{where}.task", "must be a string"))
        else:
            size = len(text.encode("utf-8", "surrogatepass"))
            if size == 0:
                out.append(PlanIssue(f"{where}.task", "must not be empty (1 B to 32 KiB)"))
            elif size > AUTO_TASK_TEXT_MAX_BYTES:
                out.append(
                    PlanIssue(
                        f"{where}.task", f"is {size} bytes; the limit is {AUTO_TASK_TEXT_MAX_BYTES} bytes"
                    )
                )
            elif (problem := _text_problem(text)) is not None:
                out.append(PlanIssue(f"{where}.task", problem))
    deps = doc.get("dependencies")
    if "dependencies" in doc:
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            out.append(PlanIssue(f"{where}.dependencies", "must be a list of task IDs"))
        elif len(set(deps)) != len(deps):
            out.append(PlanIssue(f"{where}.dependencies", "lists a task more than once"))
    signals = _check_signals(doc["signals"], f"{where}.signals", out) if "signals" in doc else None
    criteria = None
    if "acceptance_criteria" in doc:
        criteria = _check_str_list(
            doc["acceptance_criteria"],
            f"{where}.acceptance_criteria",
            out,
            min_items=1,
            max_items=AUTO_ACCEPTANCE_CRITERIA_MAX,
            max_chars=AUTO_BRIEF_ITEM_MAX_CHARS,
        )
    for flag in ("delegate", "intentional_redundancy"):
        if flag in doc and not isinstance(doc[flag], bool):
            out.append(PlanIssue(f"{where}.{flag}", "must be true or false"))
    vendor = doc.get("vendor")
    if vendor is not None and vendor not in VENDORS:
        out.append(PlanIssue(f"{where}.vendor", f"must be one of {', '.join(VENDORS)}"))
    model = doc.get("model")
    if model is not None and (not isinstance(model, str) or not MODEL_RE.match(model)):
        out.append(PlanIssue(f"{where}.model", "must be a model ID from `ivoai auto` capabilities"))
    effort = doc.get("effort")
    if effort is not None and effort not in EFFORTS:
        out.append(PlanIssue(f"{where}.effort", f"must be one of {', '.join(EFFORTS)}"))
    if len(out) != before or signals is None or criteria is None:
        return None
    return PlanTask(
        id=str(tid),
        role=str(role).lower(),
        task=str(text),
        dependencies=tuple(deps or ()),
        signals=signals,
        acceptance_criteria=criteria,
        delegate=doc["delegate"],
        intentional_redundancy=doc.get("intentional_redundancy", False),
        vendor=vendor,
        model=model,
        effort=effort,
    )


def topological_order(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """Kahn's algorithm, ties in the mapping's order; None when there is a cycle."""
    indegree = {node: 0 for node in graph}
    for node, deps in graph.items():
        indegree[node] = sum(1 for d in deps if d in graph)
    order: list[str] = []
    ready = [n for n in graph if indegree[n] == 0]
    while ready:
        node = ready.pop(0)
        order.append(node)
        for other, deps in graph.items():
            if node in deps and other not in order:
                indegree[other] -= 1
                if indegree[other] == 0:
                    ready.append(other)
    return order if len(order) == len(graph) else None


def _cycle_members(graph: Mapping[str, Sequence[str]]) -> list[str]:
    """Nodes left when every node that can finish is removed: the cycles and what waits on them."""
    done: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node, deps in graph.items():
            if node not in done and all(d in done or d not in graph for d in deps):
                done.add(node)
                changed = True
    return [n for n in graph if n not in done]


def _check_weights_field(value: Any, out: list[PlanIssue]) -> Mapping[str, float]:
    if isinstance(value, str):
        if value in WEIGHT_PROFILES:
            return WEIGHT_PROFILES[value]
        out.append(
            PlanIssue("weights", f"unknown weight profile {value!r}; use default, quality or an object")
        )
    elif isinstance(value, dict):
        try:
            check_weights(value)
            return dict(value)
        except ValueError as exc:
            out.append(PlanIssue("weights", str(exc)))
    else:
        out.append(PlanIssue("weights", "must be a profile name or an object of five weights"))
    return WEIGHT_PROFILES["default"]


def validate_plan(doc: Any) -> tuple[Plan | None, list[PlanIssue]]:
    """Validate a plan document; (plan, []) when valid, else (None, every error found)."""
    out: list[PlanIssue] = []
    if not isinstance(doc, dict):
        return None, [PlanIssue("plan", "must be a JSON object with objective and tasks")]
    _unknown_fields(doc, PLAN_FIELDS, "", out)
    objective = doc.get("objective")
    if not isinstance(objective, str) or not objective.strip():
        out.append(PlanIssue("objective", "required: a non-empty string"))
    elif len(objective) > AUTO_BRIEF_OBJECTIVE_MAX_CHARS:
        out.append(
            PlanIssue("objective", f"exceeds {AUTO_BRIEF_OBJECTIVE_MAX_CHARS} characters ({len(objective)})")
        )
    elif (problem := _text_problem(objective)) is not None:
        out.append(PlanIssue("objective", problem))
    weights = _check_weights_field(doc["weights"], out) if "weights" in doc else WEIGHT_PROFILES["default"]
    raw_tasks = doc.get("tasks")
    if not isinstance(raw_tasks, list):
        out.append(PlanIssue("tasks", f"required: a list of 1-{AUTO_MAX_TASKS} tasks"))
        return None, out
    if not 1 <= len(raw_tasks) <= AUTO_MAX_TASKS:
        out.append(PlanIssue("tasks", f"must hold 1-{AUTO_MAX_TASKS} tasks (has {len(raw_tasks)})"))
    tasks = [_check_task(t, f"tasks[{i}]", out) for i, t in enumerate(raw_tasks)]
    _check_graph(raw_tasks, out)
    _check_duplicates(raw_tasks, out)
    if out or any(t is None for t in tasks):
        return None, out
    return Plan(objective=str(objective), tasks=tuple(t for t in tasks if t is not None), weights=weights), []


def _check_graph(raw_tasks: list[Any], out: list[PlanIssue]) -> None:
    ids: dict[str, int] = {}
    for i, t in enumerate(raw_tasks):
        tid = t.get("id") if isinstance(t, dict) else None
        if isinstance(tid, str):
            if tid in ids:
                out.append(
                    PlanIssue(f"tasks[{i}].id", f"duplicate task ID {tid!r} (first at tasks[{ids[tid]}])")
                )
            else:
                ids[tid] = i
    graph: dict[str, list[str]] = {}
    for i, t in enumerate(raw_tasks):
        if not isinstance(t, dict) or not isinstance(t.get("id"), str):
            continue
        deps = t.get("dependencies")
        if not isinstance(deps, list):
            continue
        good = []
        for j, dep in enumerate(deps):
            if not isinstance(dep, str):
                continue
            if dep == t["id"]:
                out.append(PlanIssue(f"tasks[{i}].dependencies[{j}]", "a task cannot depend on itself"))
            elif dep not in ids:
                out.append(PlanIssue(f"tasks[{i}].dependencies[{j}]", f"unknown task ID {dep[:64]!r}"))
            else:
                good.append(dep)
        graph.setdefault(t["id"], good)
    if topological_order(graph) is None:
        members = _cycle_members(graph)
        out.append(
            PlanIssue(
                f"tasks[{ids[members[0]]}].dependencies",
                f"dependency cycle among {', '.join(members)}; a plan must be a DAG",
            )
        )


def _check_duplicates(raw_tasks: list[Any], out: list[PlanIssue]) -> None:
    seen: dict[str, int] = {}
    for i, t in enumerate(raw_tasks):
        if not isinstance(t, dict) or not isinstance(t.get("task"), str) or not t["task"]:
            continue
        key = normalized_text(t["task"])
        if key in seen and t.get("intentional_redundancy") is not True:
            out.append(
                PlanIssue(
                    f"tasks[{i}].task",
                    f"duplicates tasks[{seen[key]}].task; set intentional_redundancy: true if intended",
                )
            )
        seen.setdefault(key, i)
