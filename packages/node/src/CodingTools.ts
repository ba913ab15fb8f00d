/**
 * The built-in coding tools: `read_file`, `write_file`, `edit_file`, `list_files`, `grep` and
 * `run_shell`.
 *
 * Every handler resolves paths through the calling agent's `Workspace` (`ctx.workspace`), never on
 * its own, so an agent rooted in a worktree cannot touch anything outside it: `..`, absolute paths
 * outside and symlinks leading out are refused with the workspace's `PathEscape` message. Tools that
 * change a file return `{ path, before, after, diff }` (sha256 of the content before — `null` for a
 * new file — and after, plus a unified diff) and write atomically.
 *
 * @example
 * ```ts
 * import { Tools } from "@musekit/core"
 * import { CodingTools, WorkspaceNode } from "@musekit/node"
 * import { Layer } from "effect"
 *
 * const ToolsLive = CodingTools.layer({ shellTimeoutMs: 60_000 })
 * const WorkspaceLive = WorkspaceNode.layer("/path/to/repo")
 * const defs = CodingTools.make({ grepEngine: "js" })   // ReadonlyArray<Tools.Definition>
 * ```
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import type { Workspace } from "@musekit/core"
import { Tools } from "@musekit/core"
import { Effect, type Layer, Option, Schema } from "effect"
import { writeFileAtomic } from "./internal/atomicWrite.js"
import { listTree } from "./internal/fileListing.js"
import { planGlob } from "./internal/pathGlob.js"
import { findRipgrep } from "./internal/ripgrep.js"
import { runShell as runShellProcess } from "./internal/shellProcess.js"
import { SearchFailed, search } from "./internal/textSearch.js"
import * as Descriptions from "./internal/toolDescriptions.js"
import { unifiedDiff } from "./internal/unifiedDiff.js"
import * as Sandbox from "./Sandbox.js"

/** Tool names, as the model sees them. */
export const names = {
  readFile: "read_file",
  writeFile: "write_file",
  editFile: "edit_file",
  listFiles: "list_files",
  grep: "grep",
  runShell: "run_shell"
} as const

export interface Options {
  /** Most bytes of numbered lines `read_file` returns at once (default 256 KiB). */
  readonly maxReadBytes?: number | undefined
  /** Default and largest number of entries `list_files` returns (default 1000 / 10000). */
  readonly listLimit?: number | undefined
  readonly listMaxLimit?: number | undefined
  /** Default and largest number of matches `grep` returns (default 200 / 5000). */
  readonly grepLimit?: number | undefined
  readonly grepMaxLimit?: number | undefined
  /**
   * `auto` (default): ripgrep (the one `@vscode/ripgrep` ships for this platform, else `rg` on
   * PATH), else the JS search; `js` forces the fallback.
   */
  readonly grepEngine?: "auto" | "ripgrep" | "js" | undefined
  /** The ripgrep binary (default: the bundled one, else `rg` found on PATH). */
  readonly ripgrepPath?: string | undefined
  /**
   * How long `grep` goes on counting once it has more matches than it shows (default 300 ms; a
   * third of it for a pattern already found more than ten times over); past it, a pattern found
   * all over a large tree is reported with lower-bound totals.
   */
  readonly grepCountMs?: number | undefined
  /** Default and largest `run_shell` timeout (default 120 s / 10 min). */
  readonly shellTimeoutMs?: number | undefined
  readonly shellMaxTimeoutMs?: number | undefined
  /** Output `run_shell` keeps (its tail; default 64 KiB). */
  readonly shellMaxOutputBytes?: number | undefined
  /** The shell run as `<shell> -c <command>` (default `sh`). */
  readonly shell?: string | undefined
  /** Longest diff returned by file-changing tools (default 64 KiB; the hashes are always exact). */
  readonly maxDiffBytes?: number | undefined
  /**
   * The OS sandbox `run_shell` runs its commands in. Default: the `Sandbox` service of the running
   * program, if it has one (the session runtime provides it); without either they run unsandboxed.
   */
  readonly sandbox?: Sandbox.Service | undefined
}

/** What `write_file` and `edit_file` return. */
export interface FileChange {
  readonly path: string
  /** sha256 hex of the content before, `null` when the file did not exist. */
  readonly before: string | null
  /** sha256 hex of the content after. */
  readonly after: string
  readonly diff: string
  /** Lines added and removed by the change (exact, also when `diff` was cut). */
  readonly added: number
  readonly removed: number
  readonly note?: string
}

export interface ReadResult {
  readonly path: string
  /** Numbered lines: `"     1\tfirst line\n     2\t..."`. */
  readonly content: string
  readonly start_line: number
  readonly end_line: number
  readonly total_lines: number
  readonly note?: string
}

export interface ListResult {
  /** In path order. */
  readonly files: ReadonlyArray<string>
  /** More files exist than are listed (the listing stops at its limit). */
  readonly truncated: boolean
  readonly note?: string
}

