// The test-only secrets every workerd vitest project binds (the HTTP tests sign tokens, webhooks and
// sealed secrets with them; see .dev.vars.example). Never used outside tests.
export const TEST_SECRETS = {
  JWT_SECRET: "test-only-jwt-secret-not-for-production",
  WEBHOOK_MASTER_SECRET: "test-only-webhook-master-secret",
  SECRETS_SEALING_KEY: "test-only-secrets-sealing-key-0123456789",
  SUBJECT_HASH_KEY: "test-only-subject-hash-key-0123456789",
} as const;
