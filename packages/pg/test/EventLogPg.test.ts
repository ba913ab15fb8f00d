/**
 * What the Postgres store does beyond the conformance suite: damaged rows are reported and left
 * alone, a writer that lost its session cannot write, durability settings are enforced, a group
 * of waiting appends is one commit, the URL's password never reaches the log, and blobs can live
 * in another store.
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { EventLog, Redactor } from "@musekit/core"
import { BlobStore, EventLogPg } from "@musekit/pg"
import { TestPostgres } from "@musekit/pg/testing"
import { Effect, Layer, Redacted } from "effect"
import { dropSchema, sqlAt } from "./support.js"

const { skip } = TestPostgres.decide()
let server: TestPostgres.Server | undefined
const url = () => server!.url

/** A schema of its own for one test, dropped at the end. */
const freshSchema = Effect.gen(function* () {
  const schema = `t_${randomBytes(6).toString("hex")}`
  yield* Effect.addFinalizer(() => dropSchema(url(), schema))
  return schema
})

const sql = (text: string, params: ReadonlyArray<unknown> = []) =>
  sqlAt(url(), (s) => s.unsafe<Record<string, unknown>>(text, params as Array<unknown>))

/** A pause on a real timer (tests run with a test clock). */
const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((r) => setTimeout(r, ms)))

const fill = (store: EventLog.StoreService, session: string, n: number) =>
  Effect.scoped(
    Effect.flatMap(store.open(session, { create: true }), (log) =>
      log.appendAll(Array.from({ length: n }, (_, i) => ({ agent: "main", type: "n", data: { i, text: "ünï ✓" } })))
    )
  )

