/**
 * What the deploy bundle gets for `ajv` and `ajv-formats` (wrangler.toml `[alias]`). The MCP SDK's
 * Server and Client import AJV statically for their default JSON Schema validator even when another is
 * passed; this service always passes the `@cfworker/json-schema` one (src/worker/http/mcp-serve.ts), because
 * AJV compiles validators with `new Function`, which Workers refuse. The alias keeps AJV's code out of
 * the bundle (docs/mcp.md "What MCP adds to the bundle"); if anything ever reaches for it, it fails loudly.
 */
export default function ajvIsNotBundled(): never {
  throw new Error(
    "AJV is not part of this Worker's bundle: pass the SDK's CfWorkerJsonSchemaValidator (@modelcontextprotocol/sdk/validation/cfworker)",
  );
}
