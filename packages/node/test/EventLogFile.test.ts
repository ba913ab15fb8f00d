import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { EventLog, Redactor } from "@musekit/core"
import { Effect, Exit, Scope } from "effect"
import { EventLogFile } from "../src/index.js"

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "muse-log-"))

const withLog = <A, E>(
  dir: string,
  session: string,
  f: (log: EventLog.Service) => Effect.Effect<A, E>,
  create = true
) => Effect.scoped(Effect.flatMap(EventLogFile.open(session, { dir, create }), f))

const fill = (dir: string, n: number) =>
  withLog(dir, "s1", (log) =>
    Effect.forEach(
      Array.from({ length: n }, (_, i) => i),
      (i) => log.append({ agent: "main", type: "test.n", data: { i, text: "ünïcödé ✓" } })
    )
  )

describe("EventLogFile", () => {
  it.effect("the log file is created 0600 and reopening continues it", () =>
    Effect.gen(function* () {
      const dir = tmp()
      yield* fill(dir, 10)
      const file = path.join(dir, "sessions", "s1.jsonl")
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      const more = yield* withLog(dir, "s1", (log) => log.append({ agent: "main", type: "x", data: {} }))
      expect(more.seq).toBe(10)
      const all = yield* EventLogFile.readSession("s1", { dir })
      expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 11 }, (_, i) => i))
      expect((all[3]!.data as any).text).toBe("ünïcödé ✓")
    })
  )

  it.effect("a torn tail is cut off, kept aside, and the session opens", () =>
    Effect.gen(function* () {
      const dir = tmp()
      yield* fill(dir, 5)
      const file = path.join(dir, "sessions", "s1.jsonl")
      const good = fs.readFileSync(file)
      fs.appendFileSync(file, '{"v":1,"seq":5,"id":"e5","at":1,"agent":"main","par')
      const e = yield* withLog(dir, "s1", (log) => log.append({ agent: "main", type: "after", data: null }))
      expect(e.seq).toBe(5)
      const aside = fs.readdirSync(path.join(dir, "sessions")).filter((f) => f.includes(".torn-"))
      expect(aside).toHaveLength(1)
      expect(fs.readFileSync(path.join(dir, "sessions", aside[0]!), "utf8")).toBe(
        '{"v":1,"seq":5,"id":"e5","at":1,"agent":"main","par'
      )
      expect(fs.readFileSync(file).subarray(0, good.length).equals(good)).toBe(true)
    })
  )

  it.effect("a complete last line with a bad checksum is also a torn tail", () =>
    Effect.gen(function* () {
      const dir = tmp()
      yield* fill(dir, 3)
      const file = path.join(dir, "sessions", "s1.jsonl")
      const text = fs.readFileSync(file, "utf8")
      fs.writeFileSync(file, text.replace(/"i":2/, '"i":7'))
      const all = yield* withLog(dir, "s1", (log) => EventLog.readAll(log))
      expect(all.map((e) => e.seq)).toEqual([0, 1])
    })
  )

  it.effect("a new session's file is created with its first events in it, never before", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const file = path.join(dir, "sessions", "s1.jsonl")
      const existsBeforeAppend = yield* withLog(dir, "s1", () => Effect.sync(() => fs.existsSync(file)))
      expect(existsBeforeAppend).toBe(false)
      expect(yield* Effect.flip(withLog(dir, "s1", (log) => log.lastSeq, false))).toMatchObject({
        _tag: "SessionNotFound"
      })
      const seen = yield* withLog(dir, "s1", (log) =>
        Effect.gen(function* () {
          yield* log.appendAll([
            { agent: "main", type: "session.started", data: { title: "t" } },
            { agent: "main", type: "user.input", data: { text: "the task" } }
          ])
          return fs.readFileSync(file, "utf8").split("\n").filter(Boolean).length
        })
      )
      expect(seen).toBe(2)
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      expect(fs.readdirSync(path.join(dir, "sessions")).sort()).toEqual(["s1.jsonl"])
    })
  )

  it.effect(
    "an empty log, or one whose first line is torn, opens as an empty session; a stale lock is taken over",
    () =>
      Effect.gen(function* () {
        const dir = tmp()
        const sessions = path.join(dir, "sessions")
        fs.mkdirSync(sessions, { recursive: true })
        fs.writeFileSync(path.join(sessions, "empty.jsonl"), "", { mode: 0o600 })
        fs.writeFileSync(path.join(sessions, "torn.jsonl"), '{"v":1,"seq":0,"id":"e0","at":1,"ag', { mode: 0o600 })
        // the lock of a process that died (pid 2^22 + 1 is above the kernel's limit: no such process)
        fs.writeFileSync(path.join(sessions, "empty.lock"), String(4194305))
        for (const id of ["empty", "torn"]) {
          expect(yield* EventLogFile.readSession(id, { dir })).toEqual([])
          const e = yield* withLog(dir, id, (log) => log.append({ agent: "main", type: "x", data: null }), false)
          expect(e.seq).toBe(0)
          expect((yield* EventLogFile.readSession(id, { dir })).map((x) => x.type)).toEqual(["x"])
        }
        expect(fs.existsSync(path.join(sessions, "empty.lock"))).toBe(false)
        const aside = fs.readdirSync(sessions).filter((f) => f.startsWith("torn.jsonl.torn-"))
        expect(aside).toHaveLength(1)
        expect(fs.readFileSync(path.join(sessions, aside[0]!), "utf8")).toBe('{"v":1,"seq":0,"id":"e0","at":1,"ag')
      })
  )

  it("a torn tail that cannot be kept aside (disk full) is left in place, with no empty side file", {
    timeout: 180_000
  }, () => {
    const dir = tmp()
    const file = path.join(dir, "sessions", "s1.jsonl")
    return Effect.runPromise(fill(dir, 3)).then(() => {
      const torn = `{"v":1,"seq":3,"id":"e3","at":1,"agent":"main","parent":null,"type":"big","data":"${"x".repeat(16_384)}`
      fs.appendFileSync(file, torn)
      const before = fs.readFileSync(file)
      // a file size limit of 8 KiB: the lock fits, the 16 KiB torn tail does not (EFBIG, as ENOSPC would)
      const fixture = path.join(import.meta.dirname, "fixtures", "open-log.ts")
      const r = spawnSync(
        "bash",
        ["-c", 'ulimit -f 8; exec "$0" --import tsx "$@"', process.execPath, fixture, dir, "s1"],
        {
          encoding: "utf8",
          cwd: path.join(import.meta.dirname, "..")
        }
      )
      const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!)
      expect(out.error).toContain("could not keep the torn tail of s1.jsonl aside")
      expect(out.error).toContain("nothing was cut")
      expect(fs.readdirSync(path.join(dir, "sessions")).filter((f) => f !== "s1.jsonl")).toEqual([])
      expect(fs.readFileSync(file).equals(before)).toBe(true)
      // with room again, the same log opens and the tail is kept aside whole
      const again = spawnSync(process.execPath, ["--import", "tsx", fixture, dir, "s1"], {
        encoding: "utf8",
        cwd: path.join(import.meta.dirname, "..")
      })
      expect(JSON.parse(again.stdout.trim())).toEqual({ lastSeq: 2 })
      const aside = fs.readdirSync(path.join(dir, "sessions")).filter((f) => f.includes(".torn-"))
      expect(fs.readFileSync(path.join(dir, "sessions", aside[0]!), "utf8")).toBe(torn)
    })
  })

  it.effect("a corrupt line in the middle is a clear error naming file and line; nothing is deleted", () =>
    Effect.gen(function* () {
      const dir = tmp()
      yield* fill(dir, 5)
      const file = path.join(dir, "sessions", "s1.jsonl")
      const lines = fs.readFileSync(file, "utf8").split("\n")
      lines[2] = lines[2]!.replace('"i":2', '"i":9')
      const damaged = lines.join("\n")
      fs.writeFileSync(file, damaged)
      const err = yield* Effect.flip(withLog(dir, "s1", (log) => log.lastSeq))
      expect(err._tag).toBe("LogCorrupted")
      expect(err.message).toBe(
        `event log ${file} is corrupt at line 3: checksum mismatch. Nothing was deleted; move the file aside or repair that line by hand.`
      )
      expect(fs.readFileSync(file, "utf8")).toBe(damaged)
      expect(fs.readdirSync(path.join(dir, "sessions")).filter((f) => f.includes(".torn-"))).toHaveLength(0)
    })
  )

  it.effect(
    "no secret reaches the blob store: outputs are redacted, exact copies are sealed with a key kept elsewhere",
    () =>
      Effect.gen(function* () {
        const dir = tmp()
        const keyFile = path.join(tmp(), "config", "muse", "blob.key")
        const redactor = Redactor.make({ secrets: { MY_SERVICE_TOKEN: "tok-0123456789abcdef" } })
        const secretFile = "const key = 'sk-proj-abcdefghijklmnopqrstuvwx'\nconst t = 'tok-0123456789abcdef'\n"
        const { exact, output } = yield* Effect.scoped(
          Effect.gen(function* () {
            const log = yield* EventLogFile.open("s1", { dir, create: true, redactor, keyFile })
            const output = yield* log.putBlob(`env:\nMY_SERVICE_TOKEN=tok-0123456789abcdef\n${"x".repeat(40_000)}`)
            const exact = yield* log.putBlob(secretFile, { exact: true })
            return { exact, output }
          })
        )
        const files: Array<string> = []
        const walk = (d: string) => {
          for (const e of fs.readdirSync(d, { withFileTypes: true })) {
            const p = path.join(d, e.name)
            if (e.isDirectory()) walk(p)
            else files.push(p)
          }
        }
        walk(dir)
        for (const f of files) {
          const bytes = fs.readFileSync(f).toString("latin1")
          expect(bytes).not.toContain("tok-0123456789abcdef")
          expect(bytes).not.toContain("sk-proj-abcdefghijklmnopqrstuvwx")
        }
        expect(files.some((f) => f.endsWith(`${exact}.sealed`))).toBe(true)
        expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600)
        // read back: the output redacted, the exact copy exactly
        const blobs = EventLogFile.makeBlobs(path.join(dir, "blobs"), "s1", { keyFile })
        expect(new TextDecoder().decode(yield* blobs.get(output))).toContain(
          "MY_SERVICE_TOKEN=[REDACTED:MY_SERVICE_TOKEN]"
        )
        expect(new TextDecoder().decode(yield* blobs.get(exact))).toBe(secretFile)
        // with another key it cannot be read, and says so
        const other = path.join(tmp(), "other.key")
        const err = yield* Effect.flip(
          EventLogFile.makeBlobs(path.join(dir, "blobs"), "s1", { keyFile: other }).get(exact)
        )
        expect(err._tag).toBe("BlobCorrupted")
        expect(err.message).toContain("cannot be unsealed with the key in")
      })
  )

  it.effect("a truncated blob is reported as corrupted, a missing one as not found", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const payload = "x".repeat(10_000)
      const hash = yield* withLog(dir, "s1", (log) => log.putBlob(payload))
      const blobFile = path.join(dir, "blobs", hash.slice(0, 2), hash)
      expect(fs.readFileSync(blobFile, "utf8")).toBe(payload)
      fs.truncateSync(blobFile, 4096)
      const err = yield* Effect.flip(withLog(dir, "s1", (log) => log.getBlob(hash)))
      expect(err._tag).toBe("BlobCorrupted")
      expect(err.message).toContain(`blob ${hash} (${blobFile}) is damaged`)
      const missing = yield* Effect.flip(withLog(dir, "s1", (log) => log.getBlob("ab".repeat(32))))
      expect(missing._tag).toBe("BlobNotFound")
    })
  )

  it.effect("a second writer on the same session gets SessionLocked; a stale lock is taken over", () =>
    Effect.gen(function* () {
      const dir = tmp()
      yield* fill(dir, 1)
      const scope = yield* Scope.make()
      yield* EventLogFile.open("s1", { dir }).pipe(Scope.extend(scope))
      const err = yield* Effect.flip(withLog(dir, "s1", (log) => log.lastSeq, false))
      expect(err._tag).toBe("SessionLocked")
      expect(err.message).toContain(`session s1 is open for writing by process ${process.pid}`)
      yield* Scope.close(scope, Exit.void)
      // a lock left by a dead process (SIGKILL) is stale
      fs.writeFileSync(path.join(dir, "sessions", "s1.lock"), "999999")
      expect(yield* withLog(dir, "s1", (log) => log.lastSeq, false)).toBe(0)
    })
  )

  it.effect("readSession from a seq returns only the events from it on; readEnds the first and last", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const drafts = Array.from({ length: 50 }, (_, i) => ({ agent: "main", type: "n", data: { i } }))
      yield* withLog(dir, "tail", (log) => log.appendAll(drafts))
      const tail = yield* EventLogFile.readSession("tail", { dir, fromSeq: 45 })
      expect(tail.map((e) => e.seq)).toEqual([45, 46, 47, 48, 49])
      expect((yield* EventLogFile.readSession("tail", { dir })).slice(45)).toEqual(tail)
      const ends = yield* EventLogFile.readEnds("tail", { dir })
      expect([ends.first?.seq, ends.last?.seq]).toEqual([0, 49])
    })
  )

  it.effect("sessions reads as much of each end as its longest line takes", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const long = "x".repeat(300_000)
      yield* withLog(dir, "long", (log) =>
        log.appendAll([
          { agent: "main", type: "session.started", data: { title: "long lines", instructions: long } },
          { agent: "main", type: "user.message", data: { text: "hi" } },
          { agent: "main", type: "tool.completed", data: { result: long } }
        ])
      )
      const [info] = yield* EventLogFile.sessions({ dir })
      expect(info).toMatchObject({ id: "long", title: "long lines", events: 3 })
    })
  )
})