describe.skipIf(skip !== undefined)(`EventLogPg${skip ? ` (skipped: ${skip})` : ""}`, () => {
  beforeAll(async () => {
    server = await TestPostgres.start()
  }, 120_000)
  afterAll(() => server?.stop())

  it.scoped("a damaged row is LogCorrupted naming the session and seq; nothing is changed", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const store = yield* EventLogPg.storeAt(url(), { schema })
      yield* fill(store, "s", 5)
      yield* sql(`UPDATE "${schema}".muse_events SET line = replace(line, '"i":2', '"i":9') WHERE session = 's'`)
      const before = yield* sql(`SELECT seq, line FROM "${schema}".muse_events ORDER BY seq`)
      const err = yield* Effect.flip(store.read("s"))
      expect(err._tag).toBe("LogCorrupted")
      expect(err.message).toContain(`"${schema}".muse_events`)
      expect(err.message).toContain("session s is corrupt at line 3: checksum mismatch")
      const opened = yield* Effect.flip(Effect.scoped(Effect.flatMap(store.open("s"), (log) => EventLog.readAll(log))))
      expect(opened._tag).toBe("LogCorrupted")
      expect(yield* sql(`SELECT seq, line FROM "${schema}".muse_events ORDER BY seq`)).toEqual(before)
    })
  )

  it.scoped("a log that lost a row will not open: the session row and the events disagree", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const store = yield* EventLogPg.storeAt(url(), { schema })
      yield* fill(store, "s", 5)
      yield* sql(`DELETE FROM "${schema}".muse_events WHERE session = 's' AND seq = 4`)
      const err = yield* Effect.flip(Effect.scoped(store.open("s")))
      expect(err._tag).toBe("LogCorrupted")
      expect(err.message).toContain("the session says its last seq is 4, its events end at 3")
    })
  )

  it.scoped("a writer whose session was taken over cannot append: its commit is refused, the log keeps its seqs", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const store = yield* EventLogPg.storeAt(url(), { schema })
      const log = yield* store.open("s", { create: true })
      yield* log.append({ agent: "main", type: "a", data: 0 })
      // what another process does when the writer's lock connection broke and it opened the session
      yield* sql(`UPDATE "${schema}".muse_sessions SET epoch = epoch + 1, writer = 'elsewhere:4242' WHERE id = 's'`)
      const err = yield* Effect.flip(log.append({ agent: "main", type: "b", data: 1 }))
      expect(err._tag).toBe("LogWriteFailed")
      expect(err.message).toContain("the session was taken over by elsewhere:4242")
      // and it stays refused
      expect((yield* Effect.flip(log.append({ agent: "main", type: "c", data: 2 })))._tag).toBe("LogWriteFailed")
      expect((yield* store.read("s")).map((e) => e.type)).toEqual(["a"])
    })
  )

  it.scoped("connections commit synchronously even when the database says otherwise; fsync off is refused", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      yield* sql("ALTER DATABASE postgres SET synchronous_commit = off")
      yield* Effect.addFinalizer(() => Effect.ignore(sql("ALTER DATABASE postgres RESET synchronous_commit")))
      const plain = yield* Effect.scoped(
        Effect.flatMap(SqlClient.SqlClient, (s) =>
          s.unsafe<{ v: string }>("SELECT current_setting('synchronous_commit') AS v")
        ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url()) })))
      )
      expect(plain[0]!.v).toBe("off")
      const ours = yield* sql("SELECT current_setting('synchronous_commit') AS v")
      expect(ours[0]!.v).toBe("on")
      yield* sql("ALTER SYSTEM SET fsync = off")
      yield* sql("SELECT pg_reload_conf()")
      yield* Effect.addFinalizer(() =>
        Effect.ignore(Effect.zipRight(sql("ALTER SYSTEM RESET fsync"), sql("SELECT pg_reload_conf()")))
      )
      yield* realSleep(300)
      const refused = yield* Effect.flip(EventLogPg.storeAt(url(), { schema }))
      expect(refused.message).toContain("runs with fsync off")
      const allowed = yield* EventLogPg.storeAt(url(), { schema, allowNoFsync: true })
      expect(yield* allowed.sessions).toEqual([])
    })
  )

  it.scoped("its connections keep TCP keepalive on, so a server that vanished is noticed", () =>
    Effect.gen(function* () {
      const port = new URL(url()).port
      yield* Layer.build(EventLogPg.layerClient(url(), { maxConnections: 1 }))
      // this process's established sockets to the server, as the kernel sees them (/proc/net/tcp*:
      // the "tr" field is 2 while a keepalive timer is pending)
      const inodes = new Set(
        fs
          .readdirSync("/proc/self/fd")
          .map((fd) => {
            try {
              return /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`))?.[1]
            } catch {
              return undefined
            }
          })
          .filter((x): x is string => x !== undefined)
      )
      const hexPort = Number(port).toString(16).toUpperCase().padStart(4, "0")
      const ours = ["/proc/net/tcp", "/proc/net/tcp6"]
        .flatMap((f) => (fs.existsSync(f) ? fs.readFileSync(f, "utf8").split("\n").slice(1) : []))
        .map((l) => l.trim().split(/\s+/))
        .filter((c) => c.length > 9 && c[2]!.endsWith(`:${hexPort}`) && c[3] === "01" && inodes.has(c[9]!))
      expect(ours.length).toBeGreaterThan(0)
      for (const c of ours) expect(c[5]!.split(":")[0]).toBe("02")
    })
  )

  it.scoped("appends that wait while a commit is in flight share the next one", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const store = yield* EventLogPg.storeAt(url(), { schema })
      const log = yield* store.open("s", { create: true })
      // every commit is one writing transaction, so the server's transaction counter counts them
      const xid = Effect.map(sql("SELECT txid_current()::text AS x"), (rows) => Number(rows[0]!.x))
      const before = yield* xid
      yield* log.append({ agent: "main", type: "one", data: 0 })
      const single = (yield* xid) - before - 1
      expect(single).toBe(1)
      const start = yield* xid
      yield* Effect.forEach(
        Array.from({ length: 16 }, (_, a) => a),
        (a) =>
          Effect.forEach(
            Array.from({ length: 20 }, (_, i) => i),
            (i) => log.append({ agent: `a${a}`, type: "t", data: { i } })
          ),
        { concurrency: "unbounded" }
      )
      const commits = (yield* xid) - start - 1
      expect((yield* store.read("s")).length).toBe(321)
      // 320 appends from 16 fibers: far fewer commits than appends
      expect(commits).toBeLessThanOrEqual(160)
      expect(commits).toBeGreaterThanOrEqual(20)
    })
  )

  it.scoped("the password of the database URL never reaches the log, a message or the store's name", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const password = EventLogPg.passwordOf(url())!
      expect(password.length).toBeGreaterThan(8)
      const store = yield* EventLogPg.storeAt(url(), { schema })
      expect(store.where).not.toContain(password)
      yield* Effect.scoped(
        Effect.flatMap(store.open("s", { create: true }), (log) =>
          log.append({ agent: "main", type: "tool.completed", data: { output: `DATABASE_URL=${url()}` } })
        )
      )
      const stored = yield* sql(`SELECT line FROM "${schema}".muse_events`)
      expect(String(stored[0]!.line)).not.toContain(password)
      expect(String(stored[0]!.line)).toContain("[REDACTED:MUSE_LOG_PASSWORD]")
      // a server that is not there: the message names the URL without its password
      const wrong = url().replace(/:(\d+)\//, ":1/")
      const err = yield* Effect.flip(EventLogPg.storeAt(wrong, { schema }))
      expect(err.message).toContain("cannot connect to postgres://muse@127.0.0.1:1/postgres")
      expect(err.message).not.toContain(password)
    })
  )

  it.scoped("blobs go to the BlobStore in context when there is one, checked against their hash", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const bucket = new Map<string, Uint8Array>()
      const blobs = BlobStore.make({
        where: "a test bucket",
        put: (hash, data) => Effect.sync(() => void bucket.set(hash, data)),
        get: (hash) => Effect.sync(() => bucket.get(hash))
      })
      const store = yield* EventLogPg.storeAt(url(), { schema }).pipe(Effect.provideService(BlobStore.BlobStore, blobs))
      const hash = yield* Effect.scoped(
        Effect.flatMap(store.open("s", { create: true }), (log) => log.putBlob("file contents"))
      )
      expect([...bucket.keys()]).toEqual([hash])
      expect(yield* sql(`SELECT count(*)::int AS n FROM "${schema}".muse_blobs`)).toEqual([{ n: 0 }])
      expect(new TextDecoder().decode(yield* store.getBlob(hash))).toBe("file contents")
      bucket.set(hash, new TextEncoder().encode("file content"))
      const err = yield* Effect.flip(store.getBlob(hash))
      expect(err._tag).toBe("BlobCorrupted")
      expect(err.message).toContain("(a test bucket) is damaged")
    })
  )

  it.scoped("a redactor given replaces the usual one", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const store = yield* EventLogPg.storeAt(url(), {
        schema,
        redactor: Redactor.make({ secrets: { MY_TOKEN: "tok-abcdefghijklmnop" } })
      })
      const [e] = yield* Effect.scoped(
        Effect.flatMap(store.open("s", { create: true }), (log) =>
          log.appendAll([{ agent: "main", type: "x", data: { t: "tok-abcdefghijklmnop" } }])
        )
      )
      expect(JSON.stringify(e!.data)).toContain("[REDACTED:MY_TOKEN]")
    })
  )

  it.scoped("an exact copy holding a secret is stored sealed, never in plain; it reads back exactly", () =>
    Effect.gen(function* () {
      const schema = yield* freshSchema
      const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-pg-key-"))
      const before = process.env.XDG_CONFIG_HOME
      process.env.XDG_CONFIG_HOME = keyDir
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (before === undefined) delete process.env.XDG_CONFIG_HOME
          else process.env.XDG_CONFIG_HOME = before
          fs.rmSync(keyDir, { recursive: true, force: true })
        })
      )
      const secret = "tok-abcdefghijklmnop"
      const store = yield* EventLogPg.storeAt(url(), {
        schema,
        redactor: Redactor.make({ secrets: { MY_TOKEN: secret } })
      })
      const file = `token = ${secret}\n`
      const { hash, back, plain } = yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* store.open("s", { create: true })
          const hash = yield* log.putBlob(file, { exact: true })
          const plain = yield* log.putBlob(`output ${secret}`)
          return { hash, back: yield* log.getBlob(hash), plain }
        })
      )
      expect(new TextDecoder().decode(back)).toBe(file)
      expect(hash).toBe(createHash("sha256").update(file).digest("hex"))
      const rows = yield* sql(`SELECT hash, data FROM "${schema}".muse_blobs ORDER BY hash`)
      expect(rows.map((r) => r.hash).sort()).toEqual([plain, `${hash}.sealed`].sort())
      for (const r of rows) expect(Buffer.from(r.data as Uint8Array).toString("latin1")).not.toContain(secret)
      expect(fs.statSync(path.join(keyDir, "muse", "blob.key")).mode & 0o777).toBe(0o600)
    })
  )
})
