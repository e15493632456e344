/**
 * `npm run webhook-secret -- --tenant T` prints the tenant's Standard Webhooks secret (`whsec_...`),
 * derived from WEBHOOK_MASTER_SECRET (environment or .dev.vars) exactly as the Worker derives it
 * (src/worker/webhooks.ts): base64(HMAC-SHA256(master, "pico-edge webhook:" + tenant)).
 */
import { createHmac } from "node:crypto";
import { devSecret, flags } from "./dev-secrets.ts";

try {
  const tenant = flags(process.argv.slice(2)).get("tenant");
  if (tenant === undefined || !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(tenant)) throw new Error("--tenant is required");
  const secret = createHmac("sha256", devSecret("WEBHOOK_MASTER_SECRET")).update(`pico-edge webhook:${tenant}`).digest("base64");
  process.stdout.write(`whsec_${secret}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
