/**
 * Loads a CommonJS script with a V8 code cache, so a second start skips parsing and compiling.
 * Node 20 keeps no compile cache for ES modules; `muse` runs its commands from `dist/boot.cjs`
 * (the same code as the ES module chunks, as one script) through this loader.
 *
 * The cache file's name carries the script's length and CRC-32, the Node version, architecture and V8
 * version, and a digest of the Node and V8 flags (`process.execArgv`, `NODE_OPTIONS`: V8 rejects a cache
 * made under other flags), so a new build, a new Node or other flags never read an old cache. The build
 * writes the script's CRC-32 beside it (`boot.cjs.sum`, see {@link writeScriptSum}), read at start instead of
 * hashing the whole script; a missing sum, or one older than the script or of another length, is computed
 * again. The cache's header holds a CRC-32 of the payload: a truncated or corrupt file is ignored
 * (and rewritten), never handed to V8. A cache that cannot be read or written (read-only folder, no
 * home) only costs the compile it would have saved.
 *
 * @example
 * ```ts
 * import { loadScript, writeScriptSum } from "./codeCache.js"
 * writeScriptSum("/path/to/dist/boot.cjs") // at build time: dist/boot.cjs.sum
 * const { exports } = loadScript("/path/to/dist/boot.cjs", { dirs: ["/path/to/dist/.code-cache"] })
 * const { main } = exports as { main: (...args: Array<unknown>) => Promise<number> }
 * ```
 */
import { isAscii } from "node:buffer"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import * as vm from "node:vm"
import { crc32 } from "node:zlib"

const MAGIC = "muse-code-cache-1\n"
const DIGEST = 4
const STALE_MS = 7 * 24 * 60 * 60 * 1000

/** What happened to the cache on this load (for tests and `MUSE_DEBUG_CODE_CACHE`). */
export type CacheState = "hit" | "missing" | "corrupt" | "rejected" | "untrusted" | "off"

export interface Loaded {
  readonly exports: unknown
  readonly cache: CacheState
  /** the cache file read or to be written (undefined when no folder is usable) */
  readonly cacheFile: string | undefined
  /** writes the cache now if this load did not use one; false when nothing was written */
  readonly persist: () => boolean
}

export interface LoadOptions {
  /** folders to keep the cache in, first usable wins (missing ones are created) */
  readonly dirs: ReadonlyArray<string>
  /** false: compile without a cache and write none */
  readonly enabled?: boolean
  /** called once the script is compiled (its cache read, or not), before it runs */
  readonly compiled?: (cache: CacheState) => void
}

const SUM_MAGIC = "muse-script-sum-1"
/** A sum file's one line: magic, length, CRC-32 (hex), and whether the script is all ASCII. */
const SUM_LINE = new RegExp(`^${SUM_MAGIC} (\\d+) ([0-9a-f]{8}) (ascii|utf8)\\n$`)

/** Where the build keeps a script's sum: beside it. */
export const sumFile = (file: string): string => `${file}.sum`

/**
 * Writes `file`'s length, CRC-32 and whether it is all ASCII beside it (`<file>.sum`); the build calls
 * it once after writing the script, so a start need not hash the script.
 */
export const writeScriptSum = (file: string): void => {
  const bytes = fs.readFileSync(file)
  fs.writeFileSync(
    sumFile(file),
    `${SUM_MAGIC} ${bytes.length} ${digest(bytes).toString("hex")} ${isAscii(bytes) ? "ascii" : "utf8"}\n`
  )
}

interface Sum {
  readonly crc: string
  readonly ascii: boolean
}

/**
 * The sum the build wrote, when it still describes the script: same length, and written no earlier
 * than the script was, by both its modification and its change time (a script changed after its
 * sum, even with its modification time set back, or a sum copied before its script, is not trusted
 * and the caller computes one).
 */
const readScriptSum = (file: string, script: fs.Stats): Sum | undefined => {
  try {
    const at = sumFile(file)
    const st = fs.statSync(at)
    if (!st.isFile() || st.size > 200 || st.mtimeMs < script.mtimeMs || st.ctimeMs < script.ctimeMs) return undefined
    const m = SUM_LINE.exec(fs.readFileSync(at, "latin1"))
    if (m === null || Number(m[1]) !== script.size) return undefined
    return { crc: m[2]!, ascii: m[3] === "ascii" }
  } catch {
    return undefined
  }
}

/** The Node and V8 flags this process runs under (V8 takes no cache made under other flags). */
const flagsDigest = (): string =>
  digest(Buffer.from([...process.execArgv, process.env.NODE_OPTIONS ?? ""].join("\0"))).toString("hex")

const digest = (data: Uint8Array): Buffer => {
  const out = Buffer.alloc(DIGEST)
  out.writeUInt32BE(crc32(data))
  return out
}

/** A cache file: MAGIC, CRC-32 of the payload, the payload V8 produced. */
const encode = (payload: Buffer): Buffer => Buffer.concat([Buffer.from(MAGIC, "latin1"), digest(payload), payload])

const decode = (file: Buffer): Buffer | undefined => {
  const head = MAGIC.length + DIGEST
  if (file.length <= head || file.toString("latin1", 0, MAGIC.length) !== MAGIC) return undefined
  const payload = file.subarray(head)
  return digest(payload).equals(file.subarray(MAGIC.length, head)) ? payload : undefined
}

/**
 * A cache is code this process runs: only one that this user owns and nobody else can write (the
 * file and its folder) is read or written. Where there are no user ids (Windows) there is no check.
 */
