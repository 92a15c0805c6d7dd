"""ivoai: launch official coding-agent CLIs with memory, context and evidence; serve RAG and memory."""

__version__ = "0.1.0"

__all__ = ["__version__"]
