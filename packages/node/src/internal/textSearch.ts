/**
 * Regex search over a workspace with ripgrep when it is available and a JS engine otherwise. Both
 * honour the ignore files (see `gitignoreWalk`), skip `.git`, binary files (a NUL byte) and
 * symlinks met while walking, count every matching line, and return the first `limit` of them in
 * path order as `path:line: text` — the same answer from either engine.
 *
 * ripgrep runs twice, with all its threads: once to count the matching lines of every file
 * (`--count`, a few bytes per file whatever the number of matches), then only over the first files
 * in path order, as many as the answer needs, for the lines themselves. The JS engine reads many
 * files at once, skips a file on a literal or whole-file test before splitting it into lines, and
 * keeps lines only for the files that can still be among the first.
 *
 * @example
 * ```ts
 * const r = await search({ root, startRel: "src", pattern: "TODO", ignoreCase: false, limit: 100, engine: "js" })
 * r.matches // ["src/a.ts:3: // TODO: tidy"]
 * r.total   // matching lines in all (2631), in r.files files (412)
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { comparePaths, IgnoreFilter, walkAll } from "./gitignoreWalk.js"
import { type GlobPlan, planGlob, walkableDir } from "./pathGlob.js"
import { RipgrepMissing, runRipgrep } from "./ripgrep.js"

export interface SearchOptions {
  readonly root: string
  /** Workspace-relative file or directory to search (`""` = the root). */
  readonly startRel: string
  readonly pattern: string
  readonly glob?: string | undefined
  readonly ignoreCase: boolean
  readonly limit: number
  readonly engine: "ripgrep" | "js"
  /** The ripgrep binary (required for the ripgrep engine). */
  readonly ripgrepPath?: string | undefined
  /** Stops the search (and kills ripgrep) when aborted. */
  readonly signal?: AbortSignal | undefined
}

export interface SearchResult {
  /** The first `limit` matching lines in path order. */
  readonly matches: ReadonlyArray<string>
  /** Matching lines in all. */
  readonly total: number
  /** Files with a matching line. */
  readonly files: number
  /** More matching lines exist than are in `matches`. */
  readonly truncated: boolean
  /** The start path is ignored by an ignore file; it was searched anyway. */
  readonly startIgnored: boolean
}

/** A search that could not run (bad regex, ripgrep missing, ...). */
export class SearchFailed extends Error {}

/** Longest line text shown for a match, in characters. */
export const MAX_LINE_CHARS = 300

const formatMatch = (rel: string, line: number, text: string) => {
  let t = text.replace(/\r?\n$/, "")
  if (t.endsWith("\r")) t = t.slice(0, -1)
  if (t.length > MAX_LINE_CHARS) t = `${t.slice(0, MAX_LINE_CHARS)}…`
  return `${rel}:${line}: ${t}`
}

interface Prepared {
  readonly isDir: boolean
  /** The directory (or file) to search; `undefined` when the glob's directory does not exist. */
  readonly target: string | undefined
  readonly filter: IgnoreFilter
  readonly startIgnored: boolean
  readonly plan: GlobPlan
}

const prepare = async (options: SearchOptions): Promise<Prepared> => {
  const start = options.startRel === "." ? "" : options.startRel
  const stat = await fs.promises.stat(path.join(options.root, start))
  const isDir = stat.isDirectory()
  if (!isDir) {
    const filter = await IgnoreFilter.load(options.root, path.posix.dirname(start).replace(/^\.$/, ""))
    const startIgnored = filter.ignoresPath(start, false)
    // a file named explicitly: a glob is relative to its directory
    const plan = planGlob(path.posix.dirname(start).replace(/^\.$/, ""), options.glob)
    return { isDir, target: start, filter: filter.disabled(), startIgnored, plan }
  }
  const plan = planGlob(start, options.glob)
  const target = await walkableDir(options.root, start, plan)
  const filter = await IgnoreFilter.load(options.root, target ?? start)
  const startIgnored = start !== "" && filter.ignoresPath(start, true)
  return { isDir, target, filter: startIgnored ? filter.disabled() : filter, startIgnored, plan }
}

