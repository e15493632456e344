/**
 * The Worker's bindings (wrangler.toml, secrets), shared by the entry (index.ts), the Hono app and the
 * session Durable Object.
 */
import type { SandboxBinding } from "./sandbox-env.js";

export interface Env extends SandboxBinding {
  readonly SESSIONS: DurableObjectNamespace;
  /** One DirectoryObject per tenant: the tenant's sessions (GET /v1/sessions). */
  readonly DIRECTORY: DurableObjectNamespace;
  /** `[version_metadata]`: which deployed version runs (absent in configurations without the binding). */
  readonly CF_VERSION_METADATA?: WorkerVersionMetadata;
  /** HS256 key of the API's bearer tokens (a wrangler secret; `.dev.vars` in development). */
  readonly JWT_SECRET?: string;
  /** Master secret the per-tenant webhook secrets are derived from (a wrangler secret). */
  readonly WEBHOOK_MASTER_SECRET?: string;
  /** With a key set, that pi-ai provider is registered next to the built-in `echo` model. */
  readonly ANTHROPIC_API_KEY?: string;
  readonly OPENAI_API_KEY?: string;
  /** The model a session gets when its PUT names none (default `echo`). */
  readonly DEFAULT_MODEL?: string;
  /** A Durable Object binding to `@cloudflare/sandbox`'s `Sandbox` class: jobs run there (README). */
  readonly SANDBOX?: SandboxBinding["SANDBOX"];
}
