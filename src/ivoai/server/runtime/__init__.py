"""Running the server: start/stop and worker processes, the run file, status, the quickstart, the
background embedding, the local admin socket and the CLI's local operations (`gateway/` is the HTTP
edge these serve)."""
