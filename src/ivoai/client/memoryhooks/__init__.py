"""Fail-safe memory hooks: capture agent lifecycle events, spool them privately, flush them to memory.

Import-light on purpose: `ivoai memory hook EVENT` runs once per host event (session start, prompt,
tool use, stop, compaction) and must cost little more than starting the interpreter. Modules:

- `runner`: the hook process (bounded stdin, capture, spool append, flusher spawn; always exit 0);
- `capture`: host payload -> hook event (sanitized, truncated, redacted, project hints);
- `project`: the repo-root project strategy on the client side (git common dir of the checkout);
- `spool`: the private bounded spool (segments, flock, oldest-first eviction, torn-line tolerance);
- `flusher`: sends spooled events in batches to the memory hook route (router or direct), idempotently;
- `state`: flusher/status bookkeeping (last sent, last error, backoff);
- `wiring`: session-scoped hook wiring for `ivoai codex|claude|auto`;
- `install`, `jsonedit`: the managed installation in the hosts' own configuration files;
- `hosts`: what each host supports (events, configuration files, validation with the real binary).

See docs/hooks.md.
"""