/** Counts per file and the lines of the files that come first. */
class Collector {
  private readonly counts = new Map<string, number>()
  private readonly kept = new Map<string, Array<string>>()
  private keptLines = 0
  /** Files after this path cannot be among the first `limit` lines. */
  private ceiling: string | undefined

  constructor(private readonly limit: number) {}

  /** Whether lines of `rel` are still wanted. */
  wants(rel: string): boolean {
    return this.ceiling === undefined || comparePaths(rel, this.ceiling) <= 0
  }

  add(rel: string, count: number, lines?: Array<string>): void {
    if (count === 0) return
    this.counts.set(rel, count)
    if (!lines || !this.wants(rel)) return
    this.kept.set(rel, lines)
    this.keptLines += lines.length
    if (this.keptLines > 4 * this.limit + 64) this.prune()
  }

  private prune(): void {
    const paths = [...this.kept.keys()].sort(comparePaths)
    let n = 0
    let i = 0
    while (i < paths.length && n < this.limit) n += this.counts.get(paths[i++]!)!
    this.ceiling = paths[i - 1]
    for (const p of paths.slice(i)) {
      this.keptLines -= this.kept.get(p)!.length
      this.kept.delete(p)
    }
  }

  /** The files whose lines the answer shows, in path order (those with matches, first ones first). */
  firstFiles(): Array<string> {
    const paths = [...this.counts.keys()].sort(comparePaths)
    const out: Array<string> = []
    let n = 0
    for (const p of paths) {
      if (n >= this.limit) break
      out.push(p)
      n += this.counts.get(p)!
    }
    return out
  }

  forget(rel: string): void {
    this.counts.delete(rel)
    this.kept.delete(rel)
  }

  linesOf(rel: string): Array<string> | undefined {
    return this.kept.get(rel)
  }

  result(lines: (rel: string) => ReadonlyArray<string>, startIgnored: boolean): SearchResult {
    const matches: Array<string> = []
    for (const p of this.firstFiles()) {
      for (const l of lines(p)) {
        if (matches.length >= this.limit) break
        matches.push(l)
      }
    }
    let total = 0
    for (const c of this.counts.values()) total += c
    return { matches, total, files: this.counts.size, truncated: total > matches.length, startIgnored }
  }
}

// ---------------------------------------------------------------------------------------------
// JS engine
// ---------------------------------------------------------------------------------------------

const compileRegex = (pattern: string, flags: string): RegExp => {
  try {
    return new RegExp(pattern, `${flags}u`)
  } catch {
    try {
      return new RegExp(pattern, flags)
    } catch (e) {
      throw new SearchFailed(`invalid regex ${JSON.stringify(pattern)}: ${(e as Error).message}`)
    }
  }
}

/** Larger files are not searched by the JS engine. */
const MAX_JS_FILE_BYTES = 64 * 1024 * 1024

/** Read a whole file into `scratch` (grown as needed); `undefined` if it cannot be read or is too big. */
const readInto = (
  abs: string,
  scratch: { buf: Buffer }
): Promise<{ readonly bytes: Buffer; readonly size: number } | undefined> =>
  new Promise((resolve) => {
    fs.open(abs, "r", (err, fd) => {
      if (err) return resolve(undefined)
      let n = 0
      const done = (value: { bytes: Buffer; size: number } | undefined) => fs.close(fd, () => resolve(value))
      const more = () =>
        fs.read(fd, scratch.buf, n, scratch.buf.length - n, null, (e, got) => {
          if (e) return done(undefined)
          n += got
          if (got > 0 && n === scratch.buf.length) {
            if (n >= MAX_JS_FILE_BYTES) return done(undefined)
            const bigger = Buffer.allocUnsafe(Math.min(n * 2, MAX_JS_FILE_BYTES + 1))
            scratch.buf.copy(bigger, 0, 0, n)
            scratch.buf = bigger
            return more()
          }
          done({ bytes: scratch.buf, size: n })
        })
      more()
    })
  })

