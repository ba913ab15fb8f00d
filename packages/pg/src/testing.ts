/**
 * Test kit of @musekit/pg: a private Postgres server for tests and benchmarks.
 *
 * @example
 * ```ts
 * import { TestPostgres } from "@musekit/pg/testing"
 *
 * const server = await TestPostgres.start() // server.url, server.stop()
 * ```
 */
export * as TestPostgres from "./TestPostgres.js"
