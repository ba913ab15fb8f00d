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
 * sessions/<id>.checkpoint.json the session's state at its latest checkpoint (see `Checkpoint`)
 * blobs/<ab>/<sha256>          payloads too large for an event line (redacted like the log)
 * blobs/<ab>/<sha256>.sealed   exact copies that hold a secret, encrypted (key: `defaultKeyFile()`)
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
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { Checkpoint, Event, EventLog, Redactor } from "@musekit/core"
import { Chunk, Effect, Either, Layer, Option, type Scope, Stream } from "effect"
import { pidAlive, removeLeftovers } from "./internal/deadPids.js"

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

// crc32 table (the polynomial zlib uses), to extend a checksum by the single byte "}" without a call into C++
const CRC_TABLE = (() => {
  const t = new Int32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    t[n] = c
  }
  return t
})()
const CLOSE_BRACE = 0x7d
const crcPlusBrace = (crc: number): number => {
  const c = ~crc
  return ~(CRC_TABLE[(c ^ CLOSE_BRACE) & 0xff]! ^ (c >>> 8)) >>> 0
}

// `,"crc":"` then 8 lowercase hex digits then `"}`
const CRC_PREFIX = Buffer.from(',"crc":"', "latin1")
const hexValue = (b: number): number => (b >= 0x30 && b <= 0x39 ? b - 0x30 : b >= 0x61 && b <= 0x66 ? b - 0x57 : -1)
/** The checksum written in the suffix starting at `at`, or -1 when the suffix is not one. */
const storedCrc = (bytes: Uint8Array, at: number): number => {
  for (let i = 0; i < CRC_PREFIX.length; i++) if (bytes[at + i] !== CRC_PREFIX[i]) return -1
  let crc = 0
  for (let i = at + CRC_PREFIX.length, end = i + 8; i < end; i++) {
    const h = hexValue(bytes[i]!)
    if (h < 0) return -1
    crc = crc * 16 + h
  }
  const q = at + CRC_PREFIX.length + 8
  return bytes[q] === 0x22 && bytes[q + 1] === CLOSE_BRACE ? crc : -1
}
// `{"v":<digits>,"seq":<digits>,` within the first 40 bytes
const V_PREFIX = Buffer.from('{"v":', "latin1")
const SEQ_KEY = Buffer.from(',"seq":', "latin1")
const envelopeSeq = (bytes: Uint8Array): number => {
  const limit = Math.min(bytes.length, 40)
  for (let i = 0; i < V_PREFIX.length; i++) if (bytes[i] !== V_PREFIX[i]) return -1
  let i = V_PREFIX.length
  const vStart = i
  while (i < limit && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) i++
  if (i === vStart) return -1
  for (let k = 0; k < SEQ_KEY.length; k++, i++) if (i >= limit || bytes[i] !== SEQ_KEY[k]) return -1
  const seqStart = i
  let seq = 0
  while (i < limit && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) seq = seq * 10 + (bytes[i++]! - 0x30)
  return i > seqStart && i < limit && bytes[i] === 0x2c ? seq : -1
}

