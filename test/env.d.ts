declare namespace Cloudflare {
  interface Env {
    SESSIONS: DurableObjectNamespace<import("../src/worker/session/object.js").SessionObject>;
    DIRECTORY: DurableObjectNamespace<import("../src/worker/directory/object.js").DirectoryObject>;
    LIMITS: DurableObjectNamespace<import("../src/worker/limits/object.js").LimitsObject>;
    /** Test-only secrets from vitest.config.ts (the HTTP tests sign tokens and webhooks with them). */
    JWT_SECRET: string;
    WEBHOOK_MASTER_SECRET: string;
    SECRETS_SEALING_KEY: string;
    SUBJECT_HASH_KEY: string;
    /** `quiet` in vitest.config.ts: no log lines on the console. */
    LOG_LEVEL: string;
    /** The soak test's run (vitest.soak.config.ts): short or full, a seed to replay, a simulated start (ISO). */
    SOAK_PROFILE?: string;
    SOAK_SEED?: string;
    SOAK_START?: string;
  }
}

/** A file's text, imported with Vite's `?raw` suffix (docs read by tests). */
declare module "*.md?raw" {
  const text: string;
  export default text;
}