export interface GrepResult {
  /** The first matching lines in path order, as `path:line: text` (paths relative to the workspace root). */
  readonly matches: ReadonlyArray<string>
  /** Matching lines in all, and the files they are in. */
  readonly total: number
  readonly files: number
  /** `false` when counting stopped early (a pattern found all over a large tree): the totals are lower bounds. */
  readonly counted_all?: false
  readonly truncated: boolean
  readonly note?: string
}

export interface ShellResult {
  /** `null` when the command was killed by a signal (e.g. on timeout). */
  readonly exit_code: number | null
  readonly output: string
  readonly timed_out: boolean
  readonly signal?: string
  readonly note?: string
  /** What the OS sandbox blocked (`blocked`), or that the command ran outside it (`mode: "off"`). */
  readonly sandbox?: { readonly mode: Sandbox.Mode; readonly blocked?: ReadonlyArray<string> }
}

const KiB = 1024

const defaults = {
  maxReadBytes: 256 * KiB,
  listLimit: 1000,
  listMaxLimit: 10_000,
  grepLimit: 200,
  grepMaxLimit: 5000,
  shellTimeoutMs: 120_000,
  shellMaxTimeoutMs: 600_000,
  shellMaxOutputBytes: 64 * KiB,
  maxDiffBytes: 64 * KiB
}

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

const fail = (message: string, data?: unknown) =>
  Effect.fail(new Tools.ToolError(data === undefined ? { message } : { message, data }))

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex")

const formatBytes = (n: number) => (n >= KiB && n % KiB === 0 ? `${n / KiB} KiB` : `${n} bytes`)

/** The sandbox a tool's processes run in: the configured one, else the running program's, if any. */
const sandboxOf = (options: Options): Effect.Effect<Sandbox.Service | undefined> =>
  options.sandbox
    ? Effect.succeed(options.sandbox)
    : Effect.map(Effect.serviceOption(Sandbox.Sandbox), Option.getOrUndefined)

/** Resolve a model-given path through the agent's workspace; escapes become a ToolError. */
const resolveIn = (ctx: Tools.CallContext, p: string): Effect.Effect<string, Tools.ToolError> =>
  ctx.workspace.resolve(p).pipe(
    Effect.mapError(
      (e: Workspace.PathEscape) =>
        new Tools.ToolError({
          message: e.message,
          data: { _tag: "PathEscape", path: e.path, root: e.root, reason: e.reason }
        })
    )
  )

const describeFsError = (e: unknown, rel: string): string => {
  const code = (e as NodeJS.ErrnoException)?.code
  switch (code) {
    case "ENOENT":
      return `${rel} does not exist`
    case "EISDIR":
      return `${rel} is a directory`
    case "ENOTDIR":
      return `a parent of ${rel} is not a directory`
    case "EACCES":
    case "EPERM":
      return `permission denied: ${rel}`
    default:
      return `${rel}: ${(e as Error)?.message ?? String(e)}`
  }
}

const tryFs = <A>(rel: string, f: () => Promise<A>): Effect.Effect<A, Tools.ToolError> =>
  Effect.tryPromise({ try: f, catch: (e) => new Tools.ToolError({ message: describeFsError(e, rel) }) })

const statOrNull = (abs: string): Promise<fs.Stats | null> =>
  fs.promises.stat(abs).catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") return null
    throw e
  })

/** Decode UTF-8 strictly; `undefined` for binary content (NUL bytes or invalid UTF-8). */
const decodeText = (buf: Buffer): string | undefined => {
  if (buf.includes(0)) return undefined
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(buf)
  } catch {
    return undefined
  }
}

const binaryMessage = (rel: string, size: number, why: string) =>
  `${rel} is a binary file (${why}, ${size} bytes); its content is not shown`

/** A per-path lock so concurrent edits of one file do not lose each other's changes. */
const makeLocks = () => {
  const locks = new Map<string, Effect.Semaphore>()
  return (key: string) =>
    <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.suspend(() => {
        let s = locks.get(key)
        if (!s) {
          s = Effect.unsafeMakeSemaphore(1)
          locks.set(key, s)
        }
        return s.withPermits(1)(effect)
      })
}

type Lock = ReturnType<typeof makeLocks>

const lineCount = (text: string) => (text === "" ? 0 : text.split("\n").length - (text.endsWith("\n") ? 1 : 0))

const fileChange = (
  rel: string,
  before: { hash: string | null; text: string | null | undefined },
  after: string,
  maxDiffBytes: number
): FileChange => {
  const hashes = { path: rel, before: before.hash, after: sha256(after) }
  if (before.text === undefined)
    return {
      ...hashes,
      diff: `--- a/${rel}\n+++ b/${rel}\nBinary file replaced by a text file\n`,
      added: lineCount(after),
      removed: 0
    }
  const d = unifiedDiff(rel, before.text, after, { maxBytes: maxDiffBytes })
  const notes: Array<string> = []
  if (d.cut)
    notes.push(
      `the diff (+${Tools.formatCount(d.added)} -${Tools.formatCount(d.removed)} lines) is longer than ${formatBytes(maxDiffBytes)} and was cut; the file itself was written in full`
    )
  if (!d.minimal) notes.push("parts too different to match line by line are shown as removed and added whole")
  return {
    ...hashes,
    diff: d.text,
    added: d.added,
    removed: d.removed,
    ...(notes.length ? { note: notes.join("; ") } : {})
  }
}

