/**
 * The event log in Postgres: the same envelope, lines and invariants as the file log, for
 * sessions that outlive a machine or run on several. One row per event, holding the event's
 * checksummed line exactly as the file log writes it; blobs in a `BlobStore` (the same database
 * by default); checkpoints in a table beside the events.
 *
 * - **Durable before acknowledged**: an append returns once its transaction committed, with
 *   `synchronous_commit` on for the store's connections; a server with `fsync` off is refused.
 * - **Group commit**: the appends that wait while a commit is in flight go together in the next
 *   one — one statement and one commit for the whole group.
 * - **One writer, gapless seqs, across processes**: opening a session takes a Postgres advisory
 *   lock (released when the writer's connection ends — a process killed with SIGKILL releases it
 *   too) and raises the session's epoch. Every commit names the epoch and the seq it continues
 *   from, so a writer that lost the session (its connection dropped and another process took
 *   over) has its commits refused instead of forking the log.
 * - **Checksums kept**: each row's line carries its crc32; a row that does not match is reported
 *   as `LogCorrupted` naming the session and seq, and nothing is changed.
 *
 * Tables (created when missing, in `schema`, default `public`): `muse_sessions`, `muse_events`,
 * `muse_blobs`, `muse_checkpoints`.
 *
 * @example
 * ```ts
 * import { EventLog } from "@musekit/core"
 * import { EventLogPg } from "@musekit/pg"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const log = yield* EventLog.EventLog
 *   yield* log.append({ agent: "main", type: "note", data: { text: "durable in Postgres" } })
 * }).pipe(Effect.provide(EventLogPg.layer({ url: "postgres://muse@db.internal/muse", session: "demo", create: true })))
 * ```
 */
import * as net from "node:net"
import * as os from "node:os"
import type { SqlConnection } from "@effect/sql"
import { SqlClient, type SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Checkpoint, Event, EventLog, Redactor } from "@musekit/core"
import { EventLogFile } from "@musekit/node"
import { Chunk, Effect, Either, ExecutionStrategy, Exit, Layer, Option, Redacted, Scope, Stream } from "effect"
import * as BlobStore from "./BlobStore.js"
import * as Schema from "./internal/schema.js"

export interface Options {
  /** Schema of the tables (default `public`); several independent stores can share a database. */
  readonly schema?: string | undefined
  /** What is done to text before it is stored (secrets replaced); `redactorFor` builds the usual one. */
  readonly redactor?: Redactor.Redactor | undefined
  /** Accept a server that runs with `fsync` off (a throwaway database); appends are then not durable. */
  readonly allowNoFsync?: boolean | undefined
}

/** Events fetched per query when reading a log. */
const PAGE = 500

/** The identity a writer records in the session row: host and process. */
const writerId = () => `${os.hostname()}:${process.pid}`

const failed = (session: string, what: string) => (e: unknown) =>
  new EventLog.LogWriteFailed({
    session,
    reason: `${what}: ${(e as SqlError.SqlError)?.cause instanceof Error ? ((e as SqlError.SqlError).cause as Error).message : e instanceof Error ? e.message : String(e)}`
  })

const checkSession = (session: string): string | undefined =>
  /^[A-Za-z0-9._-]+$/.test(session) && !session.startsWith(".") && session.length <= 200
    ? undefined
    : `invalid session id ${JSON.stringify(session)}: use letters, digits, '.', '_' and '-'`

/** A database URL without its password, for messages. */
export const describeUrl = (url: string): string => {
  try {
    const u = new URL(url)
    u.password = ""
    u.search = ""
    return u.toString()
  } catch {
    return "postgres (an unparsable URL)"
  }
}

/** The password in a database URL, if it holds one. */
export const passwordOf = (url: string): string | undefined => {
  try {
    const p = new URL(url).password
    return p ? decodeURIComponent(p) : undefined
  } catch {
    return undefined
  }
}

/** The usual redactor for a store at `url`: credential-looking environment variables and the URL's password. */
export const redactorFor = (url: string, env: NodeJS.ProcessEnv = process.env): Redactor.Redactor => {
  const secrets = Redactor.secretsFromEnv(env)
  const password = passwordOf(url)
  return Redactor.make({ secrets: password ? { ...secrets, MUSE_LOG_PASSWORD: password } : secrets })
}

