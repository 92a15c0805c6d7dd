"""The prompt gate (AUTO.md): is an objective specific enough to plan and delegate? Pure, no I/O.

An objective is `ready` when it has an action verb, names a deliverable and states observable
acceptance criteria, and contains none of the vague phrases below; otherwise it is
`waiting_for_refinement` with what is missing and a question per gap, so the primary can ask the
user instead of guessing. English and Portuguese keywords. The gate is deterministic keyword
matching, deliberately simple and explainable: it never calls a model.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from ivoai.common.limits import AUTO_PROMPT_MAX_BYTES

GateState = Literal["ready", "waiting_for_refinement"]

ACTION_VERBS = frozenset(
    {
        # English
        "add",
        "analyse",
        "analyze",
        "audit",
        "build",
        "change",
        "check",
        "clean",
        "compare",
        "convert",
        "create",
        "debug",
        "delete",
        "deploy",
        "design",
        "document",
        "evaluate",
        "explain",
        "extract",
        "find",
        "fix",
        "generate",
        "implement",
        "improve",
        "investigate",
        "migrate",
        "measure",
        "move",
        "optimise",
        "optimize",
        "port",
        "profile",
        "refactor",
        "remove",
        "rename",
        "replace",
        "research",
        "review",
        "rewrite",
        "run",
        "scan",
        "secure",
        "split",
        "summarise",
        "summarize",
        "test",
        "translate",
        "update",
        "upgrade",
        "validate",
        "verify",
        "write",
        # Portuguese
        "adicionar",
        "adicione",
        "analisar",
        "analise",
        "atualizar",
        "atualize",
        "auditar",
        "avaliar",
        "avalie",
        "comparar",
        "construir",
        "converter",
        "corrigir",
        "corrija",
        "criar",
        "crie",
        "depurar",
        "documentar",
        "documente",
        "escrever",
        "escreva",
        "explicar",
        "explique",
        "extrair",
        "gerar",
        "gere",
        "implementar",
        "implemente",
        "investigar",
        "investigue",
        "medir",
        "meça",
        "migrar",
        "migre",
        "mover",
        "otimizar",
        "otimize",
        "pesquisar",
        "pesquise",
        "refatorar",
        "refatore",
        "remover",
        "remova",
        "renomear",
        "renomeie",
        "revisar",
        "revise",
        "substituir",
        "substitua",
        "testar",
        "teste",
        "traduzir",
        "traduza",
        "validar",
        "valide",
        "verificar",
        "verifique",
    }
)
DELIVERABLE_WORDS = frozenset(
    {
        # English
        "api",
        "benchmark",
        "branch",
        "change",
        "changelog",
        "class",
        "cli",
        "command",
        "commit",
        "config",
        "diff",
        "doc",
        "docs",
        "document",
        "documentation",
        "endpoint",
        "feature",
        "file",
        "files",
        "fix",
        "function",
        "handler",
        "list",
        "method",
        "migration",
        "module",
        "page",
        "patch",
        "plan",
        "pr",
        "report",
        "schema",
        "script",
        "section",
        "summary",
        "table",
        "test",
        "tests",
        "tool",
        # Portuguese
        "arquivo",
        "arquivos",
        "classe",
        "comando",
        "documentação",
        "documento",
        "função",
        "funções",
        "lista",
        "migração",
        "módulo",
        "página",
        "plano",
        "relatório",
        "resumo",
        "seção",
        "tabela",
        "teste",
        "testes",
    }
)
ACCEPTANCE_MARKERS = (
    # English
    "acceptance",
    "assert",
    "done when",
    "expect",
    "fails",
    "must",
    "pass",
    "passes",
    "return",
    "returns",
    "should",
    "so that",
    "succeed",
    "until",
    "verify that",
    "without error",
    "exit code",
    # Portuguese
    "critério",
    "criterio",
    "deve",
    "devem",
    "passa",
    "passar",
    "passem",
    "retorna",
    "retornar",
    "sem erro",
    "até que",
    "ate que",
    "de modo que",
    "pronto quando",
)
VAGUE_PHRASES = (
    # English
    "make it better",
    "make it nicer",
    "improve things",
    "improve everything",
    "fix everything",
    "fix stuff",
    "do something",
    "do the needful",
    "whatever you think",
    "clean up everything",
    "make it work",
    "etc.",
    "and so on",
    "something like that",
    # Portuguese
    "melhorar tudo",
    "melhore tudo",
    "deixar melhor",
    "deixe melhor",
    "arrumar tudo",
    "arrume tudo",
    "corrigir tudo",
    "corrija tudo",
    "fazer alguma coisa",
    "faça alguma coisa",
    "qualquer coisa",
    "o que achar melhor",
    "e assim por diante",
    "algo assim",
)
_WORD_RE = re.compile(r"[\w'-]+", re.UNICODE)

QUESTIONS = {
    "action_verb": "What should be done? Start with an action (fix, add, review, document, …).",
    "deliverable": "What is the deliverable (a file, function, test, report, PR, …)?",
    "acceptance_criteria": "How will we know it is done? State observable criteria (tests pass, command "
    "returns …, report lists …).",
    "vague": "Replace the vague phrase(s) with a concrete outcome.",
}


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict with every gap it found."""

    state: GateState
    missing: tuple[str, ...] = ()
    vague_phrases: tuple[str, ...] = ()
    questions: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        """JSON form for the MCP tool and the CLI."""
        return {
            "state": self.state,
            "missing": list(self.missing),
            "vague_phrases": list(self.vague_phrases),
            "questions": list(self.questions),
        }


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def check_prompt(
    objective: str, *, deliverable: str | None = None, acceptance_criteria: tuple[str, ...] = ()
) -> GateResult:
    """Gate an objective; an explicit deliverable or criteria list satisfies those checks.

    Raises:
        ValueError: the objective is empty or larger than AUTO_PROMPT_MAX_BYTES.
    """
    size = len(objective.encode("utf-8", "surrogatepass"))
    if not objective.strip():
        raise ValueError("objective must not be empty")
    if size > AUTO_PROMPT_MAX_BYTES:
        raise ValueError(f"objective is {size} bytes; the limit is {AUTO_PROMPT_MAX_BYTES} bytes")
    folded = _fold(objective)
    words = {w.strip("'-") for w in _WORD_RE.findall(folded)}
    missing: list[str] = []
    if not words & ACTION_VERBS:
        missing.append("action_verb")
    if (
        not (deliverable and deliverable.strip())
        and not words & DELIVERABLE_WORDS
        and not _names_a_path(objective)
    ):
        missing.append("deliverable")
    has_criteria = any(c.strip() for c in acceptance_criteria) or any(m in folded for m in ACCEPTANCE_MARKERS)
    if not has_criteria:
        missing.append("acceptance_criteria")
    vague = tuple(p for p in VAGUE_PHRASES if p in folded)
    questions = [QUESTIONS[m] for m in missing] + ([QUESTIONS["vague"]] if vague else [])
    state: GateState = "ready" if not missing and not vague else "waiting_for_refinement"
    return GateResult(state, tuple(missing), vague, tuple(questions))


def _names_a_path(text: str) -> bool:
    """A file path or module name (`src/x.py`, `README.md`) is a deliverable too."""
    return bool(
        re.search(r"[\w-]+(/[\w.-]+)+|\b[\w-]+\.(py|md|ts|js|go|rs|toml|json|yaml|yml|sh|txt)\b", text)
    )
