/**
 * The OpenAPI document validates against the OpenAPI 3.1 schema, checked with a maintained
 * validator (@seriousme/openapi-schema-validator, offline). Runs in Node: the validator compiles JSON
 * Schemas with code generation, which workerd does not allow. The document is the one the Worker serves
 * (test/workerd/http-openapi.test.ts compares the served copy with `openApiDocument()`).
 */
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { openApiDocument } from "../../src/api/openapi.js";

describe("OpenAPI document", () => {
  it("validates against the OpenAPI 3.1 schema", async () => {
    const validator = new Validator();
    const result = await validator.validate(openApiDocument());
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    // The validator does catch a broken document (an operation without responses, a parameter without `in`).
    const broken = structuredClone(openApiDocument()) as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
    };
    const operation = broken.paths["/v1/sessions/{session}"]?.["get"];
    if (operation === undefined) throw new Error("no GET session operation");
    operation["parameters"] = [{ name: "session" }];
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });
});
