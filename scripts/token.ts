/**
 * `npm run token -- --tenant T --role R [--agent A] [--ttl SECONDS]` prints a bearer token (HS256, signed
 * with JWT_SECRET from the environment or .dev.vars) for the HTTP API. Roles: client, operator, mayor,
 * agent (agent tokens carry --agent). Default lifetime: 24 hours.
 */
import { sign } from "hono/jwt";
import { devSecret, flags } from "./dev-secrets.ts";

const ROLES = ["client", "operator", "mayor", "agent"];
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

try {
  const args = flags(process.argv.slice(2));
  const tenant = args.get("tenant");
  const role = args.get("role") ?? "client";
  const agent = args.get("agent");
  const ttl = Number(args.get("ttl") ?? 86_400);
  if (tenant === undefined || !NAME.test(tenant)) throw new Error("--tenant is required: 1-128 characters of A-Z a-z 0-9 _ . -");
  if (!ROLES.includes(role)) throw new Error(`--role must be one of ${ROLES.join(", ")}`);
  if (role === "agent" && (agent === undefined || !NAME.test(agent))) throw new Error("an agent token needs --agent <id>");
  if (!Number.isSafeInteger(ttl) || ttl <= 0) throw new Error("--ttl is a positive number of seconds");
  const now = Math.floor(Date.now() / 1000);
  const token = await sign({ tenant, role, ...(agent === undefined ? {} : { agent }), iat: now, exp: now + ttl }, devSecret("JWT_SECRET"), "HS256");
  process.stdout.write(`${token}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
