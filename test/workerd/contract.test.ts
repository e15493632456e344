/**
 * The storage contract suite (test/contract/suite.ts) on every backend that runs in workerd. One line
 * per backend.
 */
import { jsonlMemoryFilesBackend, memoryBackend } from "../contract/backends.js";
import { sqliteDurableObjectBackend } from "../contract/do-backend.js";
import { storageContract } from "../contract/suite.js";

storageContract(memoryBackend);
storageContract(jsonlMemoryFilesBackend);
storageContract(sqliteDurableObjectBackend);