/** Whether a `--log` value names a Postgres database. */
export const isUrl = (value: string): boolean => /^postgres(ql)?:\/\//i.test(value)

/** How long a connection stays silent before TCP keepalive probes start (the client's side). */
export const KEEPALIVE_IDLE_MS = 10_000

/**
 * A client for `url` whose connections run with `synchronous_commit` on (whatever the server's
 * default), so a commit that returned is on disk, and with TCP keepalive on (probes after
 * {@link KEEPALIVE_IDLE_MS} of silence), so a server that vanished is noticed in minutes (the kernel's
 * probe interval and count decide: about 11 with Linux defaults) rather than hours.
 * A machine that vanished is noticed by the server's own keepalive (`tcp_keepalives_*`, docs/cluster.md).
 */
export const layerClient = (
  url: string,
  options: { readonly maxConnections?: number | undefined } = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, EventLog.LogWriteFailed> => {
  let full = url
  try {
    const u = new URL(url)
    const existing = u.searchParams.get("options")
    u.searchParams.set("options", `${existing ? `${existing} ` : ""}-c synchronous_commit=on`)
    full = u.toString()
  } catch {}
  return PgClient.layer({
    url: Redacted.make(full),
    applicationName: "musekit",
    maxConnections: options.maxConnections ?? 20,
    // (the options `pg` has for this, keepAlive and its delay, are not passed on by PgClient.layer)
    stream: () => new net.Socket().setKeepAlive(true, KEEPALIVE_IDLE_MS)
  }).pipe(
    Layer.mapError(
      (e) =>
        new EventLog.LogWriteFailed({
          session: "*",
          reason: `cannot connect to ${describeUrl(url)}: ${e.cause instanceof Error ? e.cause.message : e.message}`
        })
    )
  )
}

interface Row {
  readonly seq: string | number
  readonly line: string
}

/**
 * A Postgres `EventStore` over the `SqlClient` in context (use `layerClient` for one). Blobs go
 * to the `BlobStore` in context, else to the same database. Lives as long as the scope: it holds
 * one connection for the writer locks of the sessions it opens.
 */
export const makeStore = (
  options: Options = {}
): Effect.Effect<EventLog.StoreService, EventLog.EventLogError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const names = yield* Effect.try({ try: () => Schema.names(options.schema), catch: failed("*", "store") })
    const where = Option.match(pg, {
      onNone: () => `postgres (schema ${names.schema})`,
      onSome: (c) =>
        `postgres://${c.config.username ?? ""}@${c.config.host ?? "localhost"}:${c.config.port ?? 5432}/${
          c.config.database ?? ""
        } (schema ${names.schema})`
    })
    const setup = failed("*", `setting up the tables in ${where}`)
    yield* Effect.mapError(Schema.migrate(sql, names), setup)
    if (!options.allowNoFsync) {
      const rows = yield* Effect.mapError(
        sql.unsafe<{ fsync: string }>(`SELECT current_setting('fsync') AS fsync`),
        setup
      )
      if (rows[0]?.fsync === "off") {
        return yield* new EventLog.LogWriteFailed({
          session: "*",
          reason: `${where} runs with fsync off, so a committed event could still be lost in a crash. Turn fsync on, or open the store with allowNoFsync for a throwaway database.`
        })
      }
    }
    const blobs =
      Option.getOrUndefined(yield* Effect.serviceOption(BlobStore.BlobStore)) ??
      (yield* Effect.mapError(BlobStore.makePg({ schema: options.schema }), setup))
    const redactor = options.redactor ?? Redactor.none
    const storeScope = yield* Effect.scope

    // The connection that holds the writer locks. When it breaks it is replaced on the next open;
    // the locks it held are gone, and the epoch check of every commit keeps the logs whole.
    let lockConn: { readonly conn: SqlConnection.Connection; readonly scope: Scope.CloseableScope } | undefined
    const lockConnection = Effect.gen(function* () {
      if (lockConn) return lockConn.conn
      const scope = yield* Scope.fork(storeScope, ExecutionStrategy.sequential)
      const conn = yield* Scope.extend(sql.reserve, scope)
      lockConn = { conn, scope }
      return conn
    })
    const dropLockConnection = Effect.suspend(() => {
      const held = lockConn
      lockConn = undefined
      return held ? Scope.close(held.scope, Exit.void) : Effect.void
    })
    /** Sessions this store has open for writing. */
    const writing = new Set<string>()
    const lockKey = (session: string) => `musekit:${names.schema}:${session}`
    const tryLock = (session: string) =>
      Effect.gen(function* () {
        const conn = yield* lockConnection
        const rows = yield* conn.executeValues("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", [
          lockKey(session)
        ])
        return rows[0]?.[0] === true
      }).pipe(Effect.tapError(() => dropLockConnection))
    const unlock = (session: string) =>
      Effect.gen(function* () {
        if (!lockConn) return
        yield* lockConn.conn.executeValues("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [lockKey(session)])
      }).pipe(Effect.catchAll(() => dropLockConnection))

    const corrupt = (session: string, seq: number, reason: string) =>
      new EventLog.LogCorrupted({ file: `${names.events} of ${where}, session ${session}`, line: seq + 1, reason })

    /** Rows `[from, to]` of a session, checked and decoded, a page at a time. */
    const readRows = (
      session: string,
      from: number,
      to: number
    ): Stream.Stream<Event.Envelope, EventLog.EventLogError> =>
      Stream.paginateChunkEffect(from, (next) =>
        Effect.gen(function* () {
          const rows = yield* Effect.mapError(
            sql.unsafe<Row>(
              `SELECT seq, line FROM ${names.events} WHERE session = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT ${PAGE}`,
              [session, next, to]
            ),
            failed(session, "read")
          )
          const out: Array<Event.Envelope> = []
          let expected = next
          for (const row of rows) {
            const seq = Number(row.seq)
            if (seq !== expected)
              return yield* corrupt(session, expected, `event ${expected} is missing (found ${seq})`)
            const check = EventLogFile.verifyLine(Buffer.from(row.line, "utf8"))
            if ("bad" in check) return yield* corrupt(session, seq, check.bad)
            if (check.seq !== seq) return yield* corrupt(session, seq, `the row of seq ${seq} holds seq ${check.seq}`)
            const e = Event.fromJson(JSON.parse(row.line))
            if (!e) return yield* corrupt(session, seq, "not an event envelope")
            out.push(e)
            expected++
          }
          const more = rows.length === PAGE && expected <= to
          return [Chunk.unsafeFromArray(out), more ? Option.some(expected) : Option.none()] as const
        })
      )

    const sessionRow = (session: string) =>
      Effect.map(
        Effect.mapError(
          sql.unsafe<{ last_seq: string; epoch: string; writer: string | null }>(
            `SELECT last_seq, epoch, writer FROM ${names.sessions} WHERE id = $1`,
            [session]
          ),
          failed(session, "read")
        ),
        (rows) => rows[0]
      )

    const notFound = (session: string) => new EventLog.SessionNotFound({ session, where })

    const open = (session: string, opts?: EventLog.OpenOptions) =>
      Effect.gen(function* () {
        const bad = checkSession(session)
        if (bad) return yield* new EventLog.LogWriteFailed({ session, reason: bad })
        const write = failed(session, "open")
        if (opts?.create) {
          yield* Effect.mapError(
            sql.unsafe(`INSERT INTO ${names.sessions} (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, [session]),
            write
          )
        } else if (!(yield* sessionRow(session))) return yield* notFound(session)
        // advisory locks are re-entrant on one connection: this process's own writers are kept here
        const mine = writing.has(session)
        const locked = !mine && (yield* Effect.mapError(tryLock(session), write))
        if (!locked) {
          const holder = mine ? writerId() : ((yield* sessionRow(session))?.writer ?? "another process")
          const pid = Number(/:(\d+)$/.exec(holder)?.[1] ?? 0)
          return yield* new EventLog.SessionLocked({
            session,
            pid,
            lockFile: `the Postgres writer lock in ${where}, held by ${holder}`
          })
        }
        writing.add(session)
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(
            unlock(session),
            Effect.sync(() => writing.delete(session))
          )
        )
        const rows = yield* Effect.mapError(
          sql.unsafe<{ epoch: string; last_seq: string }>(
            `UPDATE ${names.sessions} SET epoch = epoch + 1, writer = $2 WHERE id = $1 RETURNING epoch, last_seq`,
            [session, writerId()]
          ),
          write
        )
        const epoch = Number(rows[0]!.epoch)
        const lastSeq = Number(rows[0]!.last_seq)
        const max = yield* Effect.mapError(
          sql.unsafe<{ max: string | null }>(`SELECT max(seq) AS max FROM ${names.events} WHERE session = $1`, [
            session
          ]),
          write
        )
        const stored = max[0]?.max === null || max[0]?.max === undefined ? -1 : Number(max[0].max)
        if (stored !== lastSeq) {
          return yield* corrupt(
            session,
            Math.min(stored, lastSeq) + 1,
            `the session says its last seq is ${lastSeq}, its events end at ${stored}`
          )
        }
        const backend: EventLog.Backend = {
          lastSeq,
          commit: (batch) =>
            Effect.gen(function* () {
              const seqs: Array<number> = []
              const lines: Array<string> = []
              let bytes = 0
              let firstInput: string | null = null
              for (const c of batch) {
                const line = EventLogFile.withChecksum(c.line)
                seqs.push(c.event.seq)
                lines.push(line)
                bytes += Buffer.byteLength(line, "utf8") + 1
                if (firstInput === null && c.event.type === "user.input") {
                  const text = (c.event.data as { text?: unknown } | null)?.text
                  if (typeof text === "string") firstInput = text.slice(0, 500)
                }
              }
              const first = batch[0]!.event
              const last = batch[batch.length - 1]!.event
              const title = first.seq === 0 ? (first.data as { title?: unknown } | null)?.title : undefined
              const result = (yield* Effect.mapError(
                sql.unsafe(
                  `WITH s AS (
                    UPDATE ${names.sessions} SET last_seq = $3, bytes = bytes + $4, last_event_at = $5,
                      started = COALESCE(started, $6), title = COALESCE(title, $7), first_input = COALESCE(first_input, $8)
                    WHERE id = $1 AND epoch = $2 AND last_seq = $9
                    RETURNING id)
                  INSERT INTO ${names.events} (session, seq, line)
                  SELECT s.id, t.seq, t.line FROM s, unnest($10::bigint[], $11::text[]) AS t(seq, line)`,
                  [
                    session,
                    epoch,
                    last.seq,
                    bytes,
                    last.at,
                    first.seq === 0 ? first.at : null,
                    typeof title === "string" ? title : null,
                    firstInput,
                    first.seq - 1,
                    seqs,
                    lines
                  ]
                ).raw,
                failed(session, "commit")
              )) as { rowCount?: number | null }
              if (result.rowCount === batch.length) return
              const now = yield* sessionRow(session)
              return yield* new EventLog.LogWriteFailed({
                session,
                reason:
                  now && Number(now.epoch) !== epoch
                    ? `the session was taken over by ${now.writer ?? "another writer"}; this writer stops`
                    : `the stored log does not continue at seq ${first.seq} (it ends at ${now?.last_seq ?? "?"})`
              })
            }),
          read: (from, to) => readRows(session, from, to),
          putBlob: blobs.put,
          putSealed: blobs.putSealed,
          getBlob: blobs.get
        }
        return yield* EventLog.make(backend, { sessionId: session, redactor })
      })

    const read = (session: string, fromSeq = 0) =>
      Effect.gen(function* () {
        const row = yield* sessionRow(session)
        if (!row) return yield* notFound(session)
        return Chunk.toReadonlyArray(
          yield* Stream.runCollect(readRows(session, Math.max(0, fromSeq), Number(row.last_seq)))
        )
      })

    const edge = (session: string, order: "ASC" | "DESC") =>
      Effect.gen(function* () {
        const rows = yield* Effect.mapError(
          sql.unsafe<Row>(`SELECT seq, line FROM ${names.events} WHERE session = $1 ORDER BY seq ${order} LIMIT 1`, [
            session
          ]),
          failed(session, "read")
        )
        const row = rows[0]
        if (!row) return undefined
        const check = EventLogFile.verifyLine(Buffer.from(row.line, "utf8"))
        if ("bad" in check) return yield* corrupt(session, Number(row.seq), check.bad)
        return Event.fromJson(JSON.parse(row.line))
      })

    return {
      where,
      open,
      sessions: Effect.map(
        Effect.mapError(
          sql.unsafe<{
            id: string
            title: string | null
            first_input: string | null
            started: string | null
            last_event_at: string | null
            last_seq: string
            bytes: string
          }>(
            `SELECT id, title, first_input, started, last_event_at, last_seq, bytes FROM ${names.sessions}
             ORDER BY last_event_at DESC NULLS LAST, id DESC`
          ),
          failed("*", "list sessions")
        ),
        (rows) =>
          rows.map((r) => ({
            id: r.id,
            title: r.title,
            firstInput: r.first_input,
            started: r.started === null ? null : Number(r.started),
            lastEventAt: r.last_event_at === null ? null : Number(r.last_event_at),
            events: Number(r.last_seq) + 1,
            bytes: Number(r.bytes)
          }))
      ),
      exists: (session) =>
        Effect.map(
          Effect.orElseSucceed(sessionRow(session), () => undefined),
          (r) => r !== undefined
        ),
      read,
      ends: (session) =>
        Effect.gen(function* () {
          if (!(yield* sessionRow(session))) return yield* notFound(session)
          const first = yield* edge(session, "ASC")
          const last = yield* edge(session, "DESC")
          return { ...(first ? { first } : {}), ...(last ? { last } : {}) }
        }),
      getBlob: blobs.get,
      readCheckpoint: (session) =>
        Effect.map(
          Effect.either(
            sql.unsafe<{ body: string }>(`SELECT body FROM ${names.checkpoints} WHERE session = $1`, [session])
          ),
          (r): Either.Either<Checkpoint.Checkpoint, string> =>
            Either.isLeft(r)
              ? Either.left(`the checkpoint could not be read: ${r.left.message}`)
              : r.right[0] === undefined
                ? Either.left("none")
                : Checkpoint.decode(r.right[0].body)
        ),
      writeCheckpoint: (checkpoint) =>
        Effect.asVoid(
          Effect.mapError(
            sql.unsafe(
              `INSERT INTO ${names.checkpoints} (session, seq, body) VALUES ($1, $2, $3)
               ON CONFLICT (session) DO UPDATE SET seq = EXCLUDED.seq, body = EXCLUDED.body, written_at = now()`,
              [checkpoint.session, checkpoint.seq, Checkpoint.encode(checkpoint, redactor)]
            ),
            failed(checkpoint.session, "checkpoint write")
          )
        )
    } satisfies EventLog.StoreService
  })

/**
 * The Postgres store at `url`, living as long as the scope (its connections included); the usual
 * redactor for the URL unless one is given.
 */
export const storeAt = (
  url: string,
  options: Options & { readonly maxConnections?: number | undefined } = {}
): Effect.Effect<EventLog.StoreService, EventLog.EventLogError, Scope.Scope> =>
  Effect.flatMap(Layer.build(layerClient(url, { maxConnections: options.maxConnections })), (context) =>
    makeStore({ redactor: redactorFor(url), ...options }).pipe(Effect.provide(context))
  )

/** The Postgres store at `url` as the `EventStore` layer. */
export const layerStore = (
  options: Options & { readonly url: string }
): Layer.Layer<EventLog.EventStore, EventLog.EventLogError> =>
  Layer.scoped(EventLog.EventStore, makeStore({ redactor: redactorFor(options.url), ...options })).pipe(
    Layer.provide(layerClient(options.url))
  )

/** One session of the Postgres store at `url` as the `EventLog` layer. */
export const layer = (
  options: Options & EventLog.OpenOptions & { readonly url: string; readonly session: string }
): Layer.Layer<EventLog.EventLog, EventLog.EventLogError> =>
  EventLog.layerFromStore(options.session, { create: options.create }).pipe(Layer.provide(layerStore(options)))
