/**
 * `npm run tool-secret -- --tenant T --tool NAME [--generation G]` prints the Standard Webhooks signing secret
 * (`whsec_...`) of one catalog tool of a tenant at a generation (default 1), derived from WEBHOOK_MASTER_SECRET
 * (environment or .dev.vars) exactly as the Worker derives it (src/worker/crypto/webhooks.ts toolSecret):
 * base64(HMAC-SHA256(master, "pico-edge tool:" + T + "/" + NAME)) for generation 1, and with "#" + G appended for a
 * later one. The tool's endpoint verifies the requests it gets with it, and signs the late results it posts to
 * /v1/tool-results with it. The API answers the same secret without the master secret (`PUT /v1/tools/{tool}` the
 * first time, `POST /v1/tools/{tool}/rotate-secret`).
 */
import { createHmac } from "node:crypto";
import { devSecret, flags } from "./dev-secrets.ts";

const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const TOOL = /^[a-zA-Z0-9_-]{1,64}$/;

try {
  const args = flags(process.argv.slice(2));
  const tenant = args.get("tenant");
  const tool = args.get("tool");
  if (tenant === undefined || !TENANT.test(tenant))
    throw new Error("--tenant is required: 1-128 characters of A-Z a-z 0-9 _ . -");
  if (tool === undefined || !TOOL.test(tool))
    throw new Error("--tool is required (each tool has its own secret): 1-64 characters of A-Z a-z 0-9 _ -");
  const generationFlag = args.get("generation") ?? "1";
  if (!/^[1-9][0-9]{0,8}$/.test(generationFlag))
    throw new Error("--generation is the secret's generation: a whole number from 1 (the default)");
  const generation = Number(generationFlag);
  const label =
    generation === 1 ? `pico-edge tool:${tenant}/${tool}` : `pico-edge tool:${tenant}/${tool}#${generation}`;
  const secret = createHmac("sha256", devSecret("WEBHOOK_MASTER_SECRET")).update(label).digest("base64");
  process.stdout.write(`whsec_${secret}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