/** What the model sees of a change whose diff is over its budget: the diff's start, with the true counts. */
const fitChange = (r: FileChange, budget: Tools.Budget): unknown => {
  if (typeof r?.diff !== "string") return r
  const room = Math.max(0, budget.bytes - Tools.jsonBytes({ ...r, diff: "" }) - 400)
  const cut = Tools.cutToBytes(r.diff, Math.floor(room / 1.3))
  const diff = cut.slice(0, cut.lastIndexOf("\n") + 1)
  const note = `the diff (+${Tools.formatCount(r.added)} -${Tools.formatCount(r.removed)} lines) is cut to fit the context; the file itself was written in full`
  return { ...r, diff, note: r.note && !r.note.startsWith("the diff") ? `${note}; ${r.note}` : note }
}

/** The "searched anyway" part of a note, kept when a result is fitted to the context. */
const ignoredPart = (note: unknown) =>
  typeof note === "string"
    ? (/^.* is ignored by \.gitignore; (listed|searched) anyway(?=;|$)/.exec(note)?.[0] ?? "")
    : ""

const withIgnored = (note: unknown, rest: string) => {
  const part = ignoredPart(note)
  return part ? `${part}; ${rest}` : rest
}

/** The leading items whose JSON fits in `room` bytes. */
const leadingWithin = <A>(items: ReadonlyArray<A>, room: number): number => {
  let used = 2
  for (let i = 0; i < items.length; i++) {
    used += Tools.jsonBytes(items[i]) + 1
    if (used > room) return i
  }
  return items.length
}

// ---------------------------------------------------------------------------------------------
// read_file
// ---------------------------------------------------------------------------------------------

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

const numbered = (n: number, line: string) => `${String(n).padStart(6)}\t${line}`

type ReadOutcome =
  | { readonly _tag: "binary"; readonly why: string; readonly size: number }
  | { readonly _tag: "special"; readonly directory: boolean }
  | {
      readonly _tag: "text"
      readonly lines: Array<string>
      readonly total: number
      readonly cutLine?: number
      readonly capped: boolean
    }

/** Files up to this size are read in one call rather than streamed (most files an agent reads). */
const ONE_READ_BYTES = 64 * KiB

/** What a larger file is read in, a chunk at a time. */
const READ_CHUNK_BYTES = 64 * KiB

const readAt = (fd: number, into: Buffer, position: number): Promise<number> =>
  new Promise((resolve, reject) => fs.read(fd, into, 0, into.length, position, (e, n) => (e ? reject(e) : resolve(n))))

/**
 * Stream the file once: strict UTF-8 check, line count, and the selected lines within a byte budget.
 * The file is read as it was when opened: up to the size its open descriptor has then, whatever it
 * does while it is read (a file that grows is not read past that). A directory, FIFO or device is
 * refused, never waited on: it is opened without blocking and checked by its descriptor (`special`). A small file is read in one synchronous call (a stream costs several
 * thread-pool round trips and more than the read itself).
 */
const readLines = async (abs: string, start: number, limit: number, maxBytes: number): Promise<ReadOutcome> => {
  const decoder = new TextDecoder("utf-8", { fatal: true })
  const selected: Array<string> = []
  let bytes = 0
  let lineNo = 0
  let capped = false
  let cutLine: number | undefined
  let size = 0
  let carry = ""
  const take = (raw: string) => {
    lineNo++
    if (capped || lineNo < start || lineNo >= start + limit) return
    const text = numbered(lineNo, raw.endsWith("\r") ? raw.slice(0, -1) : raw)
    const len = Buffer.byteLength(text) + 1
    if (bytes + len > maxBytes) {
      if (selected.length === 0) {
        // a single line longer than the budget: show its beginning
        selected.push(
          Buffer.from(text)
            .subarray(0, maxBytes)
            .toString("utf8")
            .replace(/\uFFFD$/, "")
        )
        cutLine = lineNo
      }
      capped = true
      return
    }
    bytes += len
    selected.push(text)
  }
  /** Takes the lines of one chunk; why the file is not text, if it is not. */
  const consume = (chunk: Buffer): string | undefined => {
    size += chunk.length
    if (chunk.includes(0)) return "it contains NUL bytes"
    let text: string
    try {
      text = carry + decoder.decode(chunk, { stream: true })
    } catch {
      return "it is not valid UTF-8"
    }
    const parts = text.split("\n")
    carry = parts.pop()!
    for (const p of parts) take(p)
    // a line this long is cut when shown anyway: keep only its beginning in memory
    if (carry.length > 2 * maxBytes) carry = carry.slice(0, 2 * maxBytes)
    return undefined
  }
  const fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return { _tag: "special", directory: st.isDirectory() }
    if (st.size <= ONE_READ_BYTES) {
      const buf = Buffer.allocUnsafe(st.size)
      let got = 0
      for (let n = -1; got < st.size && n !== 0; got += n) n = fs.readSync(fd, buf, got, st.size - got, got)
      const why = consume(buf.subarray(0, got))
      if (why !== undefined) return { _tag: "binary", why, size: st.size }
    } else {
      for (let pos = 0; pos < st.size; ) {
        const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, st.size - pos))
        const n = await readAt(fd, chunk, pos)
        if (n === 0) break
        pos += n
        const why = consume(chunk.subarray(0, n))
        if (why !== undefined) return { _tag: "binary", why, size: st.size }
      }
    }
    try {
      carry += decoder.decode()
    } catch {
      return { _tag: "binary", why: "it is not valid UTF-8", size }
    }
  } finally {
    fs.closeSync(fd)
  }
  if (carry !== "") take(carry)
  return { _tag: "text", lines: selected, total: lineNo, capped, ...(cutLine !== undefined ? { cutLine } : {}) }
}

