/**
 * Regex search over a workspace with ripgrep when it is available and a JS engine otherwise. Both
 * honour the ignore files (see `gitignoreWalk`), skip `.git`, binary files (a NUL byte) and
 * symlinks met while walking, count the matching lines, and return the first `limit` of them in
 * path order as `path:line: text` — the same answer from either engine.
 *
 * ripgrep first counts the matching lines of every file with all its threads (`--count`, a few
 * bytes of output per file however many lines match), then reads the lines of only the first files
 * in path order, as many as the answer shows. A pattern found all over a large tree (more matching
 * lines than `limit` after `countMs`) is not counted to the end: its first matches come from a walk
 * in path order that stops as soon as it has them, and the totals are lower bounds. The JS engine
 * walks in path order, reads `READ_AHEAD` files at once, tests each file as a whole (a byte search
 * for a literal) before looking at its lines, and stops on the same rule.
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
import { comparePaths, type Entry, IgnoreFilter, walkSorted } from "./gitignoreWalk.js"
import { type GlobPlan, planGlob, walkableDir } from "./pathGlob.js"
import { RipgrepMissing, runRipgrep, spawnRipgrep } from "./ripgrep.js"

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
  /**
   * How long to go on counting matching lines once more than `limit` are found (default
   * `COUNT_MS`): a pattern that matches everywhere is not counted to the end of a large tree.
   */
  readonly countMs?: number | undefined
}

/** Default of `SearchOptions.countMs`. */
export const COUNT_MS = 300

/**
 * Counting stops once more lines than `limit` are found and `countMs` has passed — or a third of
 * it, for a pattern already found more than ten times over.
 */
const enoughCounted = (counted: number, limit: number, elapsed: number, countMs: number) =>
  counted > limit && (elapsed >= countMs || (counted > 10 * limit && elapsed >= countMs / 3))