/** Check one stored line (without newline); returns its seq or a reason it is bad. */
export const verifyLine = (bytes: Buffer): { readonly seq: number } | { readonly bad: string } => {
  if (bytes.length < CRC_SUFFIX_LENGTH + 2) return { bad: "line too short" }
  const bodyEnd = bytes.length - CRC_SUFFIX_LENGTH
  const stored = storedCrc(bytes, bodyEnd)
  if (stored < 0) return { bad: "no checksum" }
  if (crcPlusBrace(zlib.crc32(bytes.subarray(0, bodyEnd))) !== stored) return { bad: "checksum mismatch" }
  const seq = envelopeSeq(bytes)
  if (seq < 0) return { bad: "not an event envelope" }
  return { seq }
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

/** A lock file as found: its inode and the pid in it (`undefined`: no pid in it). `undefined` when missing. */
const lockState = (file: string): { readonly ino: number; readonly pid: number | undefined } | undefined => {
  try {
    const ino = fs.statSync(file).ino
    const pid = Number(fs.readFileSync(file, "utf8").trim())
    return { ino, pid: Number.isInteger(pid) && pid > 0 ? pid : undefined }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw e
  }
}

/** Remove `file` if it is still the one found (same inode). */
const removeIfSame = (file: string, ino: number) => {
  try {
    if (fs.statSync(file).ino === ino) fs.rmSync(file, { force: true })
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
  }
}

/**
 * Create `file` holding our pid, whole or not at all (`false`: it exists): written aside, then
 * linked into place. Where hard links are not supported, an exclusive create.
 */
const createLockFile = (file: string): boolean => {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`
  fs.writeFileSync(tmp, String(process.pid), { mode: 0o600 })
  try {
    fs.linkSync(tmp, file)
    return true
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === "EEXIST") return false
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw e
    try {
      const fd = fs.openSync(file, "wx", 0o600)
      fs.writeSync(fd, String(process.pid))
      fs.closeSync(fd)
      return true
    } catch (e2) {
      if ((e2 as NodeJS.ErrnoException).code === "EEXIST") return false
      throw e2
    }
  } finally {
    fs.rmSync(tmp, { force: true })
  }
}

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** Remove the temporary files (`<lock>.<pid>.<random>`) of lock creators that died before cleaning up. */
const removeDeadLockTemps = (lockFile: string) => {
  const prefix = `${path.basename(lockFile)}.`
  removeLeftovers(
    path.dirname(lockFile),
    (name) => (name.startsWith(prefix) ? /^(\d+)\.[0-9a-f]{8}$/.exec(name.slice(prefix.length))?.[1] : undefined),
    (file) => fs.rmSync(file, { force: true })
  )
}

/**
 * Take the writer lock of a session: a file holding our pid, created whole. A lock whose process
 * is gone is stale and is replaced under a second lock (`<lock>.takeover`), removing only the very
 * file found stale (by inode), so of several processes that find it stale at once exactly one
 * takes it.
 */
const acquireLock = (session: string, lockFile: string): Effect.Effect<void, EventLog.EventLogError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const takeover = `${lockFile}.takeover`
        removeDeadLockTemps(lockFile)
        removeDeadLockTemps(takeover)
        for (let attempt = 0; attempt < 400; attempt++) {
          if (createLockFile(lockFile)) return
          const found = lockState(lockFile)
          if (!found) continue // released meanwhile: try again
          if (found.pid !== undefined && pidAlive(found.pid)) {
            throw new EventLog.SessionLocked({ session, pid: found.pid, lockFile })
          }
          // stale: replace it while holding the takeover lock
          if (!createLockFile(takeover)) {
            const holder = lockState(takeover)
            if (holder && (holder.pid === undefined || !pidAlive(holder.pid))) removeIfSame(takeover, holder.ino)
            sleepSync(5)
            continue
          }
          try {
            const now = lockState(lockFile)
            if (now && now.pid !== undefined && pidAlive(now.pid)) {
              throw new EventLog.SessionLocked({ session, pid: now.pid, lockFile })
            }
            if (now) removeIfSame(lockFile, now.ino)
            if (createLockFile(lockFile)) return
          } finally {
            fs.rmSync(takeover, { force: true })
          }
        }
        throw new Error(`could not take lock ${lockFile}`)
      },
      catch: (e) => (e instanceof EventLog.SessionLocked ? e : sys(session, "lock")(e))
    }),
    () =>
      Effect.sync(() => {
        // only our own lock (a take-over by another process after a pause must not be undone)
        const found = lockState(lockFile)
        if (found?.pid === process.pid) removeIfSame(lockFile, found.ino)
      })
  )

/** Create `file` (mode 0600) holding `bytes`, synced to disk before it returns. */
const writeSynced = (file: string, bytes: Uint8Array) => {
  const fd = fs.openSync(file, "w", 0o600)
  try {
    for (let off = 0; off < bytes.length; ) off += fs.writeSync(fd, bytes, off, bytes.length - off)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Write `bytes` to `target` whole or not at all: written to a temporary file, synced, then renamed.
 * On failure (a full disk) the temporary file is removed, so nothing empty or partial is left behind.
 */
const keepAside = (target: string, bytes: Uint8Array) => {
  const tmp = `${target}.tmp`
  try {
    writeSynced(tmp, bytes)
    fs.renameSync(tmp, target)
  } catch (e) {
    fs.rmSync(tmp, { force: true })
    throw new Error(
      `could not keep the torn tail of ${path.basename(target).replace(/\.torn-\d+$/, "")} aside (${
        (e as Error).message
      }); nothing was cut. Free some disk space and open the session again`
    )
  }
}

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
        keepAside(`${file}.torn-${Date.now()}`, buf.subarray(firstBad.offset))
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

/**
 * Append `buf` and make it durable. The write is a synchronous copy into the page cache (microseconds,
 * and one thread-pool round trip fewer per commit); only the `fdatasync` runs off the main thread.
 */
const writeDurable = (fd: number, buf: Buffer, session: string) =>
  Effect.async<void, EventLog.EventLogError>((resume) => {
    try {
      for (let off = 0; off < buf.length; ) off += fs.writeSync(fd, buf, off, buf.length - off)
    } catch (e) {
      return resume(Effect.fail(sys(session, "write")(e)))
    }
    fs.fdatasync(fd, (err) => resume(err ? Effect.fail(sys(session, "fsync")(err)) : Effect.void))
  })

/** Bytes `read` fetches per file read: whole lines up to this size (a longer line is read alone). */
const READ_CHUNK = 1 << 20

const parseLines = (text: string): Array<Event.Envelope> => {
  const out: Array<Event.Envelope> = []
  for (const l of text.split("\n")) {
    if (l.length === 0) continue
    const e = Event.fromJson(JSON.parse(l))
    if (e) out.push(e)
  }
  return out
}

/**
 * Where the key that seals blobs holding a secret is kept: beside the user's configuration
 * (`$XDG_CONFIG_HOME/muse/blob.key`, else `~/.config/muse/blob.key`), outside the state directory,
 * so that a copied or shared state directory shows no secret.
 */
export const defaultKeyFile = (env: NodeJS.ProcessEnv = process.env): string =>
  path.join(
    env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME !== "" ? env.XDG_CONFIG_HOME : path.join(os.homedir(), ".config"),
    "muse",
    "blob.key"
  )

/** The 32-byte key in `file`, created (mode 0600) on first use. */
const sealingKey = (file: string): Buffer => {
  try {
    const key = fs.readFileSync(file)
    if (key.length === 32) return key
    throw new Error(`${file} is not a key (${key.length} bytes, expected 32)`)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
  }
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`
  fs.writeFileSync(tmp, randomBytes(32), { mode: 0o600 })
  try {
    fs.linkSync(tmp, file) // whole or not at all; a key made meanwhile by another process wins
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  } finally {
    fs.rmSync(tmp, { force: true })
  }
  return sealingKey(file)
}

const SEAL_MAGIC = Buffer.from("muse-sealed-1\n", "latin1")

/** `data` encrypted (AES-256-GCM) and bound to its hash: magic, 12-byte nonce, 16-byte tag, ciphertext. */
const seal = (key: Buffer, hash: string, data: Uint8Array): Buffer => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", key, iv)
  cipher.setAAD(Buffer.from(hash, "latin1"))
  const body = Buffer.concat([cipher.update(data), cipher.final()])
  return Buffer.concat([SEAL_MAGIC, iv, cipher.getAuthTag(), body])
}