export const readFile = (options: Options = {}): Tools.Definition => {
  const maxBytes = options.maxReadBytes ?? defaults.maxReadBytes
  return Tools.make({
    name: names.readFile,
    description: Descriptions.READ_FILE,
    effect: "read",
    durableIntent: false,
    parameters: {
      path: Schema.String.annotations({ description: "File path, relative to the workspace root" }),
      offset: Schema.optional(
        Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({ description: "First line to read (1-based)" })
      ),
      limit: Schema.optional(
        Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({ description: "Number of lines to read" })
      )
    },
    paths: ({ path }) => [path],
    summarize: ({ path, offset, limit }) =>
      `read_file ${path}${offset !== undefined || limit !== undefined ? ` lines ${offset ?? 1}-${limit !== undefined ? (offset ?? 1) + limit - 1 : "end"}` : ""}`,
    handler: ({ path, offset, limit }, ctx) =>
      Effect.gen(function* () {
        const abs = yield* resolveIn(ctx, path)
        const rel = ctx.workspace.relative(abs)
        const start = offset ?? 1
        // (no stat first: readLines checks what it opened by its descriptor, one thread-pool round trip fewer)
        const out = yield* tryFs(rel, () => readLines(abs, start, limit ?? Number.MAX_SAFE_INTEGER, maxBytes))
        if (out._tag === "binary") return yield* fail(binaryMessage(rel, out.size, out.why))
        if (out._tag === "special")
          return yield* fail(
            out.directory ? `${rel} is a directory; use list_files to see its contents` : `${rel} is not a regular file`
          )
        const end = start + out.lines.length - 1
        const result: ReadResult = {
          path: rel,
          content: out.lines.join("\n"),
          start_line: start,
          end_line: Math.max(end, start - 1),
          total_lines: out.total
        }
        let note: string | undefined
        if (out.total === 0) note = "the file is empty"
        else if (start > out.total) note = `offset ${start} is past the end: the file has ${plural(out.total, "line")}`
        else if (out.cutLine !== undefined)
          note = `line ${out.cutLine} is longer than the ${formatBytes(maxBytes)} output cap and was cut; the file has ${plural(out.total, "line")}${
            out.cutLine < out.total ? `; continue with offset=${out.cutLine + 1}` : ""
          }`
        else if (out.capped)
          note = `output cut at ${formatBytes(maxBytes)}: showing lines ${start}-${end} of ${out.total}; read the rest with offset=${end + 1}`
        else if (end < out.total)
          note = `showing lines ${start}-${end} of ${out.total}; continue with offset=${end + 1}`
        return note ? { ...result, note } : result
      }),
    fit: (r, budget) => {
      if (typeof r?.content !== "string") return r
      const lines = r.content.split("\n")
      const room = budget.bytes - Tools.jsonBytes({ ...r, content: "", note: "" }) - 300
      let kept = leadingWithin(lines, room)
      let content = lines.slice(0, kept).join("\n")
      if (kept === 0) {
        // one line longer than the whole budget: its start
        content = Tools.cutToBytes(lines[0] ?? "", Math.max(0, Math.floor(room / 1.3)))
        kept = 1
      }
      const end = r.start_line + kept - 1
      return {
        ...r,
        content,
        end_line: end,
        note: `output cut to fit the context: showing lines ${r.start_line}-${end} of ${Tools.formatCount(r.total_lines)}${
          end < r.total_lines ? `; read on with offset=${end + 1} and a limit` : ""
        }`
      }
    }
  })
}

// ---------------------------------------------------------------------------------------------
// write_file / edit_file
// ---------------------------------------------------------------------------------------------

