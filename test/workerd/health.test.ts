/**
 * The Worker entry keeps answering its health route (the API routes have tests of their own).
 */
// SELF is the main worker's default export; `exports` from cloudflare:workers is untyped here.
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";

describe("worker entry", () => {
  it("GET /health answers ok and other paths 404", async () => {
    const health = await SELF.fetch("https://pico.test/health");
    expect(health.status).toBe(200);
    expect(await health.text()).toBe("ok");
    const other = await SELF.fetch("https://pico.test/v1/nothing");
    expect(other.status).toBe(404);
    await other.text();
  });
});