const unseal = (key: Buffer, hash: string, sealed: Buffer): Buffer => {
  if (!sealed.subarray(0, SEAL_MAGIC.length).equals(SEAL_MAGIC)) throw new Error("not a sealed blob")
  const at = SEAL_MAGIC.length
  const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(at, at + 12))
  decipher.setAAD(Buffer.from(hash, "latin1"))
  decipher.setAuthTag(sealed.subarray(at + 12, at + 28))
  return Buffer.concat([decipher.update(sealed.subarray(at + 28)), decipher.final()])
}

/**
 * `data` sealed for a store other than the state directory's (a database's blob table, say): the
 * same envelope and key as `blobs/<ab>/<sha256>.sealed`, bound to `hash` (the sha256 of `data`).
 */
export const sealBlob = (hash: string, data: Uint8Array, keyFile: string = defaultKeyFile()): Uint8Array =>
  seal(sealingKey(keyFile), hash, data)

/** The bytes `sealBlob` sealed; throws when the key in `keyFile` is not the one they were sealed with. */
export const unsealBlob = (hash: string, sealed: Uint8Array, keyFile: string = defaultKeyFile()): Uint8Array =>
  unseal(sealingKey(keyFile), hash, Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength))

/** Write `bytes` to `file` durably: a temporary file, synced, renamed into place, the folder synced. */
const writeBlobFile = (file: string, bytes: Uint8Array) => {
  const sub = path.dirname(file)
  fs.mkdirSync(sub, { recursive: true, mode: 0o700 })
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`
  try {
    writeSynced(tmp, bytes)
    fs.renameSync(tmp, file)
  } finally {
    fs.rmSync(tmp, { force: true })
  }
  fsyncDir(sub)
}

/**
 * Content-addressed blobs, shared by every session of a state directory: `blobs/<ab>/<sha256>`.
 * Blobs that hold a secret and must be kept exactly (`putSealed`: a file's content before a write,
 * for a resume to put it back) are encrypted with the key in `keyFile` (see `defaultKeyFile`) and
 * stored as `blobs/<ab>/<sha256>.sealed`, named by the hash of their plain bytes.
 */
export const makeBlobs = (dir: string, session: string, options: { readonly keyFile?: string | undefined } = {}) => ({
  putSealed: (data: Uint8Array): Effect.Effect<string, EventLog.EventLogError> =>
    Effect.try({
      try: () => {
        const hash = createHash("sha256").update(data).digest("hex")
        const file = path.join(dir, hash.slice(0, 2), `${hash}.sealed`)
        if (!fs.existsSync(file)) writeBlobFile(file, seal(sealingKey(options.keyFile ?? defaultKeyFile()), hash, data))
        return hash
      },
      catch: sys(session, "blob write")
    }),
  put: (data: Uint8Array): Effect.Effect<string, EventLog.EventLogError> =>
    Effect.try({
      try: () => {
        const hash = createHash("sha256").update(data).digest("hex")
        const sub = path.join(dir, hash.slice(0, 2))
        const file = path.join(sub, hash)
        if (fs.existsSync(file) && fs.statSync(file).size === data.byteLength) return hash
        writeBlobFile(file, data)
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
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") return Effect.fail(sys(session, "blob read")(e))
        let sealed: Buffer
        try {
          sealed = fs.readFileSync(`${file}.sealed`)
        } catch (e2) {
          if ((e2 as NodeJS.ErrnoException).code === "ENOENT") return Effect.fail(new EventLog.BlobNotFound({ hash }))
          return Effect.fail(sys(session, "blob read")(e2))
        }
        try {
          data = unseal(sealingKey(options.keyFile ?? defaultKeyFile()), hash, sealed)
        } catch (e3) {
          return Effect.fail(
            new EventLog.BlobCorrupted({
              hash,
              file: `${file}.sealed`,
              reason: `it cannot be unsealed with the key in ${options.keyFile ?? defaultKeyFile()} (${(e3 as Error).message})`
            })
          )
        }
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
  /** The key that seals blobs holding a secret (default `defaultKeyFile()`, outside the state directory). */
  readonly keyFile?: string | undefined
  /** How long an event appended without waiting waits to share a sync (default `EventLog.LAZY_COMMIT_MS`). */
  readonly lazyCommitMs?: number | undefined
}

/** Whether `session` can name a session (letters, digits, `.`, `_`, `-`; not starting with `.`). */
export const isSessionId = (session: string): boolean => /^[A-Za-z0-9._-]+$/.test(session) && !session.startsWith(".")

const sessionFile = (dir: string, session: string) => {
  if (!isSessionId(session)) {
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
    // a name that cannot be a session's (`../../etc/passwd`) names none
    if (!options.create && !isSessionId(session)) {
      return yield* new EventLog.SessionNotFound({ session, where: path.join(dir, "sessions") })
    }
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
    // A new session's file is created with its first events in it (written aside, then linked into
    // place), so a crash never leaves a log without its first write: no empty log, no cut first line.
    const fresh = `${file}.new`
    let fd: number | undefined = yield* Effect.try({
      try: () => {
        fs.rmSync(fresh, { force: true }) // a first write that died before it was linked into place
        if (!fs.existsSync(file)) return undefined
        const fd = fs.openSync(file, "a", 0o600)
        fs.fchmodSync(fd, 0o600)
        return fd
      },
      catch: sys(session, "open")
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => fd !== undefined && fs.closeSync(fd)))
    const createWith = (bytes: Buffer) =>
      Effect.try({
        try: () => {
          try {
            writeSynced(fresh, bytes)
            fs.linkSync(fresh, file)
          } finally {
            fs.rmSync(fresh, { force: true })
          }
          fsyncDir(sessionsDir)
          fd = fs.openSync(file, "a", 0o600)
        },
        catch: sys(session, "write")
      })
    const scan: Scan = fd === undefined ? { offsets: [], size: 0 } : yield* scanAndRepair(session, file)
    const offsets = scan.offsets
    let size = scan.size
    const blobs = makeBlobs(path.join(dir, "blobs"), session, { keyFile: options.keyFile })

    const lineEnd = (seq: number) => (seq + 1 < offsets.length ? offsets[seq + 1]! : size)
    /** The last seq in [seq, last] whose line ends within READ_CHUNK bytes of seq's start (at least seq). */
    const chunkEnd = (seq: number, last: number) => {
      const limit = offsets[seq]! + READ_CHUNK
      let lo = seq
      let hi = last
      while (lo < hi) {
        const mid = (lo + hi + 1) >>> 1
        if (lineEnd(mid) <= limit) lo = mid
        else hi = mid - 1
      }
      return lo
    }
    // Reads whole lines, about READ_CHUNK bytes at a time; a longer line is read on its own.
    const readRange = (fromSeq: number, toSeq: number): Stream.Stream<Event.Envelope, EventLog.EventLogError> =>
      Stream.suspend(() => {
        const last = Math.min(toSeq, offsets.length - 1)
        if (fromSeq > last) return Stream.empty
        return Stream.paginateChunkEffect(fromSeq, (seq) =>
          Effect.tryPromise({
            try: async () => {
              const endSeq = chunkEnd(seq, last)
              const start = offsets[seq]!
              const buf = Buffer.allocUnsafe(lineEnd(endSeq) - start)
              const fh = await fs.promises.open(file, "r")
              try {
                for (let got = 0; got < buf.length; ) {
                  const { bytesRead } = await fh.read(buf, got, buf.length - got, start + got)
                  if (bytesRead === 0) throw new Error(`${file} is shorter than its index (at byte ${start + got})`)
                  got += bytesRead
                }
              } finally {
                await fh.close()
              }
              return [
                Chunk.unsafeFromArray(parseLines(buf.toString("utf8"))),
                endSeq < last ? Option.some(endSeq + 1) : Option.none()
              ] as const
            },
            catch: sys(session, "read")
          })
        )
      })

    const backend: EventLog.Backend = {
      lastSeq: offsets.length - 1,
      commit: (batch) =>
        Effect.suspend(() => {
          let text = ""
          const lengths: Array<number> = []
          for (const c of batch) {
            const line = `${withChecksum(c.line)}\n`
            lengths.push(Buffer.byteLength(line, "utf8"))
            text += line
          }
          const bytes = Buffer.from(text, "utf8")
          return Effect.map(fd === undefined ? createWith(bytes) : writeDurable(fd, bytes, session), () => {
            for (const n of lengths) {
              offsets.push(size)
              size += n
            }
          })
        }),
      read: readRange,
      putBlob: blobs.put,
      putSealed: blobs.putSealed,
      getBlob: blobs.get
    }
    return yield* EventLog.make(backend, {
      sessionId: session,
      redactor: options.redactor,
      lazyCommitMs: options.lazyCommitMs
    })
  })

/** The log file of an existing session (for readers). */
const existingLog = (session: string, options: Options): Effect.Effect<string, EventLog.EventLogError> =>
  Effect.gen(function* () {
    const dir = options.dir ?? defaultDir()
    if (!isSessionId(session))
      return yield* new EventLog.SessionNotFound({ session, where: path.join(dir, "sessions") })
    const file = yield* Effect.try({ try: () => sessionFile(dir, session), catch: sys(session, "read") })
    if (!fs.existsSync(file)) return yield* new EventLog.SessionNotFound({ session, where: path.dirname(file) })
    return file
  })

/** Read a session's log without taking the writer lock (for `muse log`, `replay`, other tools). */
export const readSession = (
  session: string,
  options: Options & {
    /** Only the events from this seq on (earlier lines are only stepped over, not checked or parsed). */
    readonly fromSeq?: number | undefined
  } = {}
): Effect.Effect<ReadonlyArray<Event.Envelope>, EventLog.EventLogError> =>
  Effect.gen(function* () {
    const file = yield* existingLog(session, options)
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
          if (options.fromSeq !== undefined && options.fromSeq > 0) {
            const seq = envelopeSeq(bytes)
            if (seq >= 0 && seq < options.fromSeq) {
              pos = nl + 1
              continue
            }
          }
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

/**
 * The first event and the last one of a log file, reading only as much of each end as it takes
 * (64 KiB at first, doubling while a line is longer than what was read).
 */
const readEdges = (file: string, size: number): { first?: Event.Envelope; last?: Event.Envelope } => {
  const fd = fs.openSync(file, "r")
  try {
    const at = (position: number, n: number) => {
      const buf = Buffer.alloc(n)
      fs.readSync(fd, buf, 0, n, position)
      return buf
    }
    let first: Event.Envelope | undefined
    for (let n = Math.min(size, 65536); ; n = Math.min(size, n * 2)) {
      const head = at(0, n)
      const nl = head.indexOf(10)
      if (nl !== -1) {
        first = tryParse(head.subarray(0, nl))
        break
      }
      if (n >= size) break
    }
    let last: Event.Envelope | undefined
    for (let n = Math.min(size, 65536); ; n = Math.min(size, n * 2)) {
      const lines = at(size - n, n)
        .toString("utf8")
        .split("\n")
      // the first piece may be a cut line (unless the read started at the top of the file)
      for (let i = lines.length - 1; i >= (n < size ? 1 : 0) && !last; i--) {
        if (lines[i]!.length > 0) last = tryParse(lines[i]!)
      }
      if (last || n >= size) break
    }
    return { ...(first ? { first } : {}), ...(last ? { last } : {}) }
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

/** The first and the last event of a session's log, reading only the ends of the file. */
export const readEnds = (
  session: string,
  options: Options = {}
): Effect.Effect<{ readonly first?: Event.Envelope; readonly last?: Event.Envelope }, EventLog.EventLogError> =>
  Effect.gen(function* () {
    const file = yield* existingLog(session, options)
    return yield* Effect.try({
      try: () => {
        const size = fs.statSync(file).size
        return size === 0 ? {} : readEdges(file, size)
      },
      catch: sys(session, "read")
    })
  })

/** List the sessions of a state directory, newest first, reading only the edges of each file. */
export const sessions = (
  options: Options = {}
): Effect.Effect<ReadonlyArray<EventLog.SessionInfo>, EventLog.EventLogError> =>
  Effect.try({
    try: () => {
      const dir = path.join(options.dir ?? defaultDir(), "sessions")
      if (!fs.existsSync(dir)) return []
      const out: Array<EventLog.SessionInfo> = []
      // a log without events sorts by when its file was last written
      const when = new Map<string, number>()
      for (const name of fs.readdirSync(dir)) {
        if (!name.endsWith(".jsonl")) continue
        const file = path.join(dir, name)
        const stat = fs.statSync(file)
        const size = stat.size
        const id = name.slice(0, -".jsonl".length)
        when.set(id, stat.mtimeMs)
        if (size === 0) {
          out.push({ id, title: null, started: null, lastEventAt: null, events: 0, bytes: 0 })
          continue
        }
        const { first: head, last } = readEdges(file, size)
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
      const at = (i: EventLog.SessionInfo) => i.lastEventAt ?? when.get(i.id) ?? 0
      return out.sort((a, b) => at(b) - at(a) || (a.id < b.id ? 1 : -1))
    },
    catch: sys("*", "list sessions")
  })

/** A file-backed `EventStore`: the sessions, blobs and checkpoints of one state directory. */
export const makeStore = (options: Options = {}): EventLog.StoreService => {
  const dir = options.dir ?? defaultDir()
  const redactor = options.redactor ?? Redactor.none
  const blobs = makeBlobs(path.join(dir, "blobs"), "*")
  return {
    where: path.join(dir, "sessions"),
    open: (session, opts) => open(session, { ...options, ...opts }),
    sessions: sessions(options),
    exists: (session) =>
      Effect.sync(() => {
        try {
          return fs.existsSync(sessionFile(dir, session))
        } catch {
          return false
        }
      }),
    read: (session, fromSeq) => readSession(session, { dir, fromSeq }),
    ends: (session) => readEnds(session, { dir }),
    getBlob: blobs.get,
    readCheckpoint: (session) =>
      Effect.sync(() => {
        try {
          return readCheckpoint(dir, session)
        } catch (e) {
          return Either.left((e as Error).message)
        }
      }),
    writeCheckpoint: (checkpoint) => writeCheckpoint(dir, checkpoint, redactor)
  }
}

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

/** Where a session's checkpoint is kept. */
export const checkpointFile = (dir: string, session: string) =>
  sessionFile(dir, session).replace(/\.jsonl$/, ".checkpoint.json")

/**
 * Replace the session's checkpoint: written to a temporary file and renamed over the old one, so a
 * crash leaves the old checkpoint or the new one. Not synced: a lost checkpoint costs only speed.
 */
export const writeCheckpoint = (
  dir: string,
  checkpoint: Checkpoint.Checkpoint,
  redactor: Redactor.Redactor
): Effect.Effect<void, EventLog.EventLogError> =>
  Effect.try({
    try: () => {
      const file = checkpointFile(dir, checkpoint.session)
      // one writer per session (it holds the session lock), so one fixed name: a crash leaves no litter
      const tmp = `${file}.tmp`
      fs.writeFileSync(tmp, Checkpoint.encode(checkpoint, redactor), { mode: 0o600 })
      fs.renameSync(tmp, file)
    },
    catch: sys(checkpoint.session, "checkpoint write")
  })

/** The session's checkpoint, or why there is none to use (missing, unreadable, not a checkpoint). */
export const readCheckpoint = (dir: string, session: string): Either.Either<Checkpoint.Checkpoint, string> => {
  let text: string
  try {
    text = fs.readFileSync(checkpointFile(dir, session), "utf8")
  } catch (e) {
    return Either.left((e as NodeJS.ErrnoException).code === "ENOENT" ? "none" : (e as Error).message)
  }
  return Checkpoint.decode(text)
}