/** The current content of a file for a change: hash, text (`undefined` if binary, `null` if missing). */
const readBefore = (abs: string, rel: string) =>
  tryFs(rel, async () => {
    const st = await statOrNull(abs)
    if (st === null) return { exists: false as const, hash: null, text: null }
    if (st.isDirectory()) throw Object.assign(new Error(), { code: "EISDIR" })
    const buf = await fs.promises.readFile(abs)
    return { exists: true as const, hash: sha256(buf), text: decodeText(buf) }
  })

const writeFileWith = (options: Options, lock: Lock): Tools.Definition => {
  const maxDiff = options.maxDiffBytes ?? defaults.maxDiffBytes
  return Tools.make({
    name: names.writeFile,
    description: Descriptions.WRITE_FILE,
    effect: "write",
    parameters: {
      path: Schema.String.annotations({ description: "File path, relative to the workspace root" }),
      content: Schema.String.annotations({ description: "The complete new content of the file" })
    },
    summarize: ({ path, content }) => `write_file ${path} (${Buffer.byteLength(content)} bytes)`,
    paths: ({ path }) => [path],
    preview: ({ path, content }, ctx) =>
      Effect.gen(function* () {
        const abs = yield* resolveIn(ctx, path)
        const rel = ctx.workspace.relative(abs)
        const before = yield* readBefore(abs, rel)
        return fileChange(rel, before, content, maxDiff).diff
      }).pipe(Effect.catchAll((e) => Effect.succeed(`write_file would fail: ${e.message}`))),
    handler: ({ path, content }, ctx) =>
      Effect.gen(function* () {
        const abs = yield* resolveIn(ctx, path)
        const rel = ctx.workspace.relative(abs)
        return yield* lock(abs)(
          Effect.gen(function* () {
            const before = yield* readBefore(abs, rel)
            yield* tryFs(rel, () => writeFileAtomic(abs, content))
            return fileChange(rel, before, content, maxDiff)
          })
        )
      }),
    fit: fitChange
  })
}

/** `write_file` on its own (with its own per-file lock). */
export const writeFile = (options: Options = {}): Tools.Definition => writeFileWith(options, makeLocks())

const EditSchema = Schema.Struct({
  old_text: Schema.String.annotations({ description: "Exact text to replace (must occur once unless replace_all)" }),
  new_text: Schema.String.annotations({ description: "Replacement text" }),
  replace_all: Schema.optional(Schema.Boolean.annotations({ description: "Replace every occurrence" }))
})

export type Edit = typeof EditSchema.Type

const countOccurrences = (haystack: string, needle: string): number => {
  let n = 0
  let i = haystack.indexOf(needle)
  while (i !== -1) {
    n++
    i = haystack.indexOf(needle, i + needle.length)
  }
  return n
}

/** Apply edits in order to `text`; either the new text or the reason the edits cannot apply. */
export const applyEdits = (
  text: string,
  edits: ReadonlyArray<Edit>,
  rel: string
): { readonly text: string; readonly replacements: number } | { readonly error: string } => {
  let current = text
  let replacements = 0
  const crlf = text.includes("\r\n")
  for (let i = 0; i < edits.length; i++) {
    const where = edits.length > 1 ? `edit ${i + 1} of ${edits.length}: ` : ""
    const failWith = (why: string) => ({ error: `${where}${why}; the file was not changed` })
    let { old_text: oldText, new_text: newText } = edits[i]!
    if (oldText === "") return failWith("old_text is empty (use write_file to create or replace a whole file)")
    if (oldText === newText) return failWith("old_text and new_text are identical")
    let count = countOccurrences(current, oldText)
    if (count === 0 && crlf && oldText.includes("\n")) {
      // the file uses CRLF line endings and the model wrote LF
      const toCrlf = (s: string) => s.replace(/\r?\n/g, "\r\n")
      const c = countOccurrences(current, toCrlf(oldText))
      if (c > 0) {
        oldText = toCrlf(oldText)
        newText = toCrlf(newText)
        count = c
      }
    }
    if (count === 0) return failWith(`old_text not found in ${rel}`)
    if (count > 1 && !edits[i]!.replace_all)
      return failWith(`old_text occurs ${count} times in ${rel}; add context or set replace_all`)
    if (edits[i]!.replace_all) current = current.split(oldText).join(newText)
    else {
      const at = current.indexOf(oldText)
      current = current.slice(0, at) + newText + current.slice(at + oldText.length)
    }
    replacements += edits[i]!.replace_all ? count : 1
  }
  return { text: current, replacements }
}

