/**
 * The Worker's bindings (wrangler.toml, secrets), shared by the entry (index.ts), the Hono app and the
 * session Durable Object.
 */
import type { Sandbox } from "@cloudflare/sandbox";

/**
 * The binding a Worker configures to run jobs in Cloudflare's Sandbox SDK (a Durable Object namespace of `Sandbox`).
 */
export interface SandboxBinding {
  readonly SANDBOX?: DurableObjectNamespace<Sandbox>;
}

export interface Env extends SandboxBinding {
  readonly SESSIONS: DurableObjectNamespace;
  /** One DirectoryObject per tenant: the tenant's sessions (GET /v1/sessions). */
  readonly DIRECTORY: DurableObjectNamespace;
  /** One LimitsObject per tenant: its limits and the counts they are checked against (limits/object.ts). */
  readonly LIMITS: DurableObjectNamespace;
  /** `[version_metadata]`: which deployed version runs (absent in configurations without the binding). */
  readonly CF_VERSION_METADATA?: WorkerVersionMetadata;
  /** HS256 key of the API's bearer tokens (a wrangler secret; `.dev.vars` in development). */
  readonly JWT_SECRET?: string;
  /**
   * The key JWT_SECRET had before a rotation (optional): tokens it signed still verify, nothing is signed with it
   * (docs/operations.md "Rotating JWT_SECRET").
   */
  readonly JWT_SECRET_PREVIOUS?: string;
  /** Master secret the per-tenant webhook secrets are derived from (a wrangler secret). */
  readonly WEBHOOK_MASTER_SECRET?: string;
  /**
   * Key the stored secrets (inbound endpoints' signing secrets) are sealed with, at least 32 characters
   * (a wrangler secret; src/worker/crypto/sealed-secrets.ts). `SECRETS_SEALING_KEY_PREVIOUS` still opens what the
   * key before it sealed (rotation).
   */
  readonly SECRETS_SEALING_KEY?: string;
  readonly SECRETS_SEALING_KEY_PREVIOUS?: string;
  /**
   * Key the erasure records' user hashes are made with, at least 32 characters, never rotated (a wrangler secret;
   * src/worker/directory/subject-hash.ts). Without it every route but erase is served (erase answers 500 `misconfigured`).
   */
  readonly SUBJECT_HASH_KEY?: string;
  /**
   * With a key set, that pi-ai provider is registered next to the built-in `echo` model. These two are
   * examples: every catalogue provider's secret (src/models/providers.ts, docs/models.md) is read by name.
   */
  readonly ANTHROPIC_API_KEY?: string;
  readonly OPENAI_API_KEY?: string;
  /** Custom OpenAI-/Anthropic-compatible endpoints: a JSON array (a string in .dev.vars, or a wrangler var). */
  readonly MODEL_PROVIDERS?: string | readonly unknown[];
  /** The model a session gets when its PUT names none (default `echo`). */
  readonly DEFAULT_MODEL?: string;
  /**
   * The generation retry policy (src/worker/platform/retry-config.ts, docs/operations.md "Configuration and secrets").
   */
  readonly MODEL_RETRY_ATTEMPTS?: string | number;
  readonly MODEL_RETRY_BASE_MS?: string | number;
  readonly MODEL_RETRY_MAX_MS?: string | number;
  readonly MODEL_RETRY_JITTER?: string | number;
  readonly MODEL_RETRY_HONOUR_HINTS?: string | boolean;
  /** A Durable Object binding to `@cloudflare/sandbox`'s `Sandbox` class: jobs run there (docs/jobs.md). */
  readonly SANDBOX?: SandboxBinding["SANDBOX"];
  /**
   * `development` (`[env.dev]`: `npm start`, the tests), `staging` or `production` (wrangler.toml vars per
   * environment). Unset means production: only `development` relaxes anything (isDevelopment).
   */
  readonly ENVIRONMENT?: string;
  /**
   * Origins browsers may call from, comma-separated (`https://app.example.com,http://localhost:*`). Unset:
   * development allows `http://localhost:*` and `http://127.0.0.1:*`; other environments allow none.
   */
  readonly CORS_ORIGINS?: string;
  /** Longest lifetime (exp - iat) a bearer token may have, seconds (default 86400). */
  readonly TOKEN_MAX_LIFETIME_SECONDS?: string;
  /** Default lifetime of a watch token, seconds (default 600). */
  readonly WATCH_TOKEN_LIFETIME_SECONDS?: string;
  /**
   * Events out (src/worker/outbox/sender.ts, docs/operations.md): how long a delivery is retried, ms (default 24 h).
   */
  readonly WEBHOOK_RETRY_WINDOW_MS?: string | number;
  /** How long an endpoint may fail before it is disabled, ms (default 24 h). */
  readonly WEBHOOK_DISABLE_AFTER_MS?: string | number;
  /** How long done and dead deliveries (and their events) are kept, ms (default 7 days). */
  readonly OUTBOX_RETENTION_MS?: string | number;
  /**
   * Traces out over OTLP/HTTP JSON (src/worker/platform/otlp.ts, docs/operations.md "Stats and traces"): the
   * collector's base URL (spans go to `{base}/v1/traces`) or the full traces URL, its headers
   * (`key=value,...`, a secret when it holds an API key) and the resource's `service.name`.
   */
  readonly OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  readonly OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  readonly OTEL_EXPORTER_OTLP_HEADERS?: string;
  readonly OTEL_SERVICE_NAME?: string;
  /** `info` (default): one JSON log line per request and task invocation; `quiet`: none (tests). */
  readonly LOG_LEVEL?: string;
}

/**
 * The session object's name in `SESSIONS`: tenant-scoped, so another tenant's token addresses a different object.
 * Here, with the binding it names, for every room that addresses sessions (the HTTP routes, identity, and the
 * directory's erasures).
 */
export function sessionObjectName(tenant: string, session: string): string {
  return `${tenant}:${session}`;
}

/**
 * Whether a deployment is development (`ENVIRONMENT=development`, wrangler.toml's `[env.dev]`): only there are
 * localhost CORS and plain `http:` tool, MCP, webhook and key URLs allowed. Unset, or any other value, is production.
 */
export function isDevelopment(environment: string | undefined): boolean {
  return environment === "development";
}
