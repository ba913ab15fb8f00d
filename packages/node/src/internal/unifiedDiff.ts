/**
 * Line diffs (Myers' O(ND) algorithm) rendered as unified diffs that `git apply` and `patch` accept.
 *
 * @example
 * ```ts
 * unifiedDiff("a.txt", "one\ntwo\n", "one\n2\n")
 * // --- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n
 * ```
 */

type Op = { readonly kind: " " | "-" | "+"; readonly line: string }

/** Lines including their `\n` terminator; the last one may lack it. */
export const splitLines = (text: string): Array<string> => text.match(/[^\n]*\n|[^\n]+$/g) ?? []

/** Above this many differences the middle part is shown as one block removed and one block added. */
const MAX_EDIT_DISTANCE = 2000

const myers = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<Op> | undefined => {
  const n = a.length
  const m = b.length
  const max = Math.min(n + m, MAX_EDIT_DISTANCE)
  const off = max + 1
  const v = new Int32Array(2 * max + 3)
  // trace[d] = v over k in [-d-1, d+1] as it was before step d
  const trace: Array<Int32Array> = []
  let found = -1
  outer: for (let d = 0; d <= max; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2))
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1]! < v[off + k + 1]!) ? v[off + k + 1]! : v[off + k - 1]! + 1
      let y = x - k
      while (x < n && y < m && a[x] === b[y]) {
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
  const ops: Array<Op> = []
  let x = n
  let y = m
  for (let d = found; d >= 0; d--) {
    const snap = trace[d]!
    const at = (k: number) => snap[k + d + 1]!
    const k = x - y
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1
    const prevX = d === 0 ? 0 : at(prevK)
    const prevY = d === 0 ? 0 : prevX - prevK
    while (x > prevX && y > prevY) {
      ops.push({ kind: " ", line: a[x - 1]! })
      x--
      y--
    }
    if (d > 0) {
      if (x === prevX) ops.push({ kind: "+", line: b[y - 1]! })
      else ops.push({ kind: "-", line: a[x - 1]! })
    }
    x = prevX
    y = prevY
  }
  return ops.reverse()
}

/** The edit script turning lines `a` into lines `b`. */
export const diffLines = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<Op> => {
  let start = 0
  while (start < a.length && start < b.length && a[start] === b[start]) start++
  let endA = a.length
  let endB = b.length
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--
    endB--
  }
  const midA = a.slice(start, endA)
  const midB = b.slice(start, endB)
  const middle = myers(midA, midB) ?? [
    ...midA.map((line) => ({ kind: "-" as const, line })),
    ...midB.map((line) => ({ kind: "+" as const, line }))
  ]
  return [
    ...a.slice(0, start).map((line) => ({ kind: " " as const, line })),
    ...middle,
    ...a.slice(endA).map((line) => ({ kind: " " as const, line }))
  ]
}

const range = (start: number, count: number) =>
  count === 1 ? `${start}` : `${count === 0 ? start - 1 : start},${count}`

const renderLine = (op: Op) =>
  op.line.endsWith("\n") ? `${op.kind}${op.line}` : `${op.kind}${op.line}\n\\ No newline at end of file\n`

/**
 * A unified diff of two texts with `context` lines around each change; `""` when they are equal.
 * `before === null` means the file is new (`--- /dev/null`).
 */
export const unifiedDiff = (path: string, before: string | null, after: string, context = 3): string => {
  if (before === after) return ""
  const ops = diffLines(splitLines(before ?? ""), splitLines(after))
  const changes: Array<number> = []
  ops.forEach((op, i) => {
    if (op.kind !== " ") changes.push(i)
  })
  if (changes.length === 0) return ""
  let out = `--- ${before === null ? "/dev/null" : `a/${path}`}\n+++ b/${path}\n`
  // line numbers (1-based) of the old and new file at each op index
  const oldAt: Array<number> = []
  const newAt: Array<number> = []
  let o = 1
  let nw = 1
  for (const op of ops) {
    oldAt.push(o)
    newAt.push(nw)
    if (op.kind !== "+") o++
    if (op.kind !== "-") nw++
  }
  let g = 0
  while (g < changes.length) {
    let last = g
    while (last + 1 < changes.length && changes[last + 1]! - changes[last]! <= 2 * context + 1) last++
    const from = Math.max(0, changes[g]! - context)
    const to = Math.min(ops.length, changes[last]! + context + 1)
    const hunk = ops.slice(from, to)
    const oldCount = hunk.filter((op) => op.kind !== "+").length
    const newCount = hunk.filter((op) => op.kind !== "-").length
    out += `@@ -${range(oldAt[from]!, oldCount)} +${range(newAt[from]!, newCount)} @@\n`
    for (const op of hunk) out += renderLine(op)
    g = last + 1
  }
  return out
}

/** Counts of added and removed lines in a unified diff. */
export const diffStat = (diff: string): { readonly added: number; readonly removed: number } => {
  let added = 0
  let removed = 0
  for (const line of diff.split("\n")) {
    if (line.startsWith("+") && !line.startsWith("+++ ")) added++
    else if (line.startsWith("-") && !line.startsWith("--- ")) removed++
  }
  return { added, removed }
}
