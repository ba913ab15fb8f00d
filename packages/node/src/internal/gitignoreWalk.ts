/**
 * Directory walks that honour ignore files the way ripgrep does: `.gitignore`, `.ignore` and
 * `.rgignore` in every directory (deeper files and, within one directory, `.ignore` over `.gitignore`
 * and `.rgignore` over both take precedence), the root's `.git/info/exclude`, and the files of the
 * directories between the root and the starting directory. `.git` is always skipped, hidden files
 * are included, symlinks are listed but never followed.
 *
 * `walkSorted` visits files in path order (the entries of each directory in byte order of their
 * names, like `rg --sort path`) and stops as soon as the visitor says so, reading the directories
 * ahead of it concurrently, so a walk that stops early costs what it visited.
 *
 * @example
 * ```ts
 * const filter = await IgnoreFilter.load(root, "src")
 * await walkSorted(root, "src", filter, (entry) => { console.log(entry.rel); return true })
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ignore, { type Ignore } from "ignore"

export interface Entry {
  /** Path relative to the walk root (the workspace root), `/`-separated. */
  readonly rel: string
  readonly abs: string
  readonly kind: "file" | "symlink"
}

/** The ignore files read in each directory, lowest precedence first. */
export const IGNORE_FILES: ReadonlyArray<string> = [".gitignore", ".ignore", ".rgignore"]

const join = (a: string, b: string) => (a === "" ? b : `${a}/${b}`)

/**
 * The order of a depth-first walk whose directories list their entries in byte order of their names
 * (`rg --sort path`): byte order of the paths with `/` ranking below every other character, so
 * `a/b.txt` comes before `a-c.txt` and `a.txt`.
 */
export const comparePaths = (a: string, b: string): number => {
  if (a === b) return 0
  if (/[\ud800-\uffff]/.test(a) || /[\ud800-\uffff]/.test(b)) {
    const x = Buffer.from(a.replaceAll("/", "\0"))
    const y = Buffer.from(b.replaceAll("/", "\0"))
    return Buffer.compare(x, y)
  }
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    return (x === 47 ? -1 : x) - (y === 47 ? -1 : y)
  }
  return a.length - b.length
}

const readRules = (file: string): Promise<Ignore | undefined> =>
  fs.promises.readFile(file, "utf8").then(
    (text) => ignore({ allowRelativePaths: true }).add(text),
    () => undefined
  )

interface Layer {
  readonly base: string
  readonly ig: Ignore
}

/** The ignore rules in force at a directory, as a stack from the root down. */
export class IgnoreFilter {
  private constructor(
    private readonly layers: ReadonlyArray<Layer>,
    readonly enabled: boolean
  ) {}

  /** No rules at all. */
  static readonly none: IgnoreFilter = new IgnoreFilter([], true)

  /** Rules of the root and of every directory from the root down to `startRel` (exclusive). */
  static async load(root: string, startRel: string): Promise<IgnoreFilter> {
    let filter = IgnoreFilter.none
    const segments = startRel === "" || startRel === "." ? [] : startRel.split("/")
    let base = ""
    for (let i = 0; i < segments.length; i++) {
      filter = await filter.enter(root, base)
      base = join(base, segments[i]!)
    }
    return filter
  }

  /** Whether any rule is in force. */
  get empty(): boolean {
    return this.layers.length === 0 || !this.enabled
  }

  /**
   * The filter with `dirRel`'s own ignore files pushed. `names`, the directory's entries when the
   * caller has them, spares opening files that are not there.
   */
  async enter(root: string, dirRel: string, names?: ReadonlySet<string>): Promise<IgnoreFilter> {
    if (!this.enabled) return this
    const dirAbs = path.join(root, dirRel)
    const wanted = IGNORE_FILES.filter((f) => names === undefined || names.has(f))
    const found = await Promise.all(wanted.map((f) => readRules(path.join(dirAbs, f))))
    const added: Array<Layer> = []
    if (dirRel === "" && (names === undefined || names.has(".git"))) {
      // the repository's own exclude file ranks below every ignore file (as in git and ripgrep)
      const exclude = await readRules(path.join(dirAbs, ".git", "info", "exclude"))
      if (exclude) added.push({ base: "", ig: exclude })
    }
    for (const ig of found) if (ig) added.push({ base: dirRel, ig })
    return added.length === 0 ? this : new IgnoreFilter([...this.layers, ...added], true)
  }

