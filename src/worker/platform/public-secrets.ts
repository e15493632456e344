/**
 * The secrets `.dev.vars.example` ships in public (`npm start` copies them to `.dev.vars`). Anyone can sign a token or
 * a webhook with them, so a Worker outside development refuses to serve while one is bound (http/refuse-public-secrets.ts).
 * Imports nothing, so the Node test that keeps this list equal to the example file (test/node/deploy-config.test.ts)
 * can read it.
 */

/** Each public development value, by the secret that must never hold it outside development. */
export const PUBLIC_DEVELOPMENT_SECRETS = {
  JWT_SECRET: "dev-only-jwt-secret-change-me-0123456789",
  WEBHOOK_MASTER_SECRET: "dev-only-webhook-master-secret-0123456789",
  SUBJECT_HASH_KEY: "dev-only-subject-hash-key-change-me-0123456789",
} as const;

export type PublicSecretName = keyof typeof PUBLIC_DEVELOPMENT_SECRETS;
