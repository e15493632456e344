/**
 * `npm run webhook-secret -- --tenant T --session S` prints the Standard Webhooks signing secret
 * (`whsec_...`) of one endpoint, `POST /v1/webhooks/T/S/{conversation}`, derived from
 * WEBHOOK_MASTER_SECRET (environment or .dev.vars) exactly as the Worker derives it
 * (src/worker/crypto/webhooks.ts): base64(HMAC-SHA256(master, "pico-edge webhook:" + T + "/" + S)). Each session
 * has its own secret, so a delivery signed for one session is refused by another.
 */
import { createHmac } from "node:crypto";
import { devSecret, flags } from "./dev-secrets.ts";

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

try {
  const args = flags(process.argv.slice(2));
  const tenant = args.get("tenant");
  const session = args.get("session");
  if (tenant === undefined || !NAME.test(tenant))
    throw new Error("--tenant is required: 1-128 characters of A-Z a-z 0-9 _ . -");
  if (session === undefined || !NAME.test(session))
    throw new Error("--session is required (each session has its own secret): 1-128 characters of A-Z a-z 0-9 _ . -");
  const secret = createHmac("sha256", devSecret("WEBHOOK_MASTER_SECRET"))
    .update(`pico-edge webhook:${tenant}/${session}`)
    .digest("base64");
  process.stdout.write(`whsec_${secret}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