  disabled(): IgnoreFilter {
    return new IgnoreFilter(this.layers, false)
  }

  /** Whether `rel` itself is ignored (its parent directories are not looked at). */
  ignores(rel: string, isDir: boolean): boolean {
    if (!this.enabled) return false
    let ignored = false
    for (const { base, ig } of this.layers) {
      if (base !== "" && !rel.startsWith(`${base}/`)) continue
      const sub = base === "" ? rel : rel.slice(base.length + 1)
      const r = ig.test(isDir ? `${sub}/` : sub)
      if (r.ignored) ignored = true
      else if (r.unignored) ignored = false
    }
    return ignored
  }

  /** Whether `rel` or one of its parent directories below `fromRel` is ignored by these rules. */
  ignoresPath(rel: string, isDir: boolean, fromRel = ""): boolean {
    if (this.empty) return false
    let at = fromRel === "" ? 0 : fromRel.length + 1
    for (let slash = rel.indexOf("/", at); slash !== -1; slash = rel.indexOf("/", at)) {
      if (this.ignores(rel.slice(0, slash), true)) return true
      at = slash + 1
    }
    return this.ignores(rel, isDir)
  }
}

/** A counting semaphore for promises. */
const limiter = (max: number) => {
  let active = 0
  const waiting: Array<() => void> = []
  return async <A>(f: () => Promise<A>): Promise<A> => {
    if (active >= max) await new Promise<void>((resolve) => waiting.push(resolve))
    active++
    try {
      return await f()
    } finally {
      active--
      waiting.shift()?.()
    }
  }
}

interface Listing {
  readonly filter: IgnoreFilter
  /** Entries kept (not ignored, not `.git`), in byte order of their names. */
  readonly entries: ReadonlyArray<{ readonly name: string; readonly rel: string; readonly kind: "dir" | Entry["kind"] }>
}

const readListing = async (root: string, dirRel: string, inherited: IgnoreFilter): Promise<Listing> => {
  let dirents: Array<fs.Dirent>
  try {
    dirents = await fs.promises.readdir(path.join(root, dirRel), { withFileTypes: true })
  } catch {
    return { filter: inherited, entries: [] }
  }
  const filter = await inherited.enter(root, dirRel, new Set(dirents.map((d) => d.name)))
  const entries: Array<Listing["entries"][number]> = []
  for (const d of dirents) {
    if (d.name === ".git") continue
    const kind = d.isDirectory() ? "dir" : d.isFile() ? "file" : d.isSymbolicLink() ? "symlink" : undefined
    if (kind === undefined) continue
    const rel = join(dirRel, d.name)
    if (filter.ignores(rel, kind === "dir")) continue
    entries.push({ name: d.name, rel, kind })
  }
  entries.sort((a, b) => comparePaths(a.name, b.name))
  return { filter, entries }
}

export interface WalkOptions {
  /** Directories read at once (default 8). */
  readonly concurrency?: number | undefined
  readonly signal?: AbortSignal | undefined
}

/**
 * Visit files and symlinks under `startRel` in path order; `visit` returns `false` to stop. The
 * directories ahead are read concurrently, so stopping early costs little. Unreadable directories
 * are skipped.
 */
export const walkSorted = async (
  root: string,
  startRel: string,
  filter: IgnoreFilter,
  visit: (entry: Entry) => boolean,
  options: WalkOptions = {}
): Promise<void> => {
  const limit = limiter(options.concurrency ?? 8)
  let stopped = false
  const read = (dirRel: string, inherited: IgnoreFilter): Promise<Listing> =>
    limit(() =>
      stopped || options.signal?.aborted
        ? Promise.resolve({ filter: inherited, entries: [] })
        : readListing(root, dirRel, inherited)
    )
  const rec = async (listing: Listing): Promise<boolean> => {
    // start reading the subdirectories now; they are awaited in order below
    const subs = new Map<string, Promise<Listing>>()
    for (const e of listing.entries) if (e.kind === "dir") subs.set(e.rel, read(e.rel, listing.filter))
    for (const e of listing.entries) {
      if (options.signal?.aborted) return false
      if (e.kind === "dir") {
        if (!(await rec(await subs.get(e.rel)!))) return false
      } else if (!visit({ rel: e.rel, abs: path.join(root, e.rel), kind: e.kind })) return false
    }
    return true
  }
  try {
    const start = startRel === "." ? "" : startRel
    await rec(await read(start, filter))
  } finally {
    stopped = true
  }
}
