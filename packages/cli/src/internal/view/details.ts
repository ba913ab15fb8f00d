/**
 * What the timeline page shows when a mark is clicked: a title, a few rows (agent, times, tokens,
 * exit code…) and sections of text (the prompt excerpt, the tool's input and output, the diff of a
 * file change, the reviewer's critique). Built from the mark's events; every text is escaped with
 * `escapeUnsafe` (line breaks and tabs kept) and cut to a size a page can hold.
 *
 * @example
 * ```ts
 * const detail = Details.of(mark, timeline, (hash) => blobs.get(hash))
 * detail.sections.find((s) => s.kind === "diff")?.text // "--- a/sum.js\n+++ b/sum.js\n…"
 * ```
 */
import { escapeUnsafe, plain } from "../ansi.js"
import * as Render from "../render.js"
import type { Mark, Timeline } from "./timeline.js"

export interface Section {
  readonly title: string
  readonly kind: "text" | "json" | "diff"
  readonly text: string
}

export interface Detail {
  readonly title: string
  readonly rows: ReadonlyArray<readonly [string, string]>
  readonly sections: ReadonlyArray<Section>
}

/** Longest text of one section (a page holds thousands of them). */
export const SECTION_MAX = 4000

/**
 * Text made safe to show over several lines, cut to `max` characters (saying so): its head, or its
 * tail (`"tail"`: a command's output, whose end says how it went).
 */
export const block = (v: unknown, max = SECTION_MAX, keep: "head" | "tail" = "head"): string => {
  const s = typeof v === "string" ? v : v === undefined ? "" : (JSON.stringify(v, null, 2) ?? "")
  const more = `${Render.fmtInt(s.length - max)} more characters (muse log --json has all of it)`
  const cut =
    s.length <= max ? s : keep === "tail" ? `… ${more}\n${s.slice(s.length - max)}` : `${s.slice(0, max)}\n… ${more}`
  return escapeUnsafe(cut, plain, { newlines: true, tabs: "keep" })
}

/** Shorter limits for what is only a reminder in a page: a file read (it is in the repository), a prompt's excerpt. */
const CONTENT_MAX = 1200
const EXCERPT_MAX = 1500
const INPUT_MAX = 2000

const obj = (u: unknown): Record<string, any> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? (u as Record<string, any>) : {}

/** The blobs a mark's details would show (large results and texts), to fetch before `of`. */
export const blobsOf = (m: Mark): Array<string> => {
  const out: Array<string> = []
  for (const e of m.events) {
    const d = obj(e.data)
    if (typeof d.blob === "string") out.push(d.blob)
    if (typeof obj(d.params).blob === "string") out.push(obj(d.params).blob)
  }
  return out
}

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s)

/** The text of one prompt message, for the excerpt. */
const messageText = (m: any): string => {
  const role = String(m?.role ?? "?")
  const parts: Array<any> = Array.isArray(m?.content)
    ? m.content
    : typeof m?.content === "string"
      ? [{ type: "text", text: m.content }]
      : []
  const body = parts
    .map((p) => {
      // what an earlier mark holds whole (the previous response, a tool's call and result) is only recalled here
      if (p?.type === "text") return role === "assistant" ? clip(String(p.text ?? ""), 160) : String(p.text ?? "")
      if (p?.type === "tool-call") return `→ ${p.name}(${clip(JSON.stringify(p.params ?? {}), 160)})`
      if (p?.type === "tool-result") {
        return `← ${p.name}: ${clip(typeof p.result === "string" ? p.result : (JSON.stringify(p.result ?? null) ?? ""), 160)}`
      }
      if (p?.type === "file") return `[file ${p.mediaType ?? ""}]`
      return `[${p?.type ?? "part"}]`
    })
    .join("\n")
  return `— ${role} —\n${body}`
}

