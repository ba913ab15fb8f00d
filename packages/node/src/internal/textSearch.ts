/**
 * Regex search over a workspace with ripgrep (`rg --json`) when it is installed and a JS walk
 * otherwise. Both honour `.gitignore` (see `gitignoreWalk`), skip `.git`, binary files (NUL bytes)
 * and symlinks met while walking, list matches in the same order and format (`path:line: text`)
 * and stop after `limit` matches.
 *
 * @example
 * ```ts
 * const r = await search({ root, startRel: "src", pattern: "TODO", ignoreCase: false, limit: 100, engine: "auto" })
 * r.matches // ["src/a.ts:3: // TODO: tidy"]
 * ```
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { globMatcher, IgnoreFilter, walk } from "./gitignoreWalk.js"

export interface SearchOptions {
  readonly root: string
  /** Workspace-relative file or directory to search (`""` = the root). */
  readonly startRel: string
  readonly pattern: string
  readonly glob?: string | undefined
  readonly ignoreCase: boolean
  readonly limit: number
  readonly engine: "ripgrep" | "js"
  readonly ripgrepPath?: string | undefined
  /** Stops the search (and kills ripgrep) when aborted. */
  readonly signal?: AbortSignal | undefined
}

export interface SearchResult {
  readonly matches: ReadonlyArray<string>
  /** More matches exist than `limit`. */
  readonly truncated: boolean
  /** The start path is ignored by `.gitignore`; it was searched anyway. */
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

/** Find an executable on PATH. */
export const findOnPath = (name: string, env: NodeJS.ProcessEnv = process.env): string | undefined => {
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const candidate = path.join(dir, name)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      if (fs.statSync(candidate).isFile()) return candidate
    } catch {}
  }
  return undefined
}

const prepare = async (options: SearchOptions) => {
  const startAbs = path.join(options.root, options.startRel)
  const stat = await fs.promises.stat(startAbs)
  const isDir = stat.isDirectory()
  const filter = await IgnoreFilter.load(options.root, isDir ? options.startRel : path.posix.dirname(options.startRel))
  const startIgnored = options.startRel !== "" && filter.ignores(options.startRel, isDir)
  const matchGlob = options.glob ? globMatcher(options.glob.replace(/^\.\//, "")) : undefined
  const globOk = (rel: string) => {
    if (!matchGlob) return true
    if (!isDir) return matchGlob(path.posix.basename(rel))
    return matchGlob(options.startRel === "" ? rel : rel.slice(options.startRel.length + 1))
  }
  return { isDir, filter: startIgnored ? filter.disabled() : filter, startIgnored, globOk }
}

const compileRegex = (pattern: string, ignoreCase: boolean): RegExp => {
  const flags = ignoreCase ? "i" : ""
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

const MAX_JS_FILE_BYTES = 64 * 1024 * 1024

const searchJs = async (options: SearchOptions): Promise<SearchResult> => {
  const re = compileRegex(options.pattern, options.ignoreCase)
  const { isDir, filter, startIgnored, globOk } = await prepare(options)
  const matches: Array<string> = []
  let truncated = false
  const searchFile = async (rel: string, abs: string): Promise<boolean> => {
    if (options.signal?.aborted) return false
    if (!globOk(rel)) return true
    let buf: Buffer
    try {
      if ((await fs.promises.stat(abs)).size > MAX_JS_FILE_BYTES) return true
      buf = await fs.promises.readFile(abs)
    } catch {
      return true
    }
    if (buf.includes(0)) return true
    const lines = buf.toString("utf8").split("\n")
    if (lines[lines.length - 1] === "") lines.pop()
    for (let i = 0; i < lines.length; i++) {
      if (re.test(lines[i]!)) {
        if (matches.length >= options.limit) {
          truncated = true
          return false
        }
        matches.push(formatMatch(rel, i + 1, lines[i]!))
      }
    }
    return true
  }
  if (!isDir) await searchFile(options.startRel, path.join(options.root, options.startRel))
  else
    await walk(options.root, options.startRel, filter, (entry) =>
      entry.kind === "file" ? searchFile(entry.rel, entry.abs) : true
    )
  return { matches, truncated, startIgnored }
}

type RgText = { readonly text?: string; readonly bytes?: string }
const rgText = (t: RgText | undefined) =>
  t === undefined ? "" : t.text !== undefined ? t.text : Buffer.from(t.bytes ?? "", "base64").toString("utf8")

const searchRipgrep = async (options: SearchOptions): Promise<SearchResult> => {
  const rg = options.ripgrepPath ?? findOnPath("rg")
  if (!rg) throw new SearchFailed("ripgrep (rg) is not installed or not on PATH")
  const { globOk, startIgnored } = await prepare(options)
  const args = [
    "--json",
    "--no-config",
    "--hidden",
    "--no-require-git",
    "--no-ignore-parent",
    "--no-ignore-global",
    "--no-ignore-exclude",
    "--no-ignore-dot",
    "--sort",
    "path",
    "--glob",
    "!.git",
    ...(options.ignoreCase ? ["--ignore-case"] : []),
    ...(startIgnored ? ["--no-ignore-vcs"] : []),
    "--regexp",
    options.pattern,
    "--",
    options.startRel === "" ? "." : options.startRel
  ]
  return new Promise<SearchResult>((resolve, reject) => {
    const child = spawn(rg, args, {
      cwd: options.root,
      stdio: ["ignore", "pipe", "pipe"],
      killSignal: "SIGKILL",
      ...(options.signal ? { signal: options.signal } : {})
    })
    const matches: Array<string> = []
    let truncated = false
    let done = false
    let stderr = ""
    let carry = ""
    let pending: Array<string> = []
    let sawFile = false
    const onLine = (line: string) => {
      if (done || line === "") return
      let msg: { type: string; data: any }
      try {
        msg = JSON.parse(line)
      } catch {
        return
      }
      if (msg.type === "begin") {
        sawFile = true
        pending = []
      } else if (msg.type === "match") {
        const rel = rgText(msg.data.path).replace(/^\.\//, "")
        // one more than needed is enough to know the list is cut
        if (pending.length <= options.limit - matches.length && globOk(rel))
          pending.push(formatMatch(rel, msg.data.line_number, rgText(msg.data.lines)))
      } else if (msg.type === "end") {
        // matches of a file found to be binary are dropped, as the JS search skips such files
        if (msg.data.binary_offset != null) pending = []
        for (const m of pending) {
          if (matches.length >= options.limit) {
            truncated = true
            done = true
            child.kill("SIGKILL")
            return
          }
          matches.push(m)
        }
        pending = []
      }
    }
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      const parts = (carry + chunk).split("\n")
      carry = parts.pop()!
      for (const p of parts) onLine(p)
    })
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (chunk: string) => {
      if (stderr.length < 8192) stderr += chunk
    })
    child.on("error", (e) =>
      reject(e.name === "AbortError" ? e : new SearchFailed(`could not run ripgrep (${rg}): ${e.message}`))
    )
    child.on("close", (code) => {
      onLine(carry)
      if (!done && code === 2 && !sawFile) {
        const msg = stderr.trim().split("\n").slice(0, 12).join("\n")
        return reject(new SearchFailed(msg.startsWith("regex parse error") ? `invalid regex: ${msg}` : msg))
      }
      resolve({ matches, truncated, startIgnored })
    })
  })
}

export const search = (options: SearchOptions): Promise<SearchResult> =>
  options.engine === "ripgrep" ? searchRipgrep(options) : searchJs(options)