const editFileWith = (options: Options, lock: Lock): Tools.Definition => {
  const maxDiff = options.maxDiffBytes ?? defaults.maxDiffBytes
  const plan = (ctx: Tools.CallContext, path: string, edits: ReadonlyArray<Edit>) =>
    Effect.gen(function* () {
      const abs = yield* resolveIn(ctx, path)
      const rel = ctx.workspace.relative(abs)
      const before = yield* readBefore(abs, rel)
      if (!before.exists) return yield* fail(`${rel} does not exist; use write_file to create it`)
      if (before.text === undefined) return yield* fail(`${rel} is a binary file; edit_file only edits text files`)
      const applied = applyEdits(before.text, edits, rel)
      if ("error" in applied) return yield* fail(applied.error)
      return { abs, rel, before, after: applied.text }
    })
  return Tools.make({
    name: names.editFile,
    description: Descriptions.EDIT_FILE,
    effect: "write",
    parameters: {
      path: Schema.String.annotations({ description: "File path, relative to the workspace root" }),
      edits: Schema.Array(EditSchema)
        .pipe(Schema.minItems(1))
        .annotations({ description: "Replacements, applied in order; all or nothing" })
    },
    summarize: ({ path, edits }) => `edit_file ${path} (${edits.length} edit${edits.length === 1 ? "" : "s"})`,
    paths: ({ path }) => [path],
    preview: ({ path, edits }, ctx) =>
      plan(ctx, path, edits).pipe(
        Effect.map((p) => fileChange(p.rel, p.before, p.after, maxDiff).diff),
        Effect.catchAll((e) => Effect.succeed(`edit_file would fail: ${e.message}`))
      ),
    handler: ({ path, edits }, ctx) =>
      Effect.gen(function* () {
        const abs = yield* resolveIn(ctx, path)
        return yield* lock(abs)(
          Effect.gen(function* () {
            const p = yield* plan(ctx, path, edits)
            yield* tryFs(p.rel, () => writeFileAtomic(p.abs, p.after))
            return fileChange(p.rel, p.before, p.after, maxDiff)
          })
        )
      }),
    fit: fitChange
  })
}

/** `edit_file` on its own (with its own per-file lock). */
export const editFile = (options: Options = {}): Tools.Definition => editFileWith(options, makeLocks())

// ---------------------------------------------------------------------------------------------
// list_files
// ---------------------------------------------------------------------------------------------

const clampLimit = (requested: number | undefined, def: number, max: number) => Math.min(requested ?? def, max)

/** A default and a maximum from options: the default never exceeds the maximum. */
const limits = (def: number | undefined, max: number | undefined, defaultDef: number, defaultMax: number) => {
  const m = max ?? Math.max(defaultMax, def ?? 0)
  return { def: Math.min(def ?? defaultDef, m), max: m }
}

export const listFiles = (options: Options = {}): Tools.Definition => {
  const { def, max } = limits(options.listLimit, options.listMaxLimit, defaults.listLimit, defaults.listMaxLimit)
  return Tools.make({
    name: names.listFiles,
    description: Descriptions.LIST_FILES,
    effect: "read",
    durableIntent: false,
    parameters: {
      path: Schema.optional(Schema.String.annotations({ description: "Directory to list (default: the root)" })),
      pattern: Schema.optional(Schema.String.annotations({ description: 'Glob, e.g. "*.ts" or "src/**/*.md"' })),
      limit: Schema.optional(
        Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({ description: "Most entries to return" })
      )
    },
    summarize: ({ path, pattern }) => `list_files ${path ?? "."}${pattern ? ` ${pattern}` : ""}`,
    paths: ({ path }) => [path ?? "."],
    handler: ({ path, pattern, limit }, ctx) =>
      Effect.gen(function* () {
        const abs = yield* resolveIn(ctx, path ?? ".")
        const rel = ctx.workspace.relative(abs)
        const startRel = rel === "." ? "" : rel
        const st = yield* tryFs(rel, () => fs.promises.stat(abs))
        const cap = clampLimit(limit, def, max)
        if (!st.isDirectory()) {
          const dir = startRel.includes("/") ? startRel.slice(0, startRel.lastIndexOf("/")) : ""
          const ok = planGlob(dir, pattern).test(startRel)
          return { files: ok ? [startRel] : [], truncated: false } satisfies ListResult
        }
        const root = ctx.workspace.root
        const r = yield* Effect.tryPromise({
          try: (signal) => listTree({ root, startRel, glob: pattern, limit: cap, signal }),
          catch: (e) => new Tools.ToolError({ message: describeFsError(e, rel) })
        })
        const notes: Array<string> = []
        if (r.startIgnored) notes.push(`${rel} is ignored by .gitignore; listed anyway`)
        if (r.truncated)
          notes.push(
            `showing the first ${Tools.formatCount(cap)} files in path order; more exist: narrow the listing with path or pattern`
          )
        else if (r.files.length === 0) notes.push(pattern ? `no files match ${pattern}` : "no files")
        const result: ListResult = { files: r.files, truncated: r.truncated }
        return notes.length ? { ...result, note: notes.join("; ") } : result
      }),
    fit: (r, budget) => {
      if (!Array.isArray(r?.files)) return r
      const kept = leadingWithin(r.files, budget.bytes - 600)
      return {
        files: r.files.slice(0, kept),
        truncated: true,
        note: withIgnored(
          r.note,
          `showing the first ${Tools.formatCount(kept)} of ${r.truncated ? "more than " : ""}${Tools.formatCount(
            r.files.length
          )} files, as many as fit the context; narrow the listing with path or pattern`
        )
      }
    }
  })
}

