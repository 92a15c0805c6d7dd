"""Every documented number, named once, with its unit in the name."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

# Local I/O
LOCK_TIMEOUT_SECONDS = 10.0  # long enough for a peer's atomic write, short enough for a CLI user
CONFIG_MAX_BYTES = 1 * MIB  # a config file larger than this is not a config file
SECRETS_MAX_BYTES = 1 * MIB
JSON_STATE_MAX_BYTES = 16 * MIB

# WorkingContext / ArtifactStore (seed 000)
ARTIFACT_MAX_BYTES = 16 * MIB
SESSION_STORE_MAX_BYTES = 64 * MIB
SESSION_STORE_MAX_OBJECTS = 256
GLOBAL_STORE_MAX_BYTES = 256 * MIB
GLOBAL_STORE_MAX_OBJECTS = 2048
ARTIFACT_TTL_DEFAULT_SECONDS = 24 * 3600
ARTIFACT_TTL_MAX_SECONDS = 7 * 24 * 3600
ARTIFACT_RANGE_MAX_BYTES = 1 * MIB
PROJECTION_BUDGET_LIGHT_BYTES = 4 * KIB
PROJECTION_BUDGET_BALANCED_BYTES = 8 * KIB
PROJECTION_BUDGET_STRONG_BYTES = 12 * KIB
PROJECTION_BUDGET_MAX_BYTES = 16 * KIB

# Knowledge router (seed 002)
ROUTER_REQUEST_MAX_BYTES = 4 * MIB
ROUTER_UPSTREAM_RESPONSE_MAX_BYTES = 16 * MIB
ROUTER_UPSTREAM_HEAD_MAX_BYTES = 64 * KIB  # status line and headers of one upstream answer
ROUTER_UPSTREAM_KEEPALIVE_SECONDS = 4.0  # idle reuse; below uvicorn's default 5 s keep-alive timeout
ROUTER_UPSTREAM_IDLE_CONNECTIONS = 16  # kept-alive connections per upstream
ROUTER_SOURCE_DEADLINE_SECONDS = 15.0
BREAKER_FAILURE_THRESHOLD = 2
BREAKER_OPEN_SECONDS = 30.0

# Enrollment and OAuth (seed 002)
ENROLLMENT_CODE_BYTES = 32  # 256 bits
ENROLLMENT_TTL_SECONDS = 10 * 60
OAUTH_CODE_TTL_SECONDS = 5 * 60
OAUTH_ACCESS_TTL_SECONDS = 3600
OAUTH_REFRESH_TTL_SECONDS = 30 * 24 * 3600
HTTP_BODY_MAX_BYTES = 4 * MIB

# Context ingestion (seed 002)
DOCUMENT_MAX_BYTES = 8 * MIB
CHUNK_MAX_CODEPOINTS = 1200
CHUNK_OVERLAP_CODEPOINTS = 150
CONNECTOR_MAX_DOCUMENTS = 10_000
CONNECTOR_MAX_BYTES = 256 * MIB
INGEST_RUN_MAX_CHUNKS = 250_000
SEARCH_MAX_RESULTS = 100
EMBEDDING_DIMENSIONS = 384
EMBEDDING_MAX_TOKENS = 512

# Memory (issue 5)
MEMORY_BODY_MAX_BYTES = 1 * MIB
MEMORY_QUERY_MAX_RESULTS = 100

# AUTO (seed 002)
AUTO_MAX_TASKS = 12
AUTO_WORKERS_DEFAULT = 2
AUTO_WORKERS_MAX = 3
AUTO_MAX_FAILOVERS = 2

# Subprocesses
PROBE_TIMEOUT_SECONDS = 15.0  # `--version` / auth-status probes of the official CLIs
TERM_GRACE_SECONDS = 5.0  # bounded TERM -> KILL sequence

# --- Foundation (issue 2): config, secrets, ownership, identity, doctor ---
SECRET_VALUE_MAX_BYTES = 64 * KIB  # a credential, not a document
SECRETS_MAX_ENTRIES = 1024
SECRET_ID_MAX_CHARS = 96
OWNERSHIP_MAX_ENTRIES = 4096
PROJECT_MARKER_MAX_BYTES = 64 * KIB
HOSTNAME_MAX_CHARS = 253  # RFC 1035 full name
CONFIG_VALUE_MAX_CHARS = 4096
DOCTOR_DIR_LISTING_MAX_ENTRIES = 200  # entries per ivoai root that doctor describes
REASON_MAX_CHARS = 240  # a health/fallback/activation reason is one bounded, redacted line

# --- Context service (issue 4) ---
CONTEXT_RECENT_MAX_RESULTS = 100
CONTEXT_QUERY_MAX_CHARS = 2000  # a query longer than this is a document, not a query
CONTEXT_BUDGET_MIN_BYTES = 256  # a result budget below this could not hold one useful snippet
CONTEXT_CONNECTOR_NAME_MAX_CHARS = 64
CONTEXT_CONNECTORS_MAX = 64
CONTEXT_WALK_MAX_DEPTH = 64  # bounds open directory descriptors during a no-follow walk
CONTEXT_BINARY_SNIFF_BYTES = 8 * KIB  # a NUL byte in this prefix marks a file as binary
CONTEXT_EMBED_BATCH_SIZE = 16  # chunks per embedder call
CONTEXT_INDEX_UPSERT_BATCH = 256
CONTEXT_INDEX_SEARCH_THREADS_MAX = 8  # Qdrant Edge search pool: one thread per usable CPU, at most this
CONTEXT_PREFETCH_MIN = 50  # candidates fetched from each of dense and lexical before fusion
CONTEXT_RRF_K = 60  # the constant of reciprocal rank fusion (Cormack et al.)
CONTEXT_HYBRID_DENSE_WEIGHT = 0.75  # hybrid = 0.75 dense + 0.25 lexical (min-max normalized scores)
CONTEXT_DENSE_FLOOR = 0.80  # relevance floor: e5 cosine below this only counts with a lexical match
GIT_LS_FILES_MAX_BYTES = 64 * MIB
GIT_TIMEOUT_SECONDS = 60.0
TEI_TIMEOUT_SECONDS = 120.0  # a CPU TEI batch of long passages can take this long
TEI_KEEPALIVE_CONNECTIONS = 4  # idle kept-alive connections to a remote embedding service
TEI_RESPONSE_MAX_BYTES = 64 * MIB
TEI_RESPONSE_HEAD_MAX_BYTES = 64 * KIB  # status line and headers of one embedding-service answer
TEI_API_KEY_MAX_BYTES = 4 * KIB
INGEST_LOCK_WAIT_SECONDS = 0.5  # a second ingest fails fast instead of queueing behind the first

# --- Memory service (issue 5) ---
MEMORY_NAME_MAX_CHARS = 64  # workspace / project names
MEMORY_PATH_MAX_BYTES = 512  # a normalized page path, UTF-8
MEMORY_PATH_COMPONENT_MAX_BYTES = 255  # one path component (a file name on export)
MEMORY_PATH_MAX_DEPTH = 16
MEMORY_TITLE_MAX_CHARS = 200
MEMORY_TAGS_MAX = 20
MEMORY_TAG_MAX_CHARS = 64  # also the bound of one entity and of `kind`
MEMORY_ENTITIES_MAX = 10
MEMORY_QUERY_MAX_CHARS = 2000
MEMORY_QUERY_MAX_TERMS = 32  # search terms kept from a query (the rest are ignored)
MEMORY_RECENT_MAX_RESULTS = 100
MEMORY_FEEDBACK_NOTE_MAX_CHARS = 1000
MEMORY_HOOK_EVENT_MAX_BYTES = 64 * KIB  # one hook event, JSON
MEMORY_HOOK_BATCH_MAX_EVENTS = 100
MEMORY_HOOK_TEXT_MAX_CHARS = 4000  # a prompt or message is cut (with a marker) beyond this
MEMORY_HOOK_FILES_MAX = 50  # files named by one hook event
MEMORY_SESSION_MAX_EVENTS = 2000  # events kept per session; later ones are counted, not stored
MEMORY_SESSION_HISTORY_MAX_VERSIONS = 20  # superseded versions kept for generated session pages
MEMORY_SEMANTIC_SCAN_MAX_PAGES = 20_000  # most recent pages per query scanned for semantic ranking
MEMORY_EMBED_MAX_CHARS = 2000  # of title + body embedded (the model reads 512 tokens)
MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS = 10.0  # a writer waits this long for another writer's transaction
MEMORY_VECTOR_CACHE_MAX_VECTORS = 100_000  # page vectors kept in memory per service (~150 MiB at 384-d)

# --- Agent launcher, compression, sessions (issue 8) ---
LAUNCH_KNOWLEDGE_SOURCES_MAX = 32  # `--knowledge-source` selectors per launch
LAUNCH_SELECTOR_MAX_CHARS = 128
PROBE_OUTPUT_MAX_BYTES = 64 * KIB  # `--version` / auth-status output kept from a probe
CAVEMAN_HEALTH_TIMEOUT_SECONDS = 10.0  # bounded wait for the proxy's /health/ready
CAVEMAN_HEALTH_POLL_SECONDS = 0.05  # first poll interval (doubles up to 0.25 s)
CAVEMAN_HEALTH_MAX_BYTES = 16 * KIB  # a health document larger than this is not one
CAVEMAN_VERSION_TIMEOUT_SECONDS = 5.0  # `caveman-proxy version --json`
CAVEMAN_BINARY_MAX_BYTES = 256 * MIB  # hashed in full for the pin check
HEADROOM_PROBE_TIMEOUT_SECONDS = 15.0  # `headroom --version` / `wrap --help` (a Python CLI: slow start)
SUPERVISOR_POLL_SECONDS = 0.5  # signal-wait timeout: bounds how late a TERM -> KILL escalation runs
SESSION_RECORD_DEFER_SECONDS = 0.1  # a client that ends sooner gets one (final) record write, not two
SESSION_RECORD_MAX_BYTES = 64 * KIB
SESSIONS_LIST_MAX = 1000  # session records listed; older ones are still kept
SESSION_ENDED_KEEP = 200  # ended records kept; older ended ones are pruned on launch
TELEMETRY_FILE_MAX_BYTES = 1 * MIB  # rotate the compression NDJSON log beyond this
TELEMETRY_ROTATIONS_KEPT = 3  # telemetry.ndjson.1 .. .3
TELEMETRY_EVENT_MAX_BYTES = 2 * KIB  # one event line
MONITOR_INTERVAL_SECONDS = 2.0  # `ivoai monitor --watch` refresh

# WorkingContext contracts, store internals and context governance (issue 3, helper "artifacts")
ARTIFACT_META_MAX_BYTES = 8 * KIB  # one object's meta.json; a larger one is corrupt, not read
ARTIFACT_OWNER_ID_MAX_CHARS = 128  # session / task / worker / association IDs
ARTIFACT_TYPE_MAX_CHARS = 64  # payload type token (`log`, `test_failure`, ...)
ARTIFACT_MEDIA_TYPE_MAX_CHARS = 128
ARTIFACT_IO_CHUNK_BYTES = 1 * MIB  # streaming write / hash block
ARTIFACT_SCAN_MAX_ANCHOR_HITS = 4096  # past this many anchor hits one pattern scans the whole payload
ARTIFACT_SCAN_PREFILTER_MIN_BYTES = 64 * KIB  # from this size Hyperscan first finds which forms occur at all
WORKER_SUMMARY_MAX_CHARS = 4000
WORKER_FINDINGS_MAX = 32
WORKER_FINDING_MAX_CHARS = 1000
WORKER_ERRORS_MAX = 16
WORKER_ERROR_MAX_CHARS = 2000
WORKER_REFS_MAX = 64
STATE_DELTA_ITEMS_MAX = 64  # per StateDelta list
STATE_DELTA_ITEM_MAX_CHARS = 1000
STABLE_PREFIX_MAX_BYTES = 256 * KIB  # core rules + instructions + tools + facts + skills
COMPACTION_WINDOW_TOKENS_DEFAULT = 200_000
COMPACTION_THRESHOLD_RATIO_DEFAULT = 0.8  # compact before a request estimated above 80 % of the window
COMPACTION_RECENT_RATIO_DEFAULT = 0.25  # complete recent turns kept, as a share of the window
COMPACTION_MIN_RECENT_TURNS = 2
COMPACTION_CATEGORY_MAX_ITEMS = 32  # per summary category (goals, approvals, ...): newest kept
COMPACTION_ITEM_MAX_CHARS = 500
TOKEN_ESTIMATE_BYTES_PER_TOKEN = 4  # offline estimate: UTF-8 bytes / 4, rounded up

# Connections and enrollment client (issue 7, router helper)
ENROLL_HTTP_TIMEOUT_SECONDS = 15.0  # discovery, readiness and the code exchange, each
ENROLL_DISCOVERY_MAX_BYTES = 64 * KIB  # the discovery document is a few hundred bytes
ENROLL_RESPONSE_MAX_BYTES = 64 * KIB  # readiness and exchange answers
ENROLL_MAX_SAME_ORIGIN_REDIRECTS = 5  # GETs follow same-origin redirects (trailing slash); never cross-origin
ENROLL_PROBE_TIMEOUT_SECONDS = 15.0  # post-enrollment context/memory probe, each

# Gateway, enrollment and OAuth (issue 6, gateway)
GATEWAY_DEFAULT_PORT = 7744
GATEWAY_DEFAULT_LISTEN = f"127.0.0.1:{GATEWAY_DEFAULT_PORT}"
REINGEST_INTERVAL_DEFAULT_SECONDS = 5 * 60
REINGEST_INTERVAL_MIN_SECONDS = 10
ENROLLMENT_TTL_MAX_SECONDS = 24 * 3600  # a code that lives a day is no longer "short-lived"
ENROLLMENT_MAX_OPEN_CODES = 1000  # pending (unconsumed, unexpired) codes kept in state.json
ENROLLMENT_MAX_CLIENTS = 10_000
ENROLL_BODY_MAX_BYTES = 4 * KIB  # {"code": "..."} is tiny
WEB_ACCESS_TTL_DEFAULT_SECONDS = 10 * 60
WEB_ACCESS_TTL_MAX_SECONDS = 24 * 3600
OAUTH_MAX_CLIENTS = 1000  # registered clients that completed a grant (unused ones: OAUTH_MAX_UNUSED_CLIENTS)
OAUTH_MAX_REDIRECT_URIS = 10
OAUTH_PENDING_TTL_SECONDS = 10 * 60  # an authorization request waiting on the consent page
OAUTH_PENDING_MAX = 5000  # live ones; beyond, the oldest is dropped (a new request is never refused)
OAUTH_CONSENT_MAX_ATTEMPTS = 5  # wrong activation codes per pending request before it is dropped
HTTP_HEADER_MAX_BYTES = 64 * KIB
HTTP_IDLE_TIMEOUT_SECONDS = 30.0  # keep-alive idle
HTTP_READ_TIMEOUT_SECONDS = 30.0  # between body chunks of one request
HTTP_HEADER_TIMEOUT_SECONDS = 30.0  # a request head must arrive within this of connect / the last response
HTTP_WRITE_TIMEOUT_SECONDS = 60.0  # one response chunk may wait this long for a slow reader
HTTP_HANDLER_TIMEOUT_SECONDS = 120.0  # a non-streaming request (enroll, hooks, OAuth) end to end
HTTP_MAX_CONCURRENCY = 1000  # connections + tasks before uvicorn answers 503
HOOK_BATCH_MAX_EVENTS = 500
SERVICE_RETRY_SECONDS = 30.0  # how often a failed service (memory, context) is re-opened on demand

# --- Web sign-in bounds (issue 13, "sec"): what unauthenticated callers can make the server store ---
OAUTH_REGISTRATION_MAX_BYTES = 4 * KIB  # one RFC 7591 registration body, and the metadata stored for it
OAUTH_REDIRECT_URI_MAX_CHARS = 512  # one registered redirect URI (ChatGPT's and Claude's are < 80)
OAUTH_CLIENT_NAME_MAX_CHARS = 200
OAUTH_METADATA_TEXT_MAX_CHARS = 512  # any other string member (client_uri, software_id, a contact, ...)
OAUTH_MAX_CONTACTS = 5
OAUTH_MAX_UNUSED_CLIENTS = 5000  # registrations that never completed a grant; the oldest is evicted beyond
OAUTH_UNUSED_CLIENT_TTL_SECONDS = 24 * 3600  # an unused registration is forgotten after a day
OAUTH_STATE_PARAM_MAX_CHARS = 1024  # the client's `state` at /authorize (stored with the pending request)
OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS = 10.0  # a writer waits this long for another process's transaction
OAUTH_LEGACY_STATE_MAX_BYTES = 64 * MIB  # a pre-SQLite state.json, read once to import it (flooded: ~20 MiB)
# Server operations: backup, restore, workers, logs (issue 19, serverops)
_GIB = 1024 * MIB
BACKUP_FORMAT_VERSION = 1  # archive layout version written by this ivoai; newer archives are refused
BACKUP_MAX_ENTRIES = 10_000  # members in one archive (a handful in practice: config, catalog, memory)
BACKUP_ENTRY_MAX_BYTES = 64 * _GIB  # one archived file (a memory or catalog database)
BACKUP_TOTAL_MAX_BYTES = 256 * _GIB  # all members together
BACKUP_MANIFEST_MAX_BYTES = 8 * MIB  # manifest.json (file list with hashes)
BACKUP_IO_CHUNK_BYTES = 1 * MIB  # streaming copy / hash block
BACKUP_MEMORY_SNAPSHOT_MAX_BYTES = 512 * MIB  # SQLite snapshots up to this size are taken in memory
BACKUP_FREE_SPACE_MARGIN_BYTES = 64 * MIB  # restore keeps this much free beyond the staged files
GATEWAY_STOP_TIMEOUT_SECONDS = 30.0  # restore --stop-gateway: SIGTERM to exit
GATEWAY_START_TIMEOUT_SECONDS = 60.0  # restore --stop-gateway: restarted gateway answers /health
GATEWAY_MAX_WORKERS = 32  # `server start --workers N`
TLS_PEM_MAX_BYTES = 1 * MIB  # a certificate chain or key copied by `server setup --tls-cert/--tls-key`
GATEWAY_LOG_MAX_BYTES = 10 * MIB  # foreground log file before it rotates
GATEWAY_LOG_BACKUPS = 3  # rotated log files kept (gateway.log.1 .. .3)
LOG_FOLLOW_POLL_SECONDS = 0.5  # `server logs --follow` on the log file
# --- Memory hooks, user MCP servers in sessions, doctor for servers (issue 18) ---
MEMORY_HOOK_STDIN_MAX_BYTES = 1 * MIB  # host payload kept by the hook runner; the rest is drained, marked
MEMORY_HOOK_BUDGET_SECONDS = 5.0  # hard wall-clock budget of one hook process (then exit 0, whatever)
MEMORY_HOOK_SESSION_END_BUDGET_SECONDS = 2.5  # SessionEnd: the hosts give it the least time
MEMORY_HOOK_HOST_TIMEOUT_SECONDS = 10  # in the host's hook definition: the host's own backstop
MEMORY_HOOK_SESSION_END_HOST_TIMEOUT_SECONDS = 3  # Codex clamps SessionEnd hook timeouts to 3 s
MEMORY_HOOK_SPOOL_MAX_BYTES = 16 * MIB  # private spool of unsent events; oldest segments evicted beyond
MEMORY_HOOK_SPOOL_SEGMENT_BYTES = 1 * MIB  # the spool's unit of sealing, sending and eviction
MEMORY_HOOK_FLUSH_BATCH_MAX_BYTES = 1 * MIB  # one POST to the hook route (the gateway takes 4 MiB)
MEMORY_HOOK_FLUSH_HTTP_TIMEOUT_SECONDS = 15.0  # connect / read of one batch POST
MEMORY_HOOK_FLUSH_RUN_MAX_SECONDS = 60.0  # a background flusher retries (with backoff) at most this long
MEMORY_HOOK_FLUSH_BACKOFF_MAX_SECONDS = 60.0  # after failures, new flushers wait at most this long
MEMORY_HOOK_FLUSH_LOCK_WAIT_SECONDS = 30.0  # `ivoai memory hooks flush` waits this long for a running flusher
MEMORY_HOOK_VALIDATE_TIMEOUT_SECONDS = 20.0  # asking the real `codex app-server` to list hooks
MEMORY_HOOK_CONFIG_MAX_BYTES = 4 * MIB  # a host configuration file ivoai edits (settings.json, hooks.json)
LAUNCH_USER_MCP_MAX = 32  # `--mcp NAME` values per launch
DOCTOR_SERVER_PROBE_DEADLINE_SECONDS = 5.0  # all enrolled servers are probed in parallel within this
DOCTOR_SERVER_PROBE_MAX_PARALLEL = 16
DOCTOR_SERVER_CACHE_SECONDS = 60.0  # a server probe result is reused this long
DOCTOR_SERVER_RESPONSE_MAX_BYTES = 64 * KIB
# --- Skill control plane (issue 20) ---
SKILL_FRONTMATTER_MAX_BYTES = 16 * KIB  # SKILL.md front matter; the body after it is never read
SKILL_FRONTMATTER_READ_BLOCK_BYTES = 4 * KIB  # read size while looking for the closing `---`
SKILL_FRONTMATTER_MAX_KEYS = 64  # top-level keys (and keys under `metadata`)
SKILL_FRONTMATTER_MAX_DEPTH = 8  # indentation levels of an (unknown) key's block before it is refused
SKILL_NAME_MAX_CHARS = 64  # Agent Skills spec and Codex's loader
SKILL_DESCRIPTION_MAX_CHARS = 1024  # Codex's loader refuses longer
SKILL_VALUE_MAX_CHARS = 256  # version, role, exclusive-role and every list item
SKILL_LIST_MAX_ITEMS = 64  # dependencies, capabilities, roles, ... per skill
SKILL_TREE_MAX_FILES = 4096  # files in one staged source (a tree with more is refused, not truncated)
SKILL_TREE_MAX_BYTES = 64 * MIB  # all files of one source together
SKILL_FILE_MAX_BYTES = 8 * MIB  # one file of a skill
SKILL_TREE_MAX_DEPTH = 16  # directory levels below a source root
SKILL_PATH_MAX_BYTES = 1024  # one relative path inside a source, UTF-8
SKILL_SOURCE_MAX_SKILLS = 512  # SKILL.md directories in one source
SKILL_ARCHIVE_MAX_BYTES = 64 * MIB  # a downloaded or local archive before it is opened
SKILL_ARCHIVE_MAX_MEMBERS = 8192  # entries of an archive, directories included
SKILL_FETCH_TIMEOUT_SECONDS = 60.0  # one archive download, connect to last byte
SKILL_FETCH_MAX_REDIRECTS = 5  # https redirects (release assets move to a CDN); integrity is the SHA-256
SKILL_GIT_TIMEOUT_SECONDS = 120.0  # one git command (fetch of a pinned commit, ls-tree, cat-file)
SKILL_GIT_OUTPUT_MAX_BYTES = 72 * MIB  # `git ls-tree` / `git cat-file --batch` of one commit (tree + headers)
SKILLS_REGISTRY_MAX_SKILLS = 2048  # entries in registry.json
SKILL_QUARANTINE_RECORDS_KEPT = 32  # source-level refusals remembered in registry.json (newest kept)
SKILL_VERSIONS_KEPT = 8  # version records per skill: active, previous, staged and quarantined (newest kept)
SKILLS_PER_SESSION_MAX = 16  # skills attached to one client session or worker, dependencies included
# Components: pinned supply chain, setup, update, rollback, uninstall (issue 17)
COMPONENT_DOWNLOAD_MAX_BYTES = 512 * MIB  # one archive or raw binary; a pinned asset also has its own cap
COMPONENT_DOWNLOAD_TIMEOUT_SECONDS = 600.0  # one download, end to end
COMPONENT_DOWNLOAD_STALL_SECONDS = 30.0  # no byte for this long: the download is abandoned
COMPONENT_EXTRACT_MAX_BYTES = 1024 * MIB  # uncompressed total of one archive (decompression bombs)
COMPONENT_EXTRACT_MAX_ENTRIES = 10_000  # members of one archive
COMPONENT_INSTALL_TIMEOUT_SECONDS = 1800.0  # one `npm ci` / `pip install` / venv creation
COMPONENT_INSTALL_LOG_MAX_BYTES = 1 * MIB  # installer output kept (the tail is shown on failure)
COMPONENT_PROBE_TIMEOUT_SECONDS = 30.0  # compatibility probe (`--version`) of a staged component
COMPONENT_LOCK_MAX_BYTES = 4 * MIB  # one shipped npm/pip lock file
COMPONENT_STATE_MAX_BYTES = 1 * MIB  # components.json, the update journal
UPDATE_SNAPSHOT_MAX_BYTES = 256 * MIB  # all files one update snapshots (state is small; sessions dominate)
UNINSTALL_CONFIG_MAX_BYTES = 16 * MIB  # a third-party config file ivoai edits to remove its own entries
# --- AUTO part 1 (issue 15): scheduler, quota ledger, workers, orchestrator MCP ---
AUTO_TASK_TEXT_MAX_BYTES = 32 * KIB  # one task's instructions, UTF-8
AUTO_TASK_ID_MAX_CHARS = 64
AUTO_ACCEPTANCE_CRITERIA_MAX = 64  # per task
AUTO_PLAN_MAX_BYTES = 512 * KIB  # a whole plan document (12 tasks x 32 KiB plus structure)
AUTO_PROMPT_MAX_BYTES = 128 * KIB  # prompt gate input
AUTO_BRIEF_MAX_BYTES = 64 * KIB  # SharedContextBrief, serialized
AUTO_BRIEF_OBJECTIVE_MAX_CHARS = 4096
AUTO_BRIEF_LIST_MAX_ITEMS = 64
AUTO_BRIEF_ITEM_MAX_CHARS = 1024
AUTO_ESCALATION_REASON_MIN_CHARS = 3
AUTO_ESCALATION_REASON_MAX_CHARS = 1024
AUTO_WAIT_MIN_SECONDS = 1
AUTO_WAIT_MAX_SECONDS = 300
AUTO_WORKER_RESULT_MAX_BYTES = 64 * KIB  # the bounded report handed to the primary
AUTO_WORKER_OUTPUT_MAX_BYTES = 1 * MIB  # a worker's own final result (seed: worker result <= 1 MiB)
AUTO_WORKER_EVENTS_MAX_BYTES = 16 * MIB  # the JSONL event stream kept as evidence (= ARTIFACT_MAX_BYTES)
AUTO_WORKER_LINE_MAX_BYTES = 4 * MIB  # one JSONL event line parsed; longer lines are kept, not parsed
AUTO_WORKER_TIMEOUT_DEFAULT_SECONDS = 20 * 60  # wall clock per worker
AUTO_WORKER_TIMEOUT_MAX_SECONDS = 2 * 3600
AUTO_WORKER_TURNS_DEFAULT = 40  # model turns (Claude) / turns + tool calls (Codex) per worker
AUTO_WORKER_STDERR_MAX_BYTES = 256 * KIB
AUTO_WORKER_TERM_GRACE_SECONDS = 3.0  # cancellation: TERM to the worker's group, then KILL
AUTO_GIT_STATUS_TIMEOUT_SECONDS = 30.0
AUTO_GIT_STATUS_MAX_BYTES = 4 * MIB
AUTO_FUSE_CONCURRENT_MAX = 6  # worker launches running at once, user-wide (two sessions at the cap)
AUTO_FUSE_LAUNCHES_PER_HOUR = 60  # user-wide: a runaway loop stops here
AUTO_FUSE_BREAKER_SECONDS = 60 * 60  # after a confirmed hard limit, no launch on that vendor
QUOTA_CACHE_DEFAULT_SECONDS = 45
QUOTA_CACHE_MIN_SECONDS = 30
QUOTA_CACHE_MAX_SECONDS = 300
QUOTA_LEDGER_MAX_BYTES = 1 * MIB
QUOTA_PROBE_TIMEOUT_SECONDS = 15.0  # `codex app-server`: start, handshake and the reads
QUOTA_STATUSLINE_MAX_BYTES = 64 * KIB  # one statusline payload from Claude
QUOTA_STATUSLINE_USER_TIMEOUT_SECONDS = 5.0  # the user's own statusline command
QUOTA_STATUSLINE_OUTPUT_MAX_BYTES = 16 * KIB
QUOTA_CONSERVE_THRESHOLD_PERCENT = 10  # remaining at or below this asks before routing on (issue 16)
CATALOGUE_CACHE_MAX_BYTES = 1 * MIB
CATALOGUE_MODELS_MAX = 200
AUTO_STATE_MAX_BYTES = 1 * MIB  # a session's plan metadata file
AUTO_RESULT_CONTEXT_WINDOW_TOKENS = 200_000  # primary's window assumed for result compaction

# --- AUTO part 2 (issue 16): supervisor, failover, checkpoints, resume, Ruflo gate ---
AUTO_CHECKPOINT_MAX_BYTES = 32 * KIB  # one checkpoint, serialized
AUTO_CHECKPOINT_ITEMS_MAX = 64  # per list field of a checkpoint
AUTO_CHECKPOINT_ITEM_MAX_CHARS = 1024
AUTO_CHECKPOINT_REFS_MAX = 32  # artifact refs in one checkpoint
AUTO_HANDOFF_BRIEF_MAX_BYTES = 8 * KIB  # the brief the alternate (or a new conversation) receives
AUTO_WORKTREE_TIMEOUT_SECONDS = 5.0  # each git call of the bounded work-tree summary
AUTO_WORKTREE_MAX_BYTES = 1 * MIB  # output read from one git call of the summary
AUTO_WORKTREE_FILES_MAX = 200  # changed file names kept in a summary
AUTO_WORKTREE_STAT_LINES_MAX = 40  # diff --stat lines kept in a summary
AUTO_SUPERVISOR_POLL_SECONDS = 0.2  # how often the supervisor looks at the primary's signals
AUTO_SIGNAL_LINE_MAX_BYTES = 256 * KIB  # one line read from a primary's signal file or rollout
AUTO_SIGNAL_READ_MAX_BYTES = 4 * MIB  # read from a signal source per poll (the rest next poll)
AUTO_HOOK_PAYLOAD_MAX_BYTES = 64 * KIB  # one hook payload Claude pipes to ivoai's hook command
AUTO_PRIMARY_TERM_GRACE_SECONDS = 3.0  # failover: TERM to the primary's tree, then KILL
AUTO_RESUME_WINDOWS_DEFAULT = 3  # auto-resume after reset: windows per session
AUTO_RESUME_WINDOWS_MAX = 10
AUTO_IMPORT_TIMEOUT_SECONDS = 30.0  # Claude -> Codex transcript import over `codex app-server`
RUFLO_COMMAND_TIMEOUT_SECONDS = 30.0  # one `ruflo` command
RUFLO_OUTPUT_MAX_BYTES = 4 * MIB  # one `ruflo` command's output (it prints its tool catalogue)
# --- Instant-on indexing (issue 14): two-phase ingest, vector cache, lexical-only files ---
CONTEXT_LEXICAL_BATCH_CHUNKS = 512  # phase 1: chunks written (sparse only) per catalog commit
CONTEXT_DENSE_BATCH_CHUNKS = 16  # phase 2: chunks per embedder call and commit (one foreground yield)
CONTEXT_VECTOR_CACHE_MAX_ENTRIES = 200_000  # content-hash vector cache (~1.6 KB each; LRU beyond)
CONTEXT_LONG_LINE_CHARS = 1000  # a line this long is machine-made (minified, data, base64)
CONTEXT_LONG_LINE_SHARE = 0.5  # ... when such lines hold more than this share of the text
CONTEXT_LONG_LINE_SPACE_SHARE = 0.08  # ... and are under this share whitespace (prose is ~15%)
CONTEXT_MIN_WHITESPACE_SHARE = 0.03  # below this share of whitespace a text is data, not prose or code
CONTEXT_SHAPE_CHECK_MIN_CHARS = 2048  # shorter texts are never judged machine-made by shape
CONTEXT_LEXICAL_ONLY_RANK_FACTOR = 0.5  # lockfiles and generated text rank below hand-written text
CONTEXT_PROJECT_PRIOR_WEIGHT = 0.6  # project questions: score = 0.4 fused + 0.6 README/docs prior
CONTEXT_EMBED_YIELD_MAX_SECONDS = 1.0  # background embedding waits at most this for searches to end
CONTEXT_BACKGROUND_POLL_SECONDS = 5.0  # a gateway looks for unembedded chunks/pages this often
CONTEXT_BACKGROUND_RETRY_SECONDS = 30.0  # after a failed background batch (embedder or index down)
CONTEXT_EMBED_WORKER_NICE = 19  # the gateway's embedding process runs at the lowest CPU priority
CONTEXT_EMBED_WORKER_TIMEOUT_SECONDS = 600.0  # one batch in the embedding process (shared slow cores)
CONTEXT_EMBED_WORKER_MAX_BYTES = 64 * MIB  # one message to or from the embedding process
ADMIN_SOCKET_REQUEST_TIMEOUT_SECONDS = 120.0  # the CLI's calls to a running gateway's admin socket
ADMIN_SOCKET_BODY_MAX_BYTES = 64 * KIB  # admin requests are a query or a connector name
MEMORY_CLI_BACKFILL_PAGES = 64  # `memory write` without a server also embeds up to this many older pages
INGEST_PROGRESS_LINE_SECONDS = 5.0  # plain progress lines (no terminal) at most this often
