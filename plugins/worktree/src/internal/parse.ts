/**
 * Parsers for git's machine-readable output.
 *
 * @internal
 */

export interface WorktreeEntry {
  readonly path: string
  readonly head: string | undefined
  /** Full ref name, e.g. `refs/heads/main`; undefined when detached or bare. */
  readonly branch: string | undefined
  readonly bare: boolean
  readonly detached: boolean
  /** Lock reason ("" when locked without one); undefined when not locked. */
  readonly locked: string | undefined
  readonly prunable: string | undefined
}

/** Parse `git worktree list --porcelain -z`. */
export const worktreeList = (out: string): Array<WorktreeEntry> => {
  const entries: Array<WorktreeEntry> = []
  for (const block of out.split("\0\0")) {
    if (block.replace(/\0/g, "").trim() === "") continue
    let p = ""
    let head: string | undefined
    let branch: string | undefined
    let bare = false
    let detached = false
    let locked: string | undefined
    let prunable: string | undefined
    for (const line of block.split("\0")) {
      const sp = line.indexOf(" ")
      const key = sp < 0 ? line : line.slice(0, sp)
      const value = sp < 0 ? "" : line.slice(sp + 1)
      if (key === "worktree") p = value
      else if (key === "HEAD") head = value
      else if (key === "branch") branch = value
      else if (key === "bare") bare = true
      else if (key === "detached") detached = true
      else if (key === "locked") locked = value
      else if (key === "prunable") prunable = value
    }
    if (p !== "") entries.push({ path: p, head, branch, bare, detached, locked, prunable })
  }
  return entries
}

/** Paths from `git status --porcelain=v1 -z` (renames contribute their new path). */
export const statusPaths = (out: string): Array<string> => {
  const files: Array<string> = []
  const parts = out.split("\0")
  for (let i = 0; i < parts.length; i++) {
    const rec = parts[i]!
    if (rec.length < 4) continue
    const xy = rec.slice(0, 2)
    files.push(rec.slice(3))
    if (xy[0] === "R" || xy[0] === "C") i++ // the original path follows as its own field
  }
  return files
}

/** NUL-separated paths (`-z` output of ls-files, diff --name-only, for-each-ref). */
export const nulList = (out: string): Array<string> => out.split("\0").filter((s) => s !== "")

export interface UnmergedEntry {
  readonly mode: string
  readonly object: string
  readonly stage: number
  readonly path: string
}

/** Parse `git ls-files -u -z`: `<mode> <object> <stage>\t<path>` records. */
export const unmerged = (out: string): Array<UnmergedEntry> =>
  nulList(out).flatMap((rec) => {
    const m = /^(\d+) ([0-9a-f]+) (\d)\t(.*)$/s.exec(rec)
    return m ? [{ mode: m[1]!, object: m[2]!, stage: Number(m[3]), path: m[4]! }] : []
  })

export interface MarkerHunk {
  /** 1-based line of the `<<<<<<<` marker in the conflicted file. */
  readonly line: number
  readonly ours: string
  readonly base: string | undefined
  readonly theirs: string
}

/**
 * The conflict regions of a file git left with conflict markers (`merge` or `diff3` style, marker
 * size 7). Each side keeps its lines with their newlines.
 */
export const conflictHunks = (text: string): Array<MarkerHunk> => {
  const lines = text.split(/(?<=\n)/)
  const hunks: Array<MarkerHunk> = []
  const isMarker = (l: string, c: string) =>
    l.startsWith(c.repeat(7)) && (l.length === 7 || l[7] === " " || l[7] === "\n" || l[7] === "\r")
  let i = 0
  while (i < lines.length) {
    if (!isMarker(lines[i]!, "<")) {
      i++
      continue
    }
    const start = i
    let j = i + 1
    const ours: Array<string> = []
    const base: Array<string> = []
    const theirs: Array<string> = []
    let section: "ours" | "base" | "theirs" = "ours"
    let hasBase = false
    let closed = false
    for (; j < lines.length; j++) {
      const l = lines[j]!
      if (section === "ours" && isMarker(l, "|")) {
        section = "base"
        hasBase = true
      } else if (section !== "theirs" && isMarker(l, "=")) section = "theirs"
      else if (section === "theirs" && isMarker(l, ">")) {
        closed = true
        break
      } else (section === "ours" ? ours : section === "base" ? base : theirs).push(l)
    }
    if (!closed) break
    hunks.push({
      line: start + 1,
      ours: ours.join(""),
      base: hasBase ? base.join("") : undefined,
      theirs: theirs.join("")
    })
    i = j + 1
  }
  return hunks
}