/** A pattern with no regex syntax: found with a byte search. */
const literalOf = (pattern: string, ignoreCase: boolean): Buffer | undefined =>
  !ignoreCase && pattern !== "" && !/[\\^$.|?*+()[\]{}]/.test(pattern) ? Buffer.from(pattern) : undefined

const searchJs = async (options: SearchOptions, prep: Prepared): Promise<SearchResult> => {
  const line = compileRegex(options.pattern, options.ignoreCase ? "i" : "")
  const whole = compileRegex(options.pattern, options.ignoreCase ? "im" : "m")
  const literal = literalOf(options.pattern, options.ignoreCase)
  const collector = new Collector(options.limit)
  const searchFile = (rel: string, bytes: Buffer) => {
    if (bytes.includes(0) || (literal && !bytes.includes(literal))) return
    const text = bytes.toString("utf8")
    if (!literal && !whole.test(text)) return
    const keep = collector.wants(rel)
    const lines: Array<string> = []
    let count = 0
    let at = 0
    let lineNo = 0
    while (at < text.length) {
      let end = text.indexOf("\n", at)
      if (end === -1) end = text.length
      lineNo++
      const l = text.slice(at, end)
      if (line.test(l)) {
        count++
        if (keep && lines.length < options.limit) lines.push(formatMatch(rel, lineNo, l))
      }
      at = end + 1
    }
    collector.add(rel, count, keep ? lines : undefined)
  }
  if (prep.target !== undefined) {
    if (!prep.isDir) {
      if (prep.plan.test(prep.target)) {
        const r = await readInto(path.join(options.root, prep.target), { buf: Buffer.allocUnsafe(64 * 1024) })
        if (r) searchFile(prep.target, r.bytes.subarray(0, r.size))
      }
    } else {
      // the walk feeds a queue that several readers drain while it goes on
      const queue: Array<{ rel: string; abs: string }> = []
      const idle: Array<() => void> = []
      let walking = true
      const walk = walkAll(options.root, prep.target, prep.filter, (e) => {
        if (e.kind !== "file" || !prep.plan.test(e.rel)) return
        queue.push({ rel: e.rel, abs: e.abs })
        idle.pop()?.()
      }).finally(() => {
        walking = false
        for (const wake of idle.splice(0)) wake()
      })
      const reader = async () => {
        const scratch = { buf: Buffer.allocUnsafe(256 * 1024) }
        while (!options.signal?.aborted) {
          const next = queue.pop()
          if (next) {
            const r = await readInto(next.abs, scratch)
            if (r) searchFile(next.rel, r.bytes.subarray(0, r.size))
          } else if (walking) await new Promise<void>((resolve) => idle.push(resolve))
          else return
        }
      }
      await Promise.all([walk, ...Array.from({ length: 24 }, reader)])
    }
  }
  if (options.signal?.aborted) throw Object.assign(new Error("aborted"), { name: "AbortError" })
  return collector.result((p) => collector.linesOf(p) ?? [], prep.startIgnored)
}

// ---------------------------------------------------------------------------------------------
// ripgrep engine
// ---------------------------------------------------------------------------------------------

type RgText = { readonly text?: string; readonly bytes?: string }
const rgText = (t: RgText | undefined) =>
  t === undefined ? "" : t.text !== undefined ? t.text : Buffer.from(t.bytes ?? "", "base64").toString("utf8")

const rgRel = (p: string) => (p.startsWith("./") ? p.slice(2) : p)

const failure = (stderr: string) => {
  const msg = stderr.trim().split("\n").slice(0, 12).join("\n")
  return new SearchFailed(
    /regex parse error|error parsing regex|PCRE2/.test(msg) ? `invalid regex: ${msg}` : msg || "ripgrep failed"
  )
}

/** Arguments are passed in chunks of at most this many bytes (well below the system's limit). */
const MAX_ARG_BYTES = 96 * 1024

