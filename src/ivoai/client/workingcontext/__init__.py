"""WorkingContext: the private ArtifactStore, refs, WorkerResult, projector, GC."""
