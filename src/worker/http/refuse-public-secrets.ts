/**
 * A Worker outside development refuses to serve while a secret holds its public development value
 * (platform/public-secrets.ts): every request answers 500 `misconfigured` naming the secret, and a `misconfigured`
 * log line says which (docs/operations.md "Deploying"). A missing SUBJECT_HASH_KEY is no reason to serve nothing (an
 * upgrade that forgets the new secret must not be an outage): only an erasure needs it, and the erase route refuses
 * (500 `misconfigured`, nothing written) until it is set; without it no keyed record exists for any check to need.
 */
import type { MiddlewareHandler } from "hono";
import { isDevelopment, type Env } from "../env.js";
import type { AppEnv } from "../identity/auth.js";
import { log } from "../log.js";
import { Problem } from "../problems.js";
import { PUBLIC_DEVELOPMENT_SECRETS, type PublicSecretName } from "../platform/public-secrets.js";

/** The first secret bound to its public development value, where that is refused (outside development). */
export function publicSecretInUse(env: Env): PublicSecretName | undefined {
  if (isDevelopment(env.ENVIRONMENT)) return undefined;
  for (const name of Object.keys(PUBLIC_DEVELOPMENT_SECRETS) as PublicSecretName[]) {
    if (env[name] === PUBLIC_DEVELOPMENT_SECRETS[name]) return name;
  }
  return undefined;
}

/** Middleware: outside development, no request is served while a secret holds its public development value. */
export function refusePublicSecrets(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const name = publicSecretInUse(c.env);
    if (name !== undefined) {
      const message = `${name} is the public development value from .dev.vars.example; set a secret of your own: wrangler secret put ${name}`;
      log({ type: "misconfigured", secret: name, message });
      return new Problem("misconfigured", message).response();
    }
    return next();
  };
}
