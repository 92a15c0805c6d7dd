"""Context (RAG) service: connectors, filter, normalize, chunker, embeddings, index, catalog, ingest."""
