/**
 * The durable, embedded event log: one JSONL file per session, one checksummed line per event,
 * group-committed with `fdatasync`, plus a content-addressed blob store beside it.
 *
 * Layout under the state directory (default `$MUSE_HOME`, else `$XDG_STATE_HOME/muse`, else
 * `~/.local/state/muse`):
 *
 * ```text
 * sessions/<id>.jsonl          the log (mode 0600)
 * sessions/<id>.lock           pid of the process writing it
 * sessions/<id>.jsonl.torn-<n> bytes cut from a torn tail on open, kept for inspection
 * blobs/<ab>/<sha256>          payloads too large for an event line
 * ```
 *
 * @example
 * ```ts
 * import { EventLog } from "@musekit/core"
 * import { EventLogFile } from "@musekit/node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const log = yield* EventLog.EventLog
 *   yield* log.append({ agent: "main", type: "user.message", data: { text: "hello" } }) // durable on return
 * }).pipe(Effect.provide(EventLogFile.layer({ session: "demo", create: true })))
 * ```
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { Event, EventLog, Redactor } from "@musekit/core"
import { Chunk, Effect, Layer, Option, type Scope, Stream } from "effect"

/** The default state directory for sessions and blobs. */
export const defaultDir = (env: NodeJS.ProcessEnv = process.env): string =>
  env.MUSE_HOME ?? path.join(env.XDG_STATE_HOME ?? path.join(os.homedir(), ".local", "state"), "muse")

/** A new, sortable session id: `YYYYMMDD-HHMMSS-xxxxxx` (UTC). */
export const newSessionId = (now = new Date()): string => {
  const p = (n: number) => String(n).padStart(2, "0")
  return `${now.getUTCFullYear()}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())}-${p(now.getUTCHours())}${p(
    now.getUTCMinutes()
  )}${p(now.getUTCSeconds())}-${randomBytes(3).toString("hex")}`
}

const CRC_SUFFIX_LENGTH = ',"crc":"00000000"}'.length

/** The on-disk line for a canonical event line: the same JSON with a trailing `crc` field. */
export const withChecksum = (line: string): string =>
  `${line.slice(0, -1)},"crc":"${zlib.crc32(line).toString(16).padStart(8, "0")}"}`

const crcRe = /,"crc":"([0-9a-f]{8})"\}$/
const seqRe = /^\{"v":\d+,"seq":(\d+),/

/** Check one stored line (without newline); returns its seq or a reason it is bad. */
export const verifyLine = (bytes: Buffer): { readonly seq: number } | { readonly bad: string } => {
  if (bytes.length < CRC_SUFFIX_LENGTH + 2) return { bad: "line too short" }
  const tail = bytes.subarray(bytes.length - CRC_SUFFIX_LENGTH).toString("latin1")
  const m = crcRe.exec(tail)
  if (!m) return { bad: "no checksum" }
  const body = bytes.subarray(0, bytes.length - CRC_SUFFIX_LENGTH)
  const crc = zlib.crc32("}", zlib.crc32(body))
  if (crc !== Number.parseInt(m[1]!, 16)) return { bad: "checksum mismatch" }
  const s = seqRe.exec(body.subarray(0, 40).toString("latin1"))
  if (!s) return { bad: "not an event envelope" }
  return { seq: Number(s[1]) }
}

const sys = (session: string, what: string) => (e: unknown) =>
  new EventLog.LogWriteFailed({ session, reason: `${what}: ${e instanceof Error ? e.message : String(e)}` })

const fsyncDir = (dir: string) => {
  const fd = fs.openSync(dir, "r")
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Take the writer lock of a session: a file holding our pid; a lock of a dead process is stale. */
const acquireLock = (session: string, lockFile: string): Effect.Effect<void, EventLog.EventLogError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        for (let attempt = 0; attempt < 3; attempt++) {
          try {
            const fd = fs.openSync(lockFile, "wx", 0o600)
            fs.writeSync(fd, String(process.pid))
            fs.closeSync(fd)
            return
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
            const pid = Number(fs.readFileSync(lockFile, "utf8").trim())
            if (Number.isInteger(pid) && pid > 0 && pidAlive(pid)) {
              throw new EventLog.SessionLocked({ session, pid, lockFile })
            }
            fs.rmSync(lockFile, { force: true })
          }
        }
        throw new Error(`could not take lock ${lockFile}`)
      },
      catch: (e) => (e instanceof EventLog.SessionLocked ? e : sys(session, "lock")(e))
    }),
    () => Effect.sync(() => fs.rmSync(lockFile, { force: true }))
  )

interface Scan {
  readonly offsets: Array<number>
  readonly size: number
}

