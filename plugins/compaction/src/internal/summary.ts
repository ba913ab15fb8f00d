import { type Counter, outputText, upperBound } from "../Tokens.js"
import {
  callsOf,
  clip,
  describeCall,
  isMasked,
  type Message,
  resultsOf,
  type SummaryState,
  textOf,
  type Unit
} from "./context.js"

/** The headings the summary prompt asks for, in order. */
export const HEADINGS = [
  "Goal",
  "Progress",
  "Decisions",
  "Constraints from the user",
  "Files touched",
  "Open todos",
  "Last errors"
] as const

export type Sections = Map<string, string>

const normalizeHeading = (h: string) => {
  const lower = h.trim().toLowerCase()
  return HEADINGS.find((x) => x.toLowerCase() === lower) ?? h.trim()
}

/** `## Heading` sections of a Markdown text (text before the first heading goes under ""). */
export const parseSections = (text: string): Sections => {
  const out: Sections = new Map()
  let heading = ""
  let lines: Array<string> = []
  const flush = () => {
    const body = lines.join("\n").trim()
    if (body.length > 0 || heading !== "") out.set(heading, body)
  }
  for (const line of text.split("\n")) {
    const m = /^#{1,3}\s+(.+?)\s*$/.exec(line)
    if (m) {
      flush()
      heading = normalizeHeading(m[1]!)
      lines = []
    } else lines.push(line)
  }
  flush()
  return out
}

export const renderSections = (sections: Sections): string =>
  [...sections.entries()]
    .filter(([h, body]) => h !== "" || body.length > 0)
    .map(([h, body]) => (h === "" ? body : `## ${h}\n${body.length > 0 ? body : "none"}`))
    .join("\n\n")

const SUMMARY_HEADER = /^\[Summary of earlier work[^\]]*\]\s*/

/** The summary body of a summary message (without the header line this plugin adds). */
export const summaryBody = (m: Message): string => textOf(m).replace(SUMMARY_HEADER, "")

/** The message that replaces the compacted turns. */
export const summaryMessage = (body: string, state: SummaryState): Message => ({
  role: "user",
  content: [
    {
      type: "text",
      text: `[Summary of earlier work: ${state.turns} earlier turns of this conversation were replaced by this summary. Pinned messages follow verbatim, then the most recent turns as they were. Tool outputs marked "masked by compaction" were removed from the context; run the tool again if you need them.]\n\n${body}`
    }
  ],
  options: { muse: { compaction: { ...state } } }
})

const MAX_FILES_LISTED = 40

/** Make sure every file in `files` is named in the "Files touched" section. */
export const withFiles = (sections: Sections, files: ReadonlyArray<string>): Sections => {
  const out = new Map(sections)
  const current = out.get("Files touched") ?? ""
  const currentLines = current.split("\n").filter((l) => l.trim().length > 0 && !/^none\.?$/i.test(l.trim()))
  const missing = files.filter((f) => !current.includes(f))
  const listed = [...currentLines, ...missing.map((f) => `- ${f}`)]
  const shown =
    listed.length > MAX_FILES_LISTED
      ? [
          `- (${listed.length - MAX_FILES_LISTED} earlier entries are in the context.compacted events)`,
          ...listed.slice(-MAX_FILES_LISTED)
        ]
      : listed
  out.set("Files touched", shown.length > 0 ? shown.join("\n") : "none")
  // keep the canonical order when the section was missing
  return reorder(out)
}

const reorder = (sections: Sections): Sections => {
  const out: Sections = new Map()
  if (sections.has("")) out.set("", sections.get("")!)
  for (const h of HEADINGS) if (sections.has(h)) out.set(h, sections.get(h)!)
  for (const [h, b] of sections) if (!out.has(h)) out.set(h, b)
  return out
}

/** Whether a text has at most `max` tokens (counted only when its size does not already tell). */
export const fits = (counter: Counter, text: string, max: number): boolean =>
  upperBound(text) <= max || counter.text(text) <= max

/** Cut a text to about `maxTokens`, at a line boundary where possible. */
export const clipToTokens = (counter: Counter, text: string, maxTokens: number): string => {
  if (upperBound(text) <= maxTokens) return text
  let t = counter.text(text)
  if (t <= maxTokens) return text
  let cut = text
  while (t > maxTokens && cut.length > 0) {
    const keep = Math.max(0, Math.floor(cut.length * (maxTokens / t) * 0.95) - 24)
    const nl = cut.lastIndexOf("\n", keep)
    cut = cut.slice(0, nl > keep * 0.8 ? nl : keep)
    t = counter.text(`${cut}\n…(cut to fit)`)
  }
  return `${cut}\n…(cut to fit)`
}

/** One line per part of a unit, for the summarizer's transcript and for mechanical records. */
export const describeUnit = (unit: Unit, itemChars: number): Array<string> => {
  const lines: Array<string> = []
  const calls = callsOf(unit)
  for (const m of unit.messages) {
    if (m.role === "user" || m.role === "system") {
      lines.push(`[${m.role}] ${clip(textOf(m), itemChars)}`)
      continue
    }
    if (m.role === "assistant") {
      const text = textOf(m)
      if (text.trim().length > 0) lines.push(`[assistant] ${clip(text, itemChars)}`)
      if (typeof m.content !== "string") {
        for (const p of m.content) {
          if (p.type === "tool-call") {
            const call = describeCall(p.name, p.params, itemChars).replace(/; blob sha256:[0-9a-f]+\]/g, "]")
            lines.push(`[call ${p.id}] ${call}`)
          }
        }
      }
    }
  }
  for (const r of resultsOf(unit)) {
    const call = calls.get(r.id)
    const label = `[result ${r.id}${call ? "" : ` ${r.name}`} ${r.isFailure ? "FAILED" : "ok"}]`
    // the blob hash of a masked output means nothing to the summarizer
    const text = outputText(r.result).replace(/; full output in blob sha256:[0-9a-f]+\]$/, "]")
    lines.push(`${label} ${clip(text, itemChars)}`)
  }
  return lines
}

/** Short descriptions of what a unit held, for the event's `dropped` list. */
export const unitEntries = (unit: Unit): Array<string> => {
  const out: Array<string> = []
  const results = new Map(resultsOf(unit).map((r) => [r.id, r]))
  for (const m of unit.messages) {
    if (m.role === "user" || m.role === "system") out.push(`${m.role}: ${clip(textOf(m).replace(/\s+/g, " "), 80)}`)
    if (m.role !== "assistant" || typeof m.content === "string") continue
    const text = textOf(m)
    if (text.trim()) out.push(`assistant: ${clip(text.replace(/\s+/g, " "), 80)}`)
    for (const p of m.content) {
      if (p.type !== "tool-call") continue
      const r = results.get(p.id)
      const outcome = !r
        ? "no result"
        : r.isFailure
          ? "failed"
          : isMasked(r.result)
            ? "ok, output masked earlier"
            : `ok, ${outputText(r.result).length} chars`
      out.push(`${describeCall(p.name, p.params, 60)} → ${outcome}`)
    }
  }
  return out
}

/** Counts per tool name, e.g. `read_file ×12, grep ×3`. */
export const toolHistogram = (units: ReadonlyArray<Unit>): string => {
  const counts = new Map<string, number>()
  for (const u of units) for (const c of callsOf(u).values()) counts.set(c.name, (counts.get(c.name) ?? 0) + 1)
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([n, k]) => `${n} ×${k}`)
    .join(", ")
}
