"""Context governance (seed 001): stable prefix, deterministic compaction, large-output previews, metrics.

Model-visible context stays bounded and byte-stable; complete evidence stays local in the
ArtifactStore. See docs/working-context.md.
"""

from ivoai.client.governance._compaction import (
    CATEGORIES,
    DEFAULT_POLICY,
    Compaction,
    CompactionPolicy,
    ContextGuard,
    SessionState,
    StrategyReport,
    Turn,
    compare_context_strategies,
    estimate_tokens,
    protect_context,
    render_summary,
)
from ivoai.client.governance._metrics import ArtifactMetrics, ContextMetrics, PromptCacheMetrics, RunMetrics
from ivoai.client.governance._prefix import SECTION_ORDER, StablePrefix, ToolSpec, build_stable_prefix
from ivoai.client.governance._preview import LargeOutputPreview, import_tool_output, preview_large_output

__all__ = [
    "ArtifactMetrics",
    "CATEGORIES",
    "Compaction",
    "CompactionPolicy",
    "ContextGuard",
    "ContextMetrics",
    "DEFAULT_POLICY",
    "LargeOutputPreview",
    "PromptCacheMetrics",
    "RunMetrics",
    "SECTION_ORDER",
    "SessionState",
    "StablePrefix",
    "StrategyReport",
    "ToolSpec",
    "Turn",
    "build_stable_prefix",
    "compare_context_strategies",
    "estimate_tokens",
    "import_tool_output",
    "preview_large_output",
    "protect_context",
    "render_summary",
]