const searchRipgrep = async (options: SearchOptions, prep: Prepared): Promise<SearchResult> => {
  const rg = options.ripgrepPath
  if (!rg) throw new SearchFailed("ripgrep (rg) is not installed or not on PATH")
  const collector = new Collector(options.limit)
  if (prep.target === undefined) return collector.result(() => [], prep.startIgnored)
  const regex = ["--engine", "auto", ...(options.ignoreCase ? ["--ignore-case"] : []), "--regexp", options.pattern]
  const run = (args: ReadonlyArray<string>) =>
    runRipgrep(rg, args, { cwd: options.root, signal: options.signal }).catch((e) => {
      throw e instanceof RipgrepMissing ? new SearchFailed(e.message) : e
    })
  // 1. how many lines match in each file: every thread, a few bytes of output per file
  const counted = await run([
    "--no-config",
    "--hidden",
    "--no-require-git",
    "--no-ignore-parent",
    "--no-ignore-global",
    "--glob",
    "!.git",
    ...(prep.startIgnored ? ["--no-ignore"] : []),
    ...(prep.isDir ? prep.plan.rgArgs : []),
    "--count",
    "--with-filename",
    "--null",
    ...regex,
    "--",
    prep.target === "" ? "." : prep.target
  ])
  const out = counted.stdout
  if (counted.code === 2 && out.length === 0) throw failure(counted.stderr)
  // rg starts below the ignore files of the directories above the target: apply those here
  const checkAncestors = prep.isDir && !prep.filter.empty && prep.target !== ""
  for (let at = 0; at < out.length; ) {
    const nul = out.indexOf(0, at)
    if (nul === -1) break
    let nl = out.indexOf(10, nul)
    if (nl === -1) nl = out.length
    const rel = rgRel(out.subarray(at, nul).toString("utf8"))
    const count = Number(out.subarray(nul + 1, nl).toString("latin1"))
    at = nl + 1
    if (prep.isDir && !prep.plan.rgExact && !prep.plan.test(rel)) continue
    if (!prep.isDir && !prep.plan.test(rel)) continue
    if (checkAncestors && prep.filter.ignoresPath(rel, false)) continue
    collector.add(rel, count)
  }
  // 2. the lines of the first files, as many as the answer shows (again if some turn out binary)
  const lines = new Map<string, Array<string>>()
  for (let need = collector.firstFiles(); need.length > 0; need = collector.firstFiles().filter((p) => !lines.has(p))) {
    while (need.length > 0) {
      const chunk: Array<string> = []
      let bytes = 0
      while (need.length > 0 && (chunk.length === 0 || bytes + need[0]!.length < MAX_ARG_BYTES)) {
        bytes += need[0]!.length + 1
        chunk.push(need.shift()!)
      }
      // --no-mmap: binary files are noticed wherever their NUL byte is
      const shown = await run(["--no-config", "--json", "--no-mmap", ...regex, "--", ...chunk])
      if (shown.code === 2 && shown.stdout.length === 0 && !/No such file|os error/.test(shown.stderr))
        throw failure(shown.stderr)
      let pending: Array<string> = []
      for (const l of shown.stdout.toString("utf8").split("\n")) {
        if (l === "") continue
        let msg: { type: string; data: any }
        try {
          msg = JSON.parse(l)
        } catch {
          continue
        }
        if (msg.type === "begin") pending = []
        else if (msg.type === "match" && pending.length < options.limit)
          pending.push(formatMatch(rgRel(rgText(msg.data.path)), msg.data.line_number, rgText(msg.data.lines)))
        else if (msg.type === "end") {
          const rel = rgRel(rgText(msg.data.path))
          // a binary file (a NUL byte): left out, as the JS engine does
          if (msg.data.binary_offset != null) collector.forget(rel)
          else lines.set(rel, pending)
          pending = []
        }
      }
      // a file that vanished or turned binary since it was counted is left out
      for (const p of chunk) if (!lines.has(p)) collector.forget(p)
    }
  }
  return collector.result((p) => lines.get(p) ?? [], prep.startIgnored)
}

export const search = async (options: SearchOptions): Promise<SearchResult> => {
  const prep = await prepare(options)
  return options.engine === "ripgrep" ? searchRipgrep(options, prep) : searchJs(options, prep)
}
