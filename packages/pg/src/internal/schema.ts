/**
 * The tables of the Postgres store and their creation. Several processes may start at once
 * against a fresh database, so the tables are created under a transaction-level advisory lock.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export interface Names {
  readonly schema: string
  readonly sessions: string
  readonly events: string
  readonly blobs: string
  readonly checkpoints: string
}

/** A schema name as given by a user; refused unless it is a plain identifier. */
export const checkSchema = (schema: string): string => {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`invalid schema name ${JSON.stringify(schema)}: use letters, digits and _ (not first)`)
  }
  return schema
}

const quote = (id: string) => `"${id}"`

export const names = (schema = "public"): Names => {
  const s = quote(checkSchema(schema))
  return {
    schema,
    sessions: `${s}.muse_sessions`,
    events: `${s}.muse_events`,
    blobs: `${s}.muse_blobs`,
    checkpoints: `${s}.muse_checkpoints`
  }
}

/** Key of the advisory lock under which tables are created (any process of any schema). */
const MIGRATION_LOCK = 0x6d757365 // "muse"

const statements = (n: Names): ReadonlyArray<string> => [
  `CREATE SCHEMA IF NOT EXISTS ${quote(n.schema)}`,
  `CREATE TABLE IF NOT EXISTS ${n.sessions} (
    id text PRIMARY KEY,
    title text,
    first_input text,
    started bigint,
    last_event_at bigint,
    last_seq bigint NOT NULL DEFAULT -1,
    bytes bigint NOT NULL DEFAULT 0,
    epoch bigint NOT NULL DEFAULT 0,
    writer text,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE IF NOT EXISTS ${n.events} (
    session text NOT NULL,
    seq bigint NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (session, seq)
  )`,
  `CREATE TABLE IF NOT EXISTS ${n.blobs} (
    hash text PRIMARY KEY,
    data bytea NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS ${n.checkpoints} (
    session text PRIMARY KEY,
    seq bigint NOT NULL,
    body text NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
  )`
]

/** Create the tables if they are missing (idempotent, safe to run from many processes at once). */
export const migrate = (sql: SqlClient.SqlClient, n: Names) =>
  Effect.gen(function* () {
    // a quick look first: the usual case is that they exist, and then no lock is taken
    const found = yield* sql.unsafe<{ n: number }>(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('muse_sessions', 'muse_events', 'muse_blobs', 'muse_checkpoints')`,
      [n.schema]
    )
    if (found[0]?.n === 4) return
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* sql.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`)
        for (const s of statements(n)) yield* sql.unsafe(s)
      })
    )
  })
