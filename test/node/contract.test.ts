/**
 * The storage contract suite (test/contract/suite.ts) on the backends that need Node: JSONL over the
 * real file system, a temporary directory per test. One line per backend.
 */
import { jsonlNodeFilesBackend } from "../contract/node-backends.js";
import { storageContract } from "../contract/suite.js";

storageContract(jsonlNodeFilesBackend);
