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
OAUTH_MAX_CLIENTS = 1000  # dynamically registered clients
OAUTH_MAX_REDIRECT_URIS = 10
OAUTH_PENDING_TTL_SECONDS = 10 * 60  # an authorization request waiting on the consent page
OAUTH_PENDING_MAX = 1000
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