const ownedPrivately = (st: fs.Stats): boolean => {
  const uid = process.getuid?.()
  return uid === undefined || (st.uid === uid && (st.mode & 0o022) === 0)
}

const privateDir = (dir: string): boolean => {
  try {
    const st = fs.lstatSync(dir)
    return st.isDirectory() && ownedPrivately(st)
  } catch {
    return false
  }
}

const readIfPresent = (file: string): Buffer | "untrusted" | undefined => {
  let fd: number | undefined
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0))
    const st = fs.fstatSync(fd)
    if (!st.isFile() || !ownedPrivately(st) || !privateDir(path.dirname(file))) return "untrusted"
    return fs.readFileSync(fd)
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/** A name this module gave a cache file (the only files it ever removes). */
const CACHE_NAME = /^[0-9a-z]+-[0-9a-f]{8}-v[0-9.]+-[a-z0-9]+-[0-9a-z.-]+\.bin$/

/**
 * Writes through a temporary file of its own (created exclusively, readable by this user alone)
 * and a rename, so a reader never sees half a cache and nothing planted is written through.
 */
const writeAtomically = (file: string, data: Buffer): boolean => {
  const dir = path.dirname(file)
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`)
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    if (!privateDir(dir)) return false
    fs.writeFileSync(tmp, data, { flag: "wx", mode: 0o600 })
    fs.renameSync(tmp, file)
    return true
  } catch {
    try {
      fs.rmSync(tmp, { force: true })
    } catch {}
    return false
  }
}

/**
 * Compiles and runs `file` as a CommonJS module (its own `require`, `module`, `__filename`,
 * `__dirname`; the script must not use `import()`) with a code cache from the first usable folder.
 */
export const loadScript = (file: string, options: LoadOptions): Loaded => {
  const fd = fs.openSync(file, "r")
  let bytes: Buffer
  let sum: Sum | undefined
  try {
    sum = readScriptSum(file, fs.fstatSync(fd))
    bytes = fs.readFileSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  if (sum === undefined) sum = { crc: digest(bytes).toString("hex"), ascii: isAscii(bytes) }
  // an ASCII file becomes a one-byte string without decoding (the build escapes everything else)
  const source = sum.ascii ? bytes.toString("latin1") : bytes.toString("utf8")
  const enabled = options.enabled !== false && options.dirs.length > 0
  const key = enabled
    ? `${bytes.length.toString(36)}-${sum.crc}-${process.version}-${process.arch}-${process.versions.v8}-f${flagsDigest()}.bin`
    : undefined
  let cacheFile = key === undefined ? undefined : path.join(options.dirs[0]!, key)
  let cachedData: Buffer | undefined
  let state: CacheState = enabled ? "missing" : "off"
  if (key !== undefined) {
    for (const dir of options.dirs) {
      const candidate = path.join(dir, key)
      const raw = readIfPresent(candidate)
      if (raw === undefined) continue
      if (raw === "untrusted") {
        state = "untrusted"
        continue
      }
      cacheFile = candidate
      cachedData = decode(raw)
      state = cachedData === undefined ? "corrupt" : "hit"
      // a damaged cache here may be followed by a good one in the next folder
      if (cachedData !== undefined) break
    }
  }
  const wrapper = `(function (exports, require, module, __filename, __dirname) {${source}\n})`
  const script = new vm.Script(wrapper, {
    filename: file,
    ...(cachedData === undefined ? {} : { cachedData })
  })
  if (cachedData !== undefined && script.cachedDataRejected === true) state = "rejected"
  options.compiled?.(state)
  const module = { exports: {} as unknown }
  const run = script.runInThisContext() as (...args: Array<unknown>) => void
  run.call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file))
  let persisted = false
  const persist = (): boolean => {
    if (persisted || key === undefined || state === "hit") return false
    persisted = true
    const data = encode(script.createCachedData())
    for (const dir of options.dirs) {
      if (!writeAtomically(path.join(dir, key), data)) continue
      // caches of other builds or Node versions not written for a week are left over from
      // upgrades (another install sharing the folder rewrites its own when it next runs)
      try {
        const old = Date.now() - STALE_MS
        for (const name of fs.readdirSync(dir)) {
          if (name === key || !CACHE_NAME.test(name)) continue
          const file = path.join(dir, name)
          if (fs.statSync(file).mtimeMs < old) fs.rmSync(file, { force: true })
        }
      } catch {}
      return true
    }
    return false
  }
  return { exports: module.exports, cache: state, cacheFile, persist }
}

/**
 * Where `muse` keeps its code cache: `$MUSE_CODE_CACHE_DIR` when set; else beside the bundle
 * (`.code-cache/`), or, when that folder is read-only, `$XDG_CACHE_HOME/muse/code-cache`
 * (default `~/.cache/muse/code-cache`).
 */
export const cacheDirs = (script: string, env: NodeJS.ProcessEnv): ReadonlyArray<string> => {
  if (env.MUSE_CODE_CACHE_DIR !== undefined && env.MUSE_CODE_CACHE_DIR !== "")
    return [path.resolve(env.MUSE_CODE_CACHE_DIR)]
  const dirs = [path.join(path.dirname(script), ".code-cache")]
  const xdg = env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== "" ? env.XDG_CACHE_HOME : undefined
  const home = env.HOME !== undefined && env.HOME !== "" ? env.HOME : undefined
  const base = xdg ?? (home === undefined ? undefined : path.join(home, ".cache"))
  if (base !== undefined && path.isAbsolute(base)) dirs.push(path.join(base, "muse", "code-cache"))
  return dirs
}
