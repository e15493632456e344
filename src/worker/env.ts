/**
 * The Worker's bindings (wrangler.toml), shared by the entry (index.ts) and the session Durable Object.
 */
export interface Env {
  readonly SESSIONS: DurableObjectNamespace;
  /** `[version_metadata]`: which deployed version runs (absent in configurations without the binding). */
  readonly CF_VERSION_METADATA?: WorkerVersionMetadata;
}