const fmtAt = (t0: number, at: number) => {
  const d = new Date(t0 + at)
  const two = (n: number) => String(n).padStart(2, "0")
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`
}

/** The details of one mark. `blob` gives a blob's text when it was fetched. */
export const of = (m: Mark, t: Timeline, blob: (hash: string) => string | undefined = () => undefined): Detail => {
  const rows: Array<readonly [string, string]> = []
  const sections: Array<Section> = []
  // (the agent, the times, the status and the files are in the mark itself: the page shows them from there)
  rows.push(["seq", m.events.map((e) => e.seq).join(", ")])
  const text = (
    title: string,
    v: unknown,
    kind: Section["kind"] = "text",
    max = SECTION_MAX,
    keep: "head" | "tail" = "head"
  ) => {
    const b = block(v, max, keep)
    if (b.trim() !== "") sections.push({ title, kind, text: b })
  }
  const resolved = (d: Record<string, any>): unknown => {
    if (typeof d.blob !== "string") return d.result
    const got = blob(d.blob)
    if (got === undefined)
      return `(${Render.fmtInt(d.bytes ?? 0)} bytes kept in the blob store ${String(d.blob).slice(0, 12)}, not found)\n${d.preview ?? ""}`
    try {
      return obj(JSON.parse(got)).result ?? JSON.parse(got)
    } catch {
      return got
    }
  }
  for (const e of m.events) {
    const d = obj(e.data)
    switch (e.type) {
      case "model.requested": {
        rows.push(["model", String(d.model ?? "")])
        rows.push([
          "prompt",
          `${d.messages ?? "?"} messages (${Array.isArray(d.appended) ? d.appended.length : 0} new)`
        ])
        const appended: Array<unknown> = Array.isArray(d.appended) ? d.appended : []
        text(
          "prompt excerpt (what is new since the previous call)",
          appended.slice(-6).map(messageText).join("\n\n"),
          "text",
          EXCERPT_MAX
        )
        break
      }
      case "model.responded": {
        const u = obj(d.usage)
        rows.push([
          "tokens",
          `${Render.fmtInt(u.inputTokens ?? 0)} in (${Render.fmtInt(u.cachedInputTokens ?? 0)} cached) · ${Render.fmtInt(u.outputTokens ?? 0)} out`
        ])
        if (d.finishReason) rows.push(["finish", String(d.finishReason)])
        text("response", d.text)
        if (Array.isArray(d.toolCalls) && d.toolCalls.length > 0) text("tool calls", d.toolCalls, "json", INPUT_MAX)
        break
      }
      case "model.failed":
        text("error", d.error)
        break
      case "tool.started":
        rows.push(["tool", `${String(d.tool ?? "")} (${String(d.effect ?? "?")})`])
        text("input", d.params, "json", INPUT_MAX)
        break
      case "tool.completed": {
        const r = resolved(d)
        const ro = obj(r)
        if (typeof ro.exit_code === "number") rows.push(["exit code", String(ro.exit_code)])
        if (typeof d.bytes === "number") rows.push(["bytes", Render.fmtInt(d.bytes)])
        if (typeof d.settled === "string") rows.push(["settled", d.settled])
        if (typeof ro.diff === "string" && ro.diff !== "") {
          text(`diff of ${String(ro.path ?? "the file")}`, ro.diff, "diff")
          const { diff: _diff, ...rest } = ro
          text("output", rest, "json")
        } else if (typeof ro.output === "string") {
          text("output", ro.output, "text", SECTION_MAX, "tail")
        } else if (typeof ro.content === "string") {
          text(`content of ${String(ro.path ?? "")}`, ro.content, "text", CONTENT_MAX)
        } else if (d.isFailure) {
          text("error", typeof ro.error === "string" ? ro.error : r)
        } else {
          text("output", r, typeof r === "string" ? "text" : "json")
        }
        if (m.kind === "verdict") {
          const p = obj(obj(m.events[0]?.data).params)
          text("critique", p.critique ?? p.text)
        }
        if (m.kind === "report") {
          const p = obj(obj(m.events[0]?.data).params)
          rows.push(["importance", String(p.importance ?? "info")])
          text("report", p.text)
        }
        break
      }
      case "tool.rejected":
        text("rejected", d.reason)
        break
      case "file.changed":
        rows.push([
          "changed",
          `${escapeUnsafe(String(d.path ?? ""), plain)} ${String(d.before ?? "new").slice(0, 10)} → ${String(d.after ?? "deleted").slice(0, 10)}`
        ])
        break
      case "approval.requested":
        text(
          "question",
          `${d.tool ?? ""} ${d.summary ?? ""}${d.preview ? `\n\n${d.preview}` : ""}`,
          d.preview ? "diff" : "text"
        )
        break
      case "approval.answered":
        rows.push([
          "answer",
          `${d.allow ? "allowed" : "denied"} (${d.scope ?? "once"})${d.reason ? `: ${String(d.reason)}` : ""}`
        ])
        break
      case "approval.decided":
        rows.push([
          "decided",
          `${d.allow ? "allowed" : "denied"} by ${d.by ?? "?"}${d.rule ? ` (${JSON.stringify(d.rule)})` : ""}`
        ])
        if (d.reason) text("reason", d.reason)
        break
      case "user.input":
      case "user.message":
        text(
          e.type === "user.input" ? "input" : "message",
          typeof d.text === "string" ? d.text : (blob(String(d.blob ?? "")) ?? d.preview)
        )
        break
      case "turn.completed":
      case "turn.interrupted": {
        const u = obj(d.usage)
        rows.push(["ended", `${d.status ?? e.type.slice(5)}${d.reason ? `: ${String(d.reason)}` : ""}`])
        if (d.steps !== undefined)
          rows.push([
            "steps",
            `${d.steps} model calls · ${d.toolCalls ?? 0} tool calls · ${Render.fmtInt((u.inputTokens ?? 0) + (u.outputTokens ?? 0))} tokens`
          ])
        text("answer", d.text)
        break
      }
      case "crew.task.received":
        text(
          `${d.kind ?? "task"} from ${d.from ?? "?"}`,
          d.text,
          typeof d.text === "string" && d.text.includes("\n--- a/") ? "diff" : "text"
        )
        break
      case "crew.task.done":
        rows.push(["done", String(d.status ?? "")])
        if (d.review)
          rows.push(["review", `${obj(d.review).verdict ?? "?"} after ${obj(d.review).rounds ?? "?"} round(s)`])
        text("result", d.text)
        break
      case "crew.verdict.received":
        rows.push(["verdict", String(obj(d.data).verdict ?? "?")])
        text("critique", d.text)
        break
      case "crew.reports":
      case "inbox.delivered":
        text("delivered to the agent", d.text)
        break
      default:
        text(e.type, e.data, "json")
    }
  }
  if (m.link !== null) {
    const to = t.get(m.link)
    if (to)
      rows.push([
        "leads to",
        `${to.kind} on ${t.lanes[to.lane]?.name ?? "?"} at ${fmtAt(t.meta.t0, to.start)} (+${Render.fmtDuration(Math.max(0, to.start - m.start))})`
      ])
  }
  return { title: `${m.kind}: ${m.label}`, rows, sections }
}

/** The events whose blobs the details of `marks` show. */
export const allBlobs = (marks: Iterable<Mark>): Array<string> => {
  const out = new Set<string>()
  for (const m of marks) for (const b of blobsOf(m)) out.add(b)
  return [...out]
}
