/**
 * The timeline page: one self-contained HTML file (no network, no server) made from a folded
 * session. The marks are summarised in a deflate-compressed block the page inflates with the
 * browser's `DecompressionStream`; each mark's details sit in compressed chunks of their own,
 * inflated when one is clicked. The page's scripts and style are the files in `view/` beside the
 * package, inlined and allowed by their hashes in a Content-Security-Policy that allows nothing
 * else: no script from a log can run, and the page loads nothing from anywhere.
 *
 * @example
 * ```ts
 * const html = Page.render(Timeline.fold(id, events), { blob: (h) => blobs.get(h) })
 * fs.writeFileSync("session.html", html)
 * ```
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { packageDir } from "../history.js"
import * as Details from "./details.js"
import { KINDS, type Lane, type Mark, STATUSES, type Timeline, type UsagePoint } from "./timeline.js"

/** Marks per compressed chunk of details. */
export const CHUNK = 256

const kindIndex = new Map(KINDS.map((k, i) => [k, i]))
const statusIndex = new Map(STATUSES.map((s, i) => [s, i]))

/** One mark as the page carries it. */
export const encodeMark = (m: Mark): ReadonlyArray<unknown> => [
  m.id,
  m.lane,
  kindIndex.get(m.kind) ?? 0,
  m.start,
  m.end ?? -1,
  statusIndex.get(m.status) ?? 0,
  m.label,
  m.files.join("\n"),
  m.link ?? -1
]

export const encodeLane = (l: Lane): ReadonlyArray<string> => [l.name, l.role]

export const encodeUsage = (u: UsagePoint): ReadonlyArray<number> => [
  u.t,
  u.lane,
  u.input,
  u.output,
  u.cached,
  u.cost === null ? -1 : Math.round(u.cost * 1e6) / 1e6
]

export const encodeDetail = (d: Details.Detail): ReadonlyArray<unknown> => [
  d.title,
  d.rows,
  d.sections.map((s) => [s.title, s.kind, s.text])
]

// level 5: for a session's details a third of level 6's time, for 6% more bytes
const deflate = (text: string): string =>
  zlib.deflateRawSync(Buffer.from(text, "utf8"), { level: 5 }).toString("base64")

/** JSON that cannot end the `<script>` element it sits in, nor be read as markup. */
export const scriptJson = (value: unknown): string =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029")

export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("base64")

/** The page's scripts, in the order they run: helpers, panels, the timeline (each reads what the one before defined). */
const SCRIPTS = ["format.js", "panels.js", "timeline.js"] as const

let assets: { readonly scripts: ReadonlyArray<string>; readonly style: string } | undefined
/** The page's scripts and style (read once). */
export const pageAssets = () => {
  if (!assets) {
    const dir = path.join(packageDir(), "view")
    assets = {
      scripts: SCRIPTS.map((f) => fs.readFileSync(path.join(dir, f), "utf8")),
      style: fs.readFileSync(path.join(dir, "timeline.css"), "utf8")
    }
  }
  return assets
}

/** The Content-Security-Policy of the page: its own scripts and style, nothing else. */
export const policy = (live: boolean): string => {
  const { scripts, style } = pageAssets()
  return [
    "default-src 'none'",
    `script-src ${scripts.map((s) => `'sha256-${sha256(s)}'`).join(" ")}`,
    `style-src 'sha256-${sha256(style)}'`,
    "img-src data:",
    live ? "connect-src 'self'" : "connect-src 'none'",
    "base-uri 'none'",
    "form-action 'none'"
  ].join("; ")
}

export interface RenderOptions {
  /** A blob's text, when it was fetched (large tool results). */
  readonly blob?: ((hash: string) => string | undefined) | undefined
  /** The path the live page reads its updates from (`muse view --serve`). */
  readonly live?: string | undefined
  /** Said in the page's footer (the command that made it). */
  readonly generatedBy?: string | undefined
}

/** The summary the page draws at once (everything but the details). */
export const summaryOf = (t: Timeline, live: string | undefined, generatedBy: string | undefined) => ({
  v: 1,
  meta: t.meta,
  kinds: KINDS,
  statuses: STATUSES,
  lanes: t.lanes.map(encodeLane),
  marks: t.marks.map(encodeMark),
  usage: t.usage.map(encodeUsage),
  chunk: CHUNK,
  live: live ?? null,
  generatedBy: generatedBy ?? null
})

/** The whole page. */
export const render = (t: Timeline, options: RenderOptions = {}): string => {
  const { scripts, style } = pageAssets()
  const summary = deflate(JSON.stringify(summaryOf(t, options.live, options.generatedBy)))
  const chunks: Array<string> = []
  for (let i = 0; i < t.marks.length; i += CHUNK) {
    const details = t.marks.slice(i, i + CHUNK).map((m) => encodeDetail(Details.of(m, t, options.blob)))
    chunks.push(deflate(JSON.stringify(details)))
  }
  const title = `${t.meta.title || t.meta.session} · muse view`
  return [
    "<!doctype html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="${escapeHtml(policy(options.live !== undefined))}">`,
    '<meta name="referrer" content="no-referrer">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${style}</style>`,
    "</head>",
    "<body>",
    "<noscript>This page draws the session with JavaScript; without it, read the log with: muse log</noscript>",
    `<script type="application/json" id="summary">${scriptJson(summary)}</script>`,
    `<script type="application/json" id="store">${scriptJson(chunks)}</script>`,
    ...scripts.map((script) => `<script>${script}</script>`),
    "</body>",
    "</html>",
    ""
  ].join("\n")
}