/**
 * Validate a log file and repair a torn tail. A bad line followed only by bad bytes is a torn
 * tail: it is moved to a side file and cut off. A bad line followed by a good one is corruption in
 * the middle: `LogCorrupted` names the line and nothing is touched.
 */
export const scanAndRepair = (session: string, file: string): Effect.Effect<Scan, EventLog.EventLogError> =>
  Effect.try({
    try: () => {
      const buf = fs.readFileSync(file)
      const offsets: Array<number> = []
      let pos = 0
      let lineNo = 0
      let firstBad: { offset: number; line: number; reason: string } | undefined
      while (pos < buf.length) {
        lineNo++
        const nl = buf.indexOf(10, pos)
        const end = nl === -1 ? buf.length : nl
        const res = nl === -1 ? { bad: "incomplete last line" } : verifyLine(buf.subarray(pos, end))
        if ("seq" in res && res.seq !== offsets.length) {
          const reason = `expected seq ${offsets.length}, found ${res.seq}`
          if (firstBad) throw new EventLog.LogCorrupted({ file, line: firstBad.line, reason: firstBad.reason })
          throw new EventLog.LogCorrupted({ file, line: lineNo, reason })
        }
        if ("seq" in res) {
          if (firstBad) throw new EventLog.LogCorrupted({ file, line: firstBad.line, reason: firstBad.reason })
          offsets.push(pos)
        } else if (!firstBad) {
          firstBad = { offset: pos, line: lineNo, reason: res.bad }
        }
        pos = end + 1
      }
      if (firstBad) {
        const aside = `${file}.torn-${Date.now()}`
        fs.writeFileSync(aside, buf.subarray(firstBad.offset), { mode: 0o600 })
        const fd = fs.openSync(file, "r+")
        try {
          fs.ftruncateSync(fd, firstBad.offset)
          fs.fsyncSync(fd)
        } finally {
          fs.closeSync(fd)
        }
        return { offsets, size: firstBad.offset }
      }
      return { offsets, size: buf.length }
    },
    catch: (e) => (e instanceof EventLog.LogCorrupted ? e : sys(session, "open")(e))
  })

const writeAll = (fd: number, buf: Buffer, session: string) =>
  Effect.async<void, EventLog.EventLogError>((resume) => {
    const step = (off: number) => {
      fs.write(fd, buf, off, buf.length - off, null, (err, n) => {
        if (err) return resume(Effect.fail(sys(session, "write")(err)))
        if (off + n < buf.length) return step(off + n)
        fs.fdatasync(fd, (err2) => resume(err2 ? Effect.fail(sys(session, "fsync")(err2)) : Effect.void))
      })
    }
    step(0)
  })

const parseLines = (text: string): Array<Event.Envelope> => {
  const out: Array<Event.Envelope> = []
  for (const l of text.split("\n")) {
    if (l.length === 0) continue
    const e = Event.fromJson(JSON.parse(l))
    if (e) out.push(e)
  }
  return out
}