// ---------------------------------------------------------------------------------------------
// grep
// ---------------------------------------------------------------------------------------------

const narrowGrep = "narrow it with path, glob or a more specific pattern"

const totals = (total: number, files: number, complete: boolean) =>
  complete
    ? `${Tools.formatCount(total)} matching lines in ${Tools.formatCount(files)} files`
    : `at least ${Tools.formatCount(total)} matching lines in at least ${Tools.formatCount(files)} files (counting stopped early)`

export const grep = (options: Options = {}): Tools.Definition => {
  const { def, max } = limits(options.grepLimit, options.grepMaxLimit, defaults.grepLimit, defaults.grepMaxLimit)
  const engineSetting = options.grepEngine ?? "auto"
  let engine: Promise<{ readonly engine: "ripgrep" | "js"; readonly rg?: string | undefined }> | undefined
  const pickEngine = () =>
    (engine ??= (async () => {
      if (engineSetting === "js") return { engine: "js" as const }
      const rg = await findRipgrep(options.ripgrepPath)
      if (engineSetting === "ripgrep") return { engine: "ripgrep" as const, rg: rg ?? "rg" }
      return rg ? { engine: "ripgrep" as const, rg } : { engine: "js" as const }
    })())
  return Tools.make({
    name: names.grep,
    description: Descriptions.GREP,
    effect: "read",
    durableIntent: false,
    parameters: {
      pattern: Schema.String.annotations({ description: "Regular expression to search for" }),
      path: Schema.optional(Schema.String.annotations({ description: "File or directory to search (default: root)" })),
      glob: Schema.optional(Schema.String.annotations({ description: 'Only files matching this glob, e.g. "*.ts"' })),
      ignore_case: Schema.optional(Schema.Boolean.annotations({ description: "Case-insensitive match" })),
      limit: Schema.optional(
        Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({ description: "Most matches to return" })
      )
    },
    paths: ({ path }) => [path ?? "."],
    summarize: ({ pattern, path, glob }) =>
      `grep ${JSON.stringify(pattern)} in ${path ?? "."}${glob ? ` (${glob})` : ""}`,
    handler: ({ pattern, path, glob, ignore_case, limit }, ctx) =>
      Effect.gen(function* () {
        const abs = yield* resolveIn(ctx, path ?? ".")
        const rel = ctx.workspace.relative(abs)
        yield* tryFs(rel, () => fs.promises.stat(abs))
        const cap = clampLimit(limit, def, max)
        const r = yield* Effect.tryPromise({
          try: async (signal) => {
            const picked = await pickEngine()
            return search({
              signal,
              root: ctx.workspace.root,
              startRel: rel === "." ? "" : rel,
              pattern,
              glob,
              ignoreCase: ignore_case ?? false,
              limit: cap,
              engine: picked.engine,
              ripgrepPath: picked.rg,
              countMs: options.grepCountMs
            })
          },
          catch: (e) =>
            new Tools.ToolError({ message: e instanceof SearchFailed ? e.message : describeFsError(e, rel) })
        })
        const notes: Array<string> = []
        if (r.startIgnored) notes.push(`${rel} is ignored by .gitignore; searched anyway`)
        if (r.truncated)
          notes.push(
            `${totals(r.total, r.files, r.complete)}; showing the first ${Tools.formatCount(r.matches.length)}; ${narrowGrep}`
          )
        else if (r.matches.length === 0) notes.push("no matches")
        const result: GrepResult = {
          matches: r.matches,
          total: r.total,
          files: r.files,
          truncated: r.truncated,
          ...(r.complete ? {} : { counted_all: false })
        }
        return notes.length ? { ...result, note: notes.join("; ") } : result
      }),
    fit: (r, budget) => {
      if (!Array.isArray(r?.matches)) return r
      const kept = leadingWithin(r.matches, budget.bytes - 600)
      return {
        matches: r.matches.slice(0, kept),
        total: r.total,
        files: r.files,
        truncated: true,
        ...(r.counted_all === false ? { counted_all: false } : {}),
        note: withIgnored(
          r.note,
          `${totals(r.total, r.files, r.counted_all !== false)}; showing the first ${Tools.formatCount(kept)}, as many as fit the context; ${narrowGrep}`
        )
      }
    }
  })
}

// ---------------------------------------------------------------------------------------------
// run_shell
// ---------------------------------------------------------------------------------------------