export interface SearchResult {
  /** The first `limit` matching lines in path order. */
  readonly matches: ReadonlyArray<string>
  /** Matching lines in all (at least this many when `complete` is false). */
  readonly total: number
  /** Files with a matching line (at least this many when `complete` is false). */
  readonly files: number
  /** Every file was counted; otherwise counting stopped after `countMs` and the totals are lower bounds. */
  readonly complete: boolean
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

/** Files read at once by the JS engine. */
const READ_AHEAD = 32

/** Reusable read buffers (one per read in flight). */
const bufferPool = () => {
  const free: Array<Buffer> = []
  return {
    take: () => free.pop() ?? Buffer.allocUnsafe(256 * 1024),
    give: (b: Buffer) => {
      if (b.length <= 4 * 1024 * 1024) free.push(b)
    }
  }
}

/** Read a whole file into `buf` (a bigger one if needed); `undefined` if unreadable or too big. */
const readWhole = (abs: string, buf: Buffer): Promise<{ readonly buf: Buffer; readonly size: number } | undefined> =>
  new Promise((resolve) => {
    fs.open(abs, "r", (err, fd) => {
      if (err) return resolve(undefined)
      let n = 0
      const done = (value: { buf: Buffer; size: number } | undefined) => fs.close(fd, () => resolve(value))
      const more = () =>
        fs.read(fd, buf, n, buf.length - n, null, (e, got) => {
          if (e) return done(undefined)
          n += got
          if (got > 0 && n === buf.length) {
            if (n > MAX_JS_FILE_BYTES) return done(undefined)
            const bigger = Buffer.allocUnsafe(Math.min(n * 4, MAX_JS_FILE_BYTES + 1))
            buf.copy(bigger, 0, 0, n)
            buf = bigger
            return more()
          }
          done({ buf, size: n })
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
  const countMs = options.countMs ?? COUNT_MS
  const started = Date.now()
  const matches: Array<string> = []
  let total = 0
  let files = 0
  const scan = new RegExp(whole.source, `${whole.flags}g`)
  const searchFile = (rel: string, bytes: Buffer) => {
    if (bytes.includes(0) || (literal && !bytes.includes(literal))) return
    const text = bytes.toString("utf8")
    // find matches in the whole text, then check the line each one is on (a match of the whole
    // text may run over a line end, which a line-by-line search would not allow)
    let count = 0
    let lineNo = 1
    let counted = 0
    scan.lastIndex = 0
    for (let m = scan.exec(text); m !== null; m = scan.exec(text)) {
      const start = text.lastIndexOf("\n", m.index - 1) + 1
      let end = text.indexOf("\n", m.index)
      if (end === -1) end = text.length
      const l = text.slice(start, end)
      if (!line.test(l)) {
        scan.lastIndex = m.index + 1
        continue
      }
      for (let nl = text.indexOf("\n", counted); nl !== -1 && nl < start; nl = text.indexOf("\n", nl + 1)) lineNo++
      counted = start
      count++
      if (matches.length < options.limit) matches.push(formatMatch(rel, lineNo, l))
      if (end >= text.length) break
      scan.lastIndex = end + 1
    }
    total += count
    if (count > 0) files++
  }
  const pool = bufferPool()
  const read = async (e: { readonly rel: string; readonly abs: string }) => {
    const r = await readWhole(e.abs, pool.take())
    return r && { rel: e.rel, buf: r.buf, size: r.size }
  }
  let complete = true
  if (prep.target !== undefined && !prep.isDir) {
    if (prep.plan.test(prep.target)) {
      const r = await read({ rel: prep.target, abs: path.join(options.root, prep.target) })
      if (r) searchFile(r.rel, r.buf.subarray(0, r.size))
    }
  } else if (prep.target !== undefined) {
    // files in path order from the walk; read a window ahead, searched in order
    const queue: Array<Entry> = []
    let next = 0
    let walked = false
    let stop = false
    let wake: (() => void) | undefined
    const walk = walkSorted(
      options.root,
      prep.target,
      prep.filter,
      (e) => {
        if (stop) return false
        if (e.kind === "file" && prep.plan.test(e.rel)) {
          queue.push(e)
          wake?.()
        }
        return true
      },
      { signal: options.signal }
    ).finally(() => {
      walked = true
      wake?.()
    })
    const inFlight: Array<ReturnType<typeof read>> = []
    while (!options.signal?.aborted) {
      while (inFlight.length < READ_AHEAD && next < queue.length) inFlight.push(read(queue[next++]!))
      const first = inFlight.shift()
      if (!first) {
        if (walked) break
        await new Promise<void>((resolve) => {
          wake = () => {
            wake = undefined
            resolve()
          }
        })
        continue
      }
      const r = await first
      if (r) {
        searchFile(r.rel, r.buf.subarray(0, r.size))
        pool.give(r.buf)
      }
      // enough to show, and counting the rest has had its time
      if (enoughCounted(total, options.limit, Date.now() - started, countMs) && (inFlight.length > 0 || !walked)) {
        complete = false
        break
      }
    }
    stop = true
    await Promise.allSettled(inFlight)
    await walk
  }
  if (options.signal?.aborted) throw Object.assign(new Error("aborted"), { name: "AbortError" })
  return { matches, total, files, complete, truncated: total > matches.length, startIgnored: prep.startIgnored }
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

/** Lines of ripgrep's `--json` output, as they come: one file's matches handed over at its end. */
const jsonFiles = (
  limitPerFile: number,
  onFile: (rel: string, lines: Array<string>, binary: boolean) => void
): ((chunk: Buffer) => void) => {
  let carry = ""
  let pending: Array<string> = []
  return (chunk) => {
    const parts = (carry + chunk.toString("utf8")).split("\n")
    carry = parts.pop()!
    for (const l of parts) {
      // enough lines of this file: skip the rest of its matches without parsing them
      if (l === "" || (pending.length >= limitPerFile && l.startsWith('{"type":"match"'))) continue
      let msg: { type: string; data: any }
      try {
        msg = JSON.parse(l)
      } catch {
        continue
      }
      if (msg.type === "begin") pending = []
      else if (msg.type === "match" && pending.length < limitPerFile)
        pending.push(formatMatch(rgRel(rgText(msg.data.path)), msg.data.line_number, rgText(msg.data.lines)))
      else if (msg.type === "end") {
        onFile(rgRel(rgText(msg.data.path)), pending, msg.data.binary_offset != null)
        pending = []
      }
    }
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const searchRipgrep = async (options: SearchOptions, prep: Prepared): Promise<SearchResult> => {
  const rg = options.ripgrepPath
  if (!rg) throw new SearchFailed("ripgrep (rg) is not installed or not on PATH")
  const limit = options.limit
  const empty = { matches: [], total: 0, files: 0, complete: true, truncated: false, startIgnored: prep.startIgnored }
  if (prep.target === undefined) return empty
  const target = prep.target
  const regex = ["--engine", "auto", ...(options.ignoreCase ? ["--ignore-case"] : []), "--regexp", options.pattern]
  const walkArgs = [
    "--no-config",
    "--hidden",
    "--no-require-git",
    "--no-ignore-parent",
    "--no-ignore-global",
    "--glob",
    "!.git",
    ...(prep.startIgnored ? ["--no-ignore"] : []),
    ...(prep.isDir ? prep.plan.rgArgs : [])
  ]
  const where = ["--", target === "" ? "." : target]
  // ripgrep starts below the ignore files of the directories above the target: those apply here
  const checkAncestors = prep.isDir && !prep.filter.empty && target !== ""
  const wanted = (rel: string) =>
    (prep.plan.rgExact && prep.isDir ? true : prep.plan.test(rel)) &&
    !(checkAncestors && prep.filter.ignoresPath(rel, false))

  // 1. how many lines match in each file: every thread, a few bytes of output per file
  const counts = new Map<string, number>()
  let counted = 0
  let carry: Buffer = Buffer.alloc(0)
  const counting = spawnRipgrep(rg, [...walkArgs, "--count", "--with-filename", "--null", ...regex, ...where], {
    cwd: options.root,
    signal: options.signal,
    onData: (chunk) => {
      const out = carry.length ? Buffer.concat([carry, chunk]) : chunk
      let at = 0
      for (;;) {
        const nul = out.indexOf(0, at)
        const nl = nul === -1 ? -1 : out.indexOf(10, nul)
        if (nl === -1) break
        const rel = rgRel(out.subarray(at, nul).toString("utf8"))
        const n = Number(out.subarray(nul + 1, nl).toString("latin1"))
        at = nl + 1
        if (!wanted(rel)) continue
        counts.set(rel, n)
        counted += n
      }
      carry = out.subarray(at)
    }
  })
  let finished: { code: number | null; stderr: string } | undefined
  const countDone = counting.done.then((r) => {
    finished = r
  })
  const started = Date.now()
  while (!finished && !enoughCounted(counted, limit, Date.now() - started, options.countMs ?? COUNT_MS))
    await Promise.race([countDone, sleep(25)])
  if (finished && finished.code === 2 && counts.size === 0 && !/No such file/.test(finished.stderr))
    throw failure(finished.stderr)

  if (!finished) {
    // 2a. a pattern found all over: counting stops here, and the first matches come from a walk in
    // path order that stops as soon as it has them (in the middle of a file if need be)
    counting.kill()
    await countDone
    const matches: Array<string> = []
    let current: { rel: string; lines: Array<string> } | undefined
    let cutIn: { rel: string; lines: Array<string> } | undefined
    let carryText = ""
    const shownFiles = new Set<string>()
    const take = (f: { rel: string; lines: Array<string> }) => {
      if (!wanted(f.rel) || f.lines.length === 0) return
      shownFiles.add(f.rel)
      for (const l of f.lines) if (matches.length < limit) matches.push(l)
    }
    const shown = spawnRipgrep(rg, [...walkArgs, "--json", "--sort", "path", ...regex, ...where], {
      cwd: options.root,
      signal: options.signal,
      onData: (chunk) => {
        const parts = (carryText + chunk.toString("utf8")).split("\n")
        carryText = parts.pop()!
        for (const l of parts) {
          if (cutIn || l === "") continue
          let msg: { type: string; data: any }
          try {
            msg = JSON.parse(l)
          } catch {
            continue
          }
          const rel = msg.data?.path ? rgRel(rgText(msg.data.path)) : ""
          if (msg.type === "begin") current = { rel, lines: [] }
          else if (msg.type === "match" && current) {
            current.lines.push(formatMatch(rel, msg.data.line_number, rgText(msg.data.lines)))
            if (wanted(rel) && matches.length + current.lines.length >= limit) {
              cutIn = current
              shown.kill()
            }
          } else if (msg.type === "end" && current) {
            // a binary file (a NUL byte) is left out, as the JS engine does
            if (msg.data.binary_offset == null) take(current)
            current = undefined
          }
        }
      }
    })
    await shown.done
    // stopped inside a file: ripgrep had not read all of it, so look for a NUL byte here
    if (cutIn) {
      const bytes = await fs.promises.readFile(path.join(options.root, cutIn.rel)).catch(() => undefined)
      if (bytes && !bytes.includes(0)) take(cutIn)
    }
    return {
      matches,
      total: Math.max(counted, matches.length),
      files: Math.max(counts.size, shownFiles.size),
      complete: false,
      truncated: true,
      startIgnored: prep.startIgnored
    }
  }

  // 2b. every file counted: the lines of the first files in path order, as many as the answer shows
  const lines = new Map<string, Array<string>>()
  const firstFiles = () => {
    const out: Array<string> = []
    let n = 0
    for (const p of [...counts.keys()].sort(comparePaths)) {
      if (n >= limit) break
      out.push(p)
      n += counts.get(p)!
    }
    return out
  }
  for (let need = firstFiles(); need.length > 0; need = firstFiles().filter((p) => !lines.has(p))) {
    while (need.length > 0) {
      const chunk: Array<string> = []
      let bytes = 0
      while (need.length > 0 && (chunk.length === 0 || bytes + need[0]!.length < MAX_ARG_BYTES)) {
        bytes += need[0]!.length + 1
        chunk.push(need.shift()!)
      }
      // --no-mmap: a binary file is noticed wherever its NUL byte is
      const out = await runRipgrep(rg, ["--no-config", "--json", "--no-mmap", ...regex, "--", ...chunk], {
        cwd: options.root,
        signal: options.signal
      })
      jsonFiles(limit, (rel, found, binary) => {
        // a binary file (a NUL byte) is left out, as the JS engine does
        if (binary) counts.delete(rel)
        else lines.set(rel, found)
      })(Buffer.concat([out.stdout, Buffer.from("\n")]))
      // a file that vanished since it was counted is left out
      for (const p of chunk) if (!lines.has(p)) counts.delete(p)
    }
  }
  const matches: Array<string> = []
  for (const p of firstFiles()) for (const l of lines.get(p) ?? []) if (matches.length < limit) matches.push(l)
  let total = 0
  for (const n of counts.values()) total += n
  return {
    matches,
    total,
    files: counts.size,
    complete: true,
    truncated: total > matches.length,
    startIgnored: prep.startIgnored
  }
}

export const search = async (options: SearchOptions): Promise<SearchResult> => {
  const prep = await prepare(options)
  return options.engine === "ripgrep"
    ? searchRipgrep(options, prep).catch((e) => {
        throw e instanceof RipgrepMissing ? new SearchFailed(e.message) : e
      })
    : searchJs(options, prep)
}