/** Content-addressed blobs, shared by every session of a state directory. */
export const makeBlobs = (dir: string, session: string) => ({
  put: (data: Uint8Array): Effect.Effect<string, EventLog.EventLogError> =>
    Effect.try({
      try: () => {
        const hash = createHash("sha256").update(data).digest("hex")
        const sub = path.join(dir, hash.slice(0, 2))
        const file = path.join(sub, hash)
        if (fs.existsSync(file) && fs.statSync(file).size === data.byteLength) return hash
        fs.mkdirSync(sub, { recursive: true, mode: 0o700 })
        const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`
        const fd = fs.openSync(tmp, "w", 0o600)
        try {
          fs.writeSync(fd, data)
          fs.fsyncSync(fd)
        } finally {
          fs.closeSync(fd)
        }
        fs.renameSync(tmp, file)
        fsyncDir(sub)
        return hash
      },
      catch: sys(session, "blob write")
    }),
  get: (hash: string): Effect.Effect<Uint8Array, EventLog.EventLogError> =>
    Effect.suspend((): Effect.Effect<Uint8Array, EventLog.EventLogError> => {
      if (!/^[0-9a-f]{64}$/.test(hash)) return Effect.fail(new EventLog.BlobNotFound({ hash }))
      const file = path.join(dir, hash.slice(0, 2), hash)
      let data: Buffer
      try {
        data = fs.readFileSync(file)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return Effect.fail(new EventLog.BlobNotFound({ hash }))
        return Effect.fail(sys(session, "blob read")(e))
      }
      const actual = createHash("sha256").update(data).digest("hex")
      if (actual !== hash) {
        return Effect.fail(
          new EventLog.BlobCorrupted({
            hash,
            file,
            reason: `content hashes to ${actual.slice(0, 12)}… (${data.length} bytes); the file is truncated or changed`
          })
        )
      }
      return Effect.succeed(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
    })
})

export interface Options {
  /** State directory (default `defaultDir()`). */
  readonly dir?: string | undefined
  readonly redactor?: Redactor.Redactor | undefined
}

const sessionFile = (dir: string, session: string) => {
  if (!/^[A-Za-z0-9._-]+$/.test(session) || session.startsWith(".")) {
    throw new Error(`invalid session id ${JSON.stringify(session)}: use letters, digits, '.', '_' and '-'`)
  }
  return path.join(dir, "sessions", `${session}.jsonl`)
}

/** Open (or create) one session's log for writing. Holds the session lock until the scope closes. */
export const open = (
  session: string,
  options: Options & EventLog.OpenOptions = {}
): Effect.Effect<EventLog.Service, EventLog.EventLogError, Scope.Scope> =>
  Effect.gen(function* () {
    const dir = options.dir ?? defaultDir()
    const file = yield* Effect.try({ try: () => sessionFile(dir, session), catch: sys(session, "open") })
    const sessionsDir = path.dirname(file)
    yield* Effect.try({
      try: () => fs.mkdirSync(sessionsDir, { recursive: true, mode: 0o700 }),
      catch: sys(session, "mkdir")
    })
    if (!options.create && !fs.existsSync(file)) {
      return yield* new EventLog.SessionNotFound({ session, where: sessionsDir })
    }
    yield* acquireLock(session, `${sessionsDir}/${session}.lock`)
    const fd = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          const existed = fs.existsSync(file)
          const fd = fs.openSync(file, "a", 0o600)
          fs.fchmodSync(fd, 0o600)
          if (!existed) {
            fs.fsyncSync(fd)
            fsyncDir(sessionsDir)
          }
          return fd
        },
        catch: sys(session, "open")
      }),
      (fd) => Effect.sync(() => fs.closeSync(fd))
    )
    const scan = yield* scanAndRepair(session, file)
    const offsets = scan.offsets
    let size = scan.size
    const blobs = makeBlobs(path.join(dir, "blobs"), session)

    const readRange = (fromSeq: number, toSeq: number): Stream.Stream<Event.Envelope, EventLog.EventLogError> =>
      Stream.suspend(() => {
        if (fromSeq > toSeq || fromSeq >= offsets.length) return Stream.empty
        const start = offsets[fromSeq]!
        const end = toSeq + 1 < offsets.length ? offsets[toSeq + 1]! : size
        const chunk = 1 << 20
        return Stream.paginateChunkEffect(start, (pos) =>
          Effect.tryPromise({
            try: async () => {
              const fh = await fs.promises.open(file, "r")
              try {
                const len = Math.min(chunk, end - pos)
                const buf = Buffer.alloc(len)
                await fh.read(buf, 0, len, pos)
                const lastNl = pos + len >= end ? len : buf.lastIndexOf(10) + 1
                const usable = lastNl > 0 ? lastNl : len
                const events = parseLines(buf.subarray(0, usable).toString("utf8"))
                const next = pos + usable
                return [events, next < end ? next : undefined] as const
              } finally {
                await fh.close()
              }
            },
            catch: sys(session, "read")
          }).pipe(
            Effect.map(
              ([events, next]) =>
                [Chunk.unsafeFromArray(events), next === undefined ? Option.none() : Option.some(next)] as const
            )
          )
        ).pipe(Stream.filter((e) => e.seq >= fromSeq && e.seq <= toSeq))
      })

    const backend: EventLog.Backend = {
      lastSeq: offsets.length - 1,
      commit: (batch) =>
        Effect.suspend(() => {
          const lines = batch.map((c) => `${withChecksum(c.line)}\n`)
          const buf = Buffer.from(lines.join(""), "utf8")
          return Effect.map(writeAll(fd, buf, session), () => {
            let pos = size
            for (const l of lines) {
              offsets.push(pos)
              pos += Buffer.byteLength(l, "utf8")
            }
            size = pos
          })
        }),
      read: readRange,
      putBlob: blobs.put,
      getBlob: blobs.get
    }
    return yield* EventLog.make(backend, { sessionId: session, redactor: options.redactor })
  })

/** Read a session's log without taking the writer lock (for `muse log`, `replay`, other tools). */
export const readSession = (
  session: string,
  options: Options = {}
): Effect.Effect<ReadonlyArray<Event.Envelope>, EventLog.EventLogError> =>
  Effect.gen(function* () {
    const dir = options.dir ?? defaultDir()
    const file = yield* Effect.try({ try: () => sessionFile(dir, session), catch: sys(session, "read") })
    if (!fs.existsSync(file)) return yield* new EventLog.SessionNotFound({ session, where: path.dirname(file) })
    return yield* Effect.try({
      try: () => {
        const buf = fs.readFileSync(file)
        const out: Array<Event.Envelope> = []
        let pos = 0
        let lineNo = 0
        while (pos < buf.length) {
          lineNo++
          const nl = buf.indexOf(10, pos)
          if (nl === -1) break // a torn tail is ignored by readers; the writer repairs it
          const bytes = buf.subarray(pos, nl)
          const res = verifyLine(bytes)
          if ("bad" in res) {
            if (buf.indexOf(10, nl + 1) === -1 && nl + 1 >= buf.length) break
            throw new EventLog.LogCorrupted({ file, line: lineNo, reason: res.bad })
          }
          const e = Event.fromJson(JSON.parse(bytes.toString("utf8")))
          if (e) out.push(e)
          pos = nl + 1
        }
        return out
      },
      catch: (e) => (e instanceof EventLog.LogCorrupted ? e : sys(session, "read")(e))
    })
  })

const readEdgeLines = (file: string, size: number) => {
  const fd = fs.openSync(file, "r")
  try {
    const n = Math.min(size, 65536)
    const head = Buffer.alloc(n)
    fs.readSync(fd, head, 0, n, 0)
    const tail = Buffer.alloc(n)
    fs.readSync(fd, tail, 0, n, size - n)
    const firstNl = head.indexOf(10)
    const first = firstNl === -1 ? undefined : head.subarray(0, firstNl)
    const tailText = tail
      .toString("utf8")
      .split("\n")
      .filter((l) => l.length > 0)
    return { first, lastLines: tailText.reverse() }
  } finally {
    fs.closeSync(fd)
  }
}

const tryParse = (s: string | Buffer | undefined): Event.Envelope | undefined => {
  if (s === undefined) return undefined
  try {
    return Event.fromJson(JSON.parse(s.toString()))
  } catch {
    return undefined
  }
}

/** List the sessions of a state directory, newest first, reading only the edges of each file. */
export const sessions = (
  options: Options = {}
): Effect.Effect<ReadonlyArray<EventLog.SessionInfo>, EventLog.EventLogError> =>
  Effect.try({
    try: () => {
      const dir = path.join(options.dir ?? defaultDir(), "sessions")
      if (!fs.existsSync(dir)) return []
      const out: Array<EventLog.SessionInfo> = []
      for (const name of fs.readdirSync(dir)) {
        if (!name.endsWith(".jsonl")) continue
        const file = path.join(dir, name)
        const size = fs.statSync(file).size
        const id = name.slice(0, -".jsonl".length)
        if (size === 0) {
          out.push({ id, title: null, started: null, lastEventAt: null, events: 0, bytes: 0 })
          continue
        }
        const { first, lastLines } = readEdgeLines(file, size)
        const head = tryParse(first)
        let last: Event.Envelope | undefined
        for (const l of lastLines) if ((last = tryParse(l))) break
        const title = head && typeof head.data === "object" && head.data !== null ? (head.data as any).title : null
        out.push({
          id,
          title: typeof title === "string" ? title : null,
          started: head?.at ?? null,
          lastEventAt: last?.at ?? null,
          events: last ? last.seq + 1 : 0,
          bytes: size
        })
      }
      return out.sort((a, b) => (b.lastEventAt ?? 0) - (a.lastEventAt ?? 0) || (a.id < b.id ? 1 : -1))
    },
    catch: sys("*", "list sessions")
  })

/** A file-backed `EventStore`. */
export const makeStore = (options: Options = {}): EventLog.StoreService => ({
  open: (session, opts) => open(session, { ...options, ...opts }),
  sessions: sessions(options),
  exists: (session) =>
    Effect.sync(() => {
      try {
        return fs.existsSync(sessionFile(options.dir ?? defaultDir(), session))
      } catch {
        return false
      }
    })
})

/** Redactor for this process: every credential-looking environment variable. */
export const envRedactor = (env: NodeJS.ProcessEnv = process.env): Redactor.Redactor =>
  Redactor.make({ secrets: Redactor.secretsFromEnv(env) })

export const layerStore = (options: Options = {}): Layer.Layer<EventLog.EventStore> =>
  Layer.sync(EventLog.EventStore, () => makeStore({ redactor: envRedactor(), ...options }))

/** The file log of one session as the `EventLog` layer. */
export const layer = (
  options: Options & EventLog.OpenOptions & { readonly session: string }
): Layer.Layer<EventLog.EventLog, EventLog.EventLogError> =>
  Layer.scoped(EventLog.EventLog, open(options.session, { redactor: envRedactor(), ...options }))
