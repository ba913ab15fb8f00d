/**
 * Terminal styling: a handful of SGR colors, display width (ANSI sequences skipped, wide
 * characters counted twice), word wrapping that keeps every line narrower than the terminal, and
 * the one escaping function for text muse did not write itself (model output, repository files,
 * tool output, recorded events): control characters, escape sequences and bidi overrides are
 * shown as visible escapes, so such text can neither rewrite the screen nor disguise itself.
 *
 * @example
 * ```ts
 * import { colored, escapeUnsafe } from "./ansi.js"
 *
 * escapeUnsafe("npm test\x1b[2K\rrm -rf ~", colored)
 * // 'npm test' + inverse('\\x1b') + '[2K' + inverse('\\r') + 'rm -rf ~'
 * ```
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

// ---------------------------------------------------------------------------------------------
// untrusted text

/**
 * What can hide, move or rewrite what a terminal shows, or make two different strings look the
 * same: C0 controls (ESC, CR, BS, …), DEL, C1 controls (0x80–0x9f, 8-bit CSI and OSC among them),
 * the bidi embeddings, overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E,
 * U+200F, U+061C), line and paragraph separators, and invisible format characters (soft hyphen,
 * zero-width space, word joiner and invisible operators, BOM, interlinear annotations, the
 * deprecated format controls U+206A–U+206F, and the tag characters U+E0000–U+E007F that can
 * smuggle invisible ASCII). Zero-width (non-)joiners stay: scripts and emoji need them.
 */
const UNSAFE_SOURCE =
  "[\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\ufff9-\\ufffb\\u{e0000}-\\u{e007f}]"
const UNSAFE_ONE = new RegExp(UNSAFE_SOURCE, "u")
const UNSAFE_ALL = new RegExp(UNSAFE_SOURCE, "gu")

/** Whether `text` holds a character `escapeUnsafe` would escape. */
export const hasUnsafe = (text: string): boolean => UNSAFE_ONE.test(text)

const NAMED: Record<string, string> = { "\t": "\\t", "\n": "\\n", "\r": "\\r" }

/** The visible escape of one unsafe character: `\x1b`, `\r`, `\u202e`, `\u{e0041}`. */
export const escapeChar = (ch: string): string => {
  const named = NAMED[ch]
  if (named) return named
  const cp = ch.codePointAt(0) ?? 0
  if (cp < 0x100) return `\\x${cp.toString(16).padStart(2, "0")}`
  if (cp < 0x10000) return `\\u${cp.toString(16).padStart(4, "0")}`
  return `\\u{${cp.toString(16)}}`
}

export interface EscapeOptions {
  /** Keep line feeds (text shown over several lines); otherwise they show as `\n`. */
  readonly newlines?: boolean | undefined
  /** Tabs: shown as `\t` (default), kept as they are, or as two spaces. */
  readonly tabs?: "escape" | "keep" | "spaces" | undefined
}

/**
 * Text muse did not write, made safe to draw: every character of the unsafe classes above is
 * replaced by its visible escape (`\x1b`, `\r`, `\u202e`) in inverse video, so an escape
 * sequence, a carriage return or a bidi override shows as what it is instead of acting on the
 * terminal. The rest of the text is unchanged. Apply it to the raw text before adding styles.
 */
export const escapeUnsafe = (text: string, style: Style = off, options: EscapeOptions = {}): string => {
  if (!UNSAFE_ONE.test(text)) return text
  const tabs = options.tabs ?? "escape"
  return text.replace(UNSAFE_ALL, (ch) => {
    if (ch === "\n" && options.newlines) return ch
    if (ch === "\t" && tabs !== "escape") return tabs === "keep" ? ch : "  "
    return style.inverse(escapeChar(ch))
  })
}

/** Escape sequences muse itself writes into lines: the SGR codes of `Style` and a full reset. */
const OWN_SGR = /\x1b\[(?:0|1|2|3|7|22|23|27|3[1-6]|39|90)m/g

/**
 * The last check before a line reaches the terminal: the SGR codes `Style` writes pass, every
 * other unsafe character (a stray escape sequence from text that skipped `escapeUnsafe`, a
 * carriage return) is escaped. Line feeds are kept.
 */
export const terminalSafe = (text: string, style: Style = off): string => {
  if (!UNSAFE_ONE.test(text)) return text
  let out = ""
  let last = 0
  for (const m of text.matchAll(OWN_SGR)) {
    out += escapeUnsafe(text.slice(last, m.index), style, { newlines: true, tabs: "keep" }) + m[0]
    last = m.index + m[0].length
  }
  return out + escapeUnsafe(text.slice(last), style, { newlines: true, tabs: "keep" })
}

/** Characters `JSON.stringify` leaves raw that a terminal would act on (controls above 0x7e, bidi, invisible). */
const JSON_UNSAFE =
  /[\u007f-\u009f\u00ad\u061c\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]|\udb40[\udc00-\udc7f]/g

/**
 * A JSON text with the characters `JSON.stringify` leaves raw but a terminal acts on written as
 * `\uXXXX` escapes. Such characters can only occur inside JSON strings, so the value it parses to
 * is unchanged.
 */
export const jsonSafe = (json: string): string =>
  json.replace(JSON_UNSAFE, (s) =>
    s
      .split("")
      .map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
      .join("")
  )

/** SGR (color) sequences only: a tool's colored output loses its colors, and nothing else. */
const SGR = /\x1b\[[0-9;:]*m/g

/**
 * Output of a command or tool, for display: its colors are dropped (they carry nothing that must be
 * seen), everything else unsafe is escaped; tabs become two spaces.
 */
export const escapeOutput = (text: string, style: Style = off, options: { readonly newlines?: boolean } = {}): string =>
  escapeUnsafe(text.replace(SGR, ""), style, { newlines: options.newlines, tabs: "spaces" })

/** `JSON.stringify` whose output is safe to print on a terminal (see `jsonSafe`). */
export const stringifySafe = (value: unknown): string => jsonSafe(JSON.stringify(value) ?? "null")

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
