/**
 * Terminal styling: a handful of SGR colors, display width (ANSI sequences skipped, wide
 * characters counted twice) and word wrapping that keeps every line narrower than the terminal.
 */

export interface Style {
  readonly enabled: boolean
  readonly bold: (s: string) => string
  readonly dim: (s: string) => string
  readonly italic: (s: string) => string
  readonly red: (s: string) => string
  readonly green: (s: string) => string
  readonly yellow: (s: string) => string
  readonly blue: (s: string) => string
  readonly magenta: (s: string) => string
  readonly cyan: (s: string) => string
  readonly gray: (s: string) => string
  readonly inverse: (s: string) => string
}

const sgr = (open: number, close: number) => (s: string) => `\x1b[${open}m${s}\x1b[${close}m`

const on: Style = {
  enabled: true,
  bold: sgr(1, 22),
  dim: sgr(2, 22),
  italic: sgr(3, 23),
  red: sgr(31, 39),
  green: sgr(32, 39),
  yellow: sgr(33, 39),
  blue: sgr(34, 39),
  magenta: sgr(35, 39),
  cyan: sgr(36, 39),
  gray: sgr(90, 39),
  inverse: sgr(7, 27)
}

const id = (s: string) => s
const off: Style = {
  enabled: false,
  bold: id,
  dim: id,
  italic: id,
  red: id,
  green: id,
  yellow: id,
  blue: id,
  magenta: id,
  cyan: id,
  gray: id,
  inverse: id
}

/** Colors for a stream: on for a terminal unless `NO_COLOR` is set; `FORCE_COLOR` turns them on anywhere. */
export const styleFor = (
  stream: { readonly isTTY?: boolean | undefined },
  env: NodeJS.ProcessEnv = process.env
): Style => {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return off
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0" && env.FORCE_COLOR !== "") return on
  return stream.isTTY ? on : off
}

export const plain = off
export const colored = on

const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)/g

export const stripAnsi = (s: string): string => s.replace(ANSI, "")

const isWide = (cp: number): boolean =>
  cp >= 0x1100 &&
  (cp <= 0x115f ||
    cp === 0x2329 ||
    cp === 0x232a ||
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe6f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) ||
    (cp >= 0x1f900 && cp <= 0x1f9ff) ||
    (cp >= 0x20000 && cp <= 0x3fffd))

const charWidth = (ch: string): number => {
  const cp = ch.codePointAt(0) ?? 0
  if (cp < 32 || (cp >= 0x7f && cp < 0xa0)) return 0
  if (cp >= 0x300 && cp <= 0x36f) return 0
  if (cp === 0x200b || cp === 0x200d || (cp >= 0xfe00 && cp <= 0xfe0f)) return 0
  return isWide(cp) ? 2 : 1
}

/** Columns a string takes on screen. */
export const width = (s: string): number => {
  let w = 0
  for (const ch of stripAnsi(s)) w += charWidth(ch)
  return w
}

/** Split a styled string into tokens: escape sequences and single characters. */
const tokens = (s: string): Array<{ readonly text: string; readonly w: number }> => {
  const out: Array<{ text: string; w: number }> = []
  let last = 0
  for (const m of s.matchAll(ANSI)) {
    for (const ch of s.slice(last, m.index)) out.push({ text: ch, w: charWidth(ch) })
    out.push({ text: m[0], w: 0 })
    last = m.index! + m[0].length
  }
  for (const ch of s.slice(last)) out.push({ text: ch, w: charWidth(ch) })
  return out
}

/** Cut a styled string to at most `max` columns (adding `…` when cut). */
export const truncate = (s: string, max: number): string => {
  if (width(s) <= max) return s
  if (max <= 0) return ""
  let w = 0
  let out = ""
  for (const t of tokens(s)) {
    if (w + t.w > max - 1) break
    out += t.text
    w += t.w
  }
  return `${out}…${s.includes("\x1b[") ? "\x1b[0m" : ""}`
}

/** Pad a styled string with spaces to `n` columns. */
export const pad = (s: string, n: number): string => s + " ".repeat(Math.max(0, n - width(s)))
export const padStart = (s: string, n: number): string => " ".repeat(Math.max(0, n - width(s))) + s

/**
 * Wrap one line (no newlines) to lines of at most `max` columns, breaking at spaces where it can.
 * Continuation lines get `indent`.
 */
export const wrapLine = (line: string, max: number, indent = ""): Array<string> => {
  if (max < 8) max = 8
  if (width(line) <= max) return [line]
  const out: Array<string> = []
  let cur: Array<{ text: string; w: number }> = []
  let curW = 0
  let lastSpace = -1
  const indentW = width(indent)
  const flush = (upTo: number) => {
    out.push(
      cur
        .slice(0, upTo)
        .map((t) => t.text)
        .join("")
    )
    cur = cur.slice(upTo)
    while (cur.length > 0 && cur[0]!.text === " ") cur.shift()
    if (indent) cur.unshift({ text: indent, w: indentW })
    curW = cur.reduce((a, t) => a + t.w, 0)
    lastSpace = -1
    for (let i = 0; i < cur.length; i++) if (cur[i]!.text === " ") lastSpace = i
  }
  for (const t of tokens(line)) {
    if (curW + t.w > max) {
      if (t.text === " ") {
        flush(cur.length)
        continue
      }
      flush(lastSpace > (indent ? 1 : 0) ? lastSpace : cur.length)
    }
    cur.push(t)
    curW += t.w
    if (t.text === " ") lastSpace = cur.length - 1
  }
  out.push(cur.map((t) => t.text).join(""))
  return out
}

/** Wrap text with newlines; every returned line is at most `max` columns. */
export const wrap = (text: string, max: number, indent = ""): Array<string> =>
  text.split("\n").flatMap((l) => wrapLine(l.replace(/\t/g, "  "), max, indent))