export const runShell = (options: Options = {}): Tools.Definition => {
  const { def: defTimeout, max: maxTimeout } = limits(
    options.shellTimeoutMs,
    options.shellMaxTimeoutMs,
    defaults.shellTimeoutMs,
    defaults.shellMaxTimeoutMs
  )
  const maxOutput = options.shellMaxOutputBytes ?? defaults.shellMaxOutputBytes
  return Tools.make({
    name: names.runShell,
    description: Descriptions.RUN_SHELL,
    effect: "exec",
    idempotent: false,
    parameters: {
      command: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "The command, run with sh -c" }),
      timeout_ms: Schema.optional(
        Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({
          description: `Timeout in milliseconds (default ${defTimeout}, at most ${maxTimeout})`
        })
      ),
      unsandboxed: Schema.optional(
        Schema.Boolean.annotations({
          description:
            "Run outside the OS sandbox. Only after the sandbox blocked this command and it needs what was blocked; the user is asked every time"
        })
      )
    },
    summarize: ({ command }) => command,
    command: ({ command }) => command,
    unsandboxed: ({ unsandboxed }) => unsandboxed === true,
    handler: ({ command, timeout_ms, unsandboxed }, ctx) =>
      Effect.gen(function* () {
        const timeoutMs = Math.min(timeout_ms ?? defTimeout, maxTimeout)
        const sandbox = ctx.unsandboxed ? undefined : yield* sandboxOf(options)
        const shell = options.shell ?? "sh"
        const run = Effect.gen(function* () {
          const launch = sandbox
            ? yield* sandbox.prepare({
                argv: [shell, "-c", command],
                cwd: ctx.workspace.root,
                root: ctx.workspace.root
              })
            : undefined
          const r = yield* runShellProcess({
            command,
            cwd: ctx.workspace.root,
            timeoutMs,
            maxOutputBytes: maxOutput,
            shell: options.shell,
            onOutput: ctx.progress,
            launch
          }).pipe(Effect.mapError((e) => new Tools.ToolError({ message: e.message })))
          const blocked = launch && sandbox ? sandbox.explain(launch, r.output) : []
          return { r, launch, blocked }
        }).pipe(Effect.scoped)
        const { r, launch, blocked } = yield* run
        const notes: Array<string> = []
        if (timeout_ms !== undefined && timeout_ms > maxTimeout)
          notes.push(`timeout_ms was lowered to the maximum of ${maxTimeout} ms`)
        if (r.timedOut) notes.push(`timed out after ${timeoutMs} ms; the command and its child processes were killed`)
        if (r.killedLeftovers)
          notes.push("background processes still holding the output open were killed when the command ended")
        if (blocked.length > 0)
          notes.push(
            `blocked by the sandbox: ${blocked.join("; ")}. If the command needs this, call run_shell again with unsandboxed: true and the user is asked whether it may run outside the sandbox`
          )
        if (ctx.unsandboxed) notes.push("ran outside the sandbox: the user allowed it for this command")
        else if (unsandboxed && launch) notes.push("ran inside the sandbox: the user did not let it run outside")
        const output =
          r.droppedBytes > 0
            ? `[… ${r.droppedBytes} bytes of earlier output cut; showing the last ${r.totalBytes - r.droppedBytes} of ${r.totalBytes} bytes]\n${r.output}`
            : r.output
        const result: ShellResult = {
          exit_code: r.exitCode,
          output,
          timed_out: r.timedOut,
          ...(r.signal ? { signal: r.signal } : {}),
          ...(blocked.length > 0 && launch ? { sandbox: { mode: launch.mode, blocked } } : {}),
          ...(ctx.unsandboxed ? { sandbox: { mode: "off" as const } } : {})
        }
        return notes.length ? { ...result, note: notes.join("; ") } : result
      }),
    fit: (r, budget) => {
      if (typeof r?.output !== "string") return r
      // the end of the output is what usually matters (the error, the summary)
      const room = Math.max(0, budget.bytes - Tools.jsonBytes({ ...r, output: "", note: r.note ?? "" }) - 300)
      const bytes = Buffer.from(r.output)
      const tail = bytes
        .subarray(Math.max(0, bytes.length - Math.floor(room / 1.3)))
        .toString("utf8")
        .replace(/^\uFFFD+/, "")
      const note = `output cut to fit the context: showing its last ${formatBytes(Buffer.byteLength(tail))} of ${formatBytes(bytes.length)}; redirect the output to a file and read or grep that for the rest`
      return { ...r, output: tail, note: r.note ? `${r.note}; ${note}` : note }
    }
  })
}

// ---------------------------------------------------------------------------------------------
// the set
// ---------------------------------------------------------------------------------------------

/** All six coding tools; write tools share a per-file lock. */
export const make = (options: Options = {}): ReadonlyArray<Tools.Definition> => {
  const lock = makeLocks()
  return [
    readFile(options),
    writeFileWith(options, lock),
    editFileWith(options, lock),
    listFiles(options),
    grep(options),
    runShell(options)
  ]
}

/** `Tools` with the coding tools. */
export const layer = (options: Options = {}): Layer.Layer<Tools.Tools> => Tools.layer(make(options))
