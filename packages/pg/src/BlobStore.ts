/**
 * The content-addressed blob store of the Postgres event log, as a swappable service: file
 * contents, large tool results and fingerprints of a session live here, keyed by their sha256.
 * The default keeps them in a table of the same database (`muse_blobs`); any store that can put
 * and get bytes by key (an S3-compatible bucket, a shared directory) can stand in for it by
 * providing this tag — `EventLogPg` uses the `BlobStore` in context when there is one.
 *
 * A store must be durable before `put` returns (an event that names a blob is appended only
 * after the blob is stored), and `get` must check what it returns against the hash.
 *
 * @example
 * ```ts
 * import { BlobStore, EventLogPg } from "@musekit/pg"
 * import { Effect, Layer } from "effect"
 *
 * // blobs in a bucket instead of the database:
 * const bucket = Layer.succeed(BlobStore.BlobStore, BlobStore.make({
 *   where: "s3://my-bucket/muse",
 *   put: (hash, data) => Effect.promise(() => s3.putObject(`muse/${hash}`, data)),
 *   get: (hash) => Effect.promise(() => s3.getObjectOrUndefined(`muse/${hash}`))
 * }))
 * const store = EventLogPg.layerStore({ url }).pipe(Layer.provide(bucket))
 * ```
 */
import { createHash } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { EventLog } from "@musekit/core"
import { EventLogFile } from "@musekit/node"
import { Context, Effect, Layer } from "effect"
import * as Schema from "./internal/schema.js"

export interface Service {
  /** Where the blobs are, for messages. */
  readonly where: string
  /** Store bytes; resolves with their sha256 hex once they are durable. */
  readonly put: (data: Uint8Array) => Effect.Effect<string, EventLog.EventLogError>
  /** The bytes of a hash, checked against it (`BlobNotFound`, `BlobCorrupted`). */
  readonly get: (hash: string) => Effect.Effect<Uint8Array, EventLog.EventLogError>
  /**
   * Store bytes that hold a secret and must come back exactly (a file's content before an edit):
   * encrypted with the machine's blob key (`EventLogFile.defaultKeyFile()`), under `<sha256>.sealed`;
   * resolves with the sha256 of the plain bytes, which `get` then answers. A store without it
   * keeps such bytes as they are.
   */
  readonly putSealed?: ((data: Uint8Array) => Effect.Effect<string, EventLog.EventLogError>) | undefined
}

export class BlobStore extends Context.Tag("@musekit/pg/BlobStore")<BlobStore, Service>() {}

export const sha256 = (data: Uint8Array): string => createHash("sha256").update(data).digest("hex")

const HASH = /^[0-9a-f]{64}$/

const failed = (what: string) => (e: unknown) =>
  new EventLog.LogWriteFailed({
    session: "*",
    reason: `${what}: ${e instanceof Error ? e.message : String(e)}`
  })

/**
 * A blob store over raw put/get of bytes by key: hashing, the hash check on read, sealing of
 * exact copies that hold a secret (key `<sha256>.sealed`, see `Service.putSealed`) and the error
 * types are added here. `get` resolves `undefined` for a missing key.
 */
export const make = (options: {
  readonly where: string
  readonly put: (hash: string, data: Uint8Array) => Effect.Effect<void, unknown>
  readonly get: (hash: string) => Effect.Effect<Uint8Array | undefined, unknown>
  /** The key file sealed blobs are encrypted with (default `EventLogFile.defaultKeyFile()`). */
  readonly keyFile?: string | undefined
}): Service => ({
  where: options.where,
  putSealed: (data) =>
    Effect.gen(function* () {
      const hash = sha256(data)
      const sealed = yield* Effect.try({
        try: () => EventLogFile.sealBlob(hash, data, options.keyFile ?? EventLogFile.defaultKeyFile()),
        catch: failed("sealing a blob")
      })
      yield* Effect.mapError(options.put(`${hash}.sealed`, sealed), failed(`blob write to ${options.where}`))
      return hash
    }),
  put: (data) =>
    Effect.suspend(() => {
      const hash = sha256(data)
      return Effect.as(Effect.mapError(options.put(hash, data), failed(`blob write to ${options.where}`)), hash)
    }),
  get: (hash) =>
    Effect.gen(function* () {
      if (!HASH.test(hash)) return yield* new EventLog.BlobNotFound({ hash })
      let data = yield* Effect.mapError(options.get(hash), failed(`blob read from ${options.where}`))
      if (data === undefined) {
        const sealed = yield* Effect.mapError(options.get(`${hash}.sealed`), failed(`blob read from ${options.where}`))
        if (sealed === undefined) return yield* new EventLog.BlobNotFound({ hash })
        const keyFile = options.keyFile ?? EventLogFile.defaultKeyFile()
        data = yield* Effect.try({
          try: () => EventLogFile.unsealBlob(hash, sealed, keyFile),
          catch: (e) =>
            new EventLog.BlobCorrupted({
              hash,
              file: `${options.where} (${hash}.sealed)`,
              reason: `it cannot be unsealed with the key in ${keyFile} (${e instanceof Error ? e.message : String(e)}); copy that file from the machine that stored it`
            })
        })
      }
      const actual = sha256(data)
      if (actual !== hash) {
        return yield* new EventLog.BlobCorrupted({
          hash,
          file: options.where,
          reason: `content hashes to ${actual.slice(0, 12)}… (${data.length} bytes); it was truncated or changed`
        })
      }
      return data
    })
})

/** Blobs in the `muse_blobs` table of the database in context. */
export const makePg = (options: { readonly schema?: string | undefined } = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = Schema.names(options.schema)
    yield* Schema.migrate(sql, names)
    return make({
      where: `postgres table ${names.blobs}`,
      put: (hash, data) =>
        sql.unsafe(`INSERT INTO ${names.blobs} (hash, data) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING`, [
          hash,
          Buffer.from(data.buffer, data.byteOffset, data.byteLength)
        ]),
      get: (hash) =>
        Effect.map(sql.unsafe<{ data: Buffer }>(`SELECT data FROM ${names.blobs} WHERE hash = $1`, [hash]), (rows) => {
          const b = rows[0]?.data
          return b ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : undefined
        })
    })
  })

/** `BlobStore` in the Postgres database in context. */
export const layerPg = (options: { readonly schema?: string | undefined } = {}) =>
  Layer.effect(BlobStore, makePg(options))
