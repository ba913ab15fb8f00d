import type { Prompt } from "@effect/ai"
import { outputText } from "../Tokens.js"

export type Message = Prompt.MessageEncoded

/** The marker a summary message carries in `options.muse.compaction`. */
export interface SummaryState {
  /** Compactions of this agent that wrote a summary so far. */
  readonly n: number
  /** Turns folded into the summary so far. */
  readonly turns: number
  /** Files touched by write/edit tools in the summarized turns, first touch first. */
  readonly files: ReadonlyArray<string>
  /** The latest tool failures in the summarized turns (newest last). */
  readonly errors: ReadonlyArray<string>
}

/**
 * An atomic piece of the context: a user or system message alone, or an assistant message with the
 * tool messages that answer its calls. Compaction keeps or removes whole units, so a tool call is
 * never separated from its result.
 */
export interface Unit {
  readonly messages: ReadonlyArray<Message>
  readonly kind: "user" | "assistant" | "system" | "tool"
  readonly pinned: boolean
  readonly summary: SummaryState | undefined
}

const museOptions = (m: Message): Record<string, unknown> | undefined => {
  const muse = (m.options as Record<string, unknown> | undefined)?.muse
  return typeof muse === "object" && muse !== null ? (muse as Record<string, unknown>) : undefined
}

/** The summary state of a message this plugin wrote, if it is one. */
export const summaryStateOf = (m: Message): SummaryState | undefined => {
  const c = museOptions(m)?.compaction
  if (typeof c !== "object" || c === null) return undefined
  const s = c as Partial<SummaryState>
  return {
    n: typeof s.n === "number" ? s.n : 0,
    turns: typeof s.turns === "number" ? s.turns : 0,
    files: Array.isArray(s.files) ? s.files.filter((f): f is string => typeof f === "string") : [],
    errors: Array.isArray(s.errors) ? s.errors.filter((f): f is string => typeof f === "string") : []
  }
}

/** All the text of a message (text and reasoning parts, or string content). */
export const textOf = (m: Message): string => {
  if (typeof m.content === "string") return m.content
  const out: Array<string> = []
  for (const p of m.content as ReadonlyArray<any>) {
    if (p.type === "text" || p.type === "reasoning") out.push(p.text)
  }
  return out.join("\n")
}

export const PIN_MARKER = "<pinned>"

/** How masked tool outputs and arguments begin. */
export const MASK_PREFIX = "[masked by compaction"

export const isMasked = (value: unknown): boolean => typeof value === "string" && value.startsWith(MASK_PREFIX)

/** A message is pinned by `options.muse.pin`, by a `<pinned>` marker in its text, or by being a system message. */
export const isPinnedMessage = (m: Message): boolean => {
  const pin = museOptions(m)?.pin
  if (pin !== undefined && pin !== false && pin !== null) return true
  if (m.role === "system") return true
  return textOf(m).includes(PIN_MARKER)
}

/** Split messages into units; the first user message that is not a summary is pinned. */
export const toUnits = (messages: ReadonlyArray<Message>): Array<Unit> => {
  const units: Array<{
    messages: Array<Message>
    kind: Unit["kind"]
    pinned: boolean
    summary: SummaryState | undefined
  }> = []
  let firstUserSeen = false
  for (const m of messages) {
    const summary = summaryStateOf(m)
    let pinned = isPinnedMessage(m)
    if (m.role === "user" && !summary && !firstUserSeen) {
      firstUserSeen = true
      pinned = true
    }
    const last = units[units.length - 1]
    if (m.role === "tool" && last && (last.kind === "assistant" || last.kind === "tool")) {
      last.messages.push(m)
      last.pinned ||= pinned
      continue
    }
    units.push({ messages: [m], kind: m.role, pinned: pinned && !summary, summary })
  }
  return units
}

export const flatten = (units: ReadonlyArray<Unit>): Array<Message> => units.flatMap((u) => u.messages)

/** Tool calls of a unit, by id. */
export const callsOf = (unit: Unit): Map<string, Prompt.ToolCallPartEncoded> => {
  const calls = new Map<string, Prompt.ToolCallPartEncoded>()
  for (const m of unit.messages) {
    if (m.role !== "assistant" || typeof m.content === "string") continue
    for (const p of m.content) if (p.type === "tool-call") calls.set(p.id, p)
  }
  return calls
}

/** Tool results of a unit, in order. */
export const resultsOf = (unit: Unit): Array<Prompt.ToolResultPartEncoded> => {
  const out: Array<Prompt.ToolResultPartEncoded> = []
  for (const m of unit.messages) {
    if (typeof m.content === "string") continue
    for (const p of m.content as ReadonlyArray<any>) if (p.type === "tool-result") out.push(p)
  }
  return out
}

/** Cut a text to `max` characters, marking the cut. */
export const clip = (text: string, max: number): string =>
  text.length > max ? `${text.slice(0, Math.max(0, max - 1))}…` : text

/** One line for a tool call: `name {"path":"a.ts"}`, arguments cut short. */
export const describeCall = (name: string, params: unknown, max = 100): string => {
  const args = outputText(params)
  return `${name} ${clip(args.replace(/\s+/g, " "), max)}`
}

const WRITE_TOOL = /(^|[_\-.])(write|edit|create|patch|apply|replace|append|delete|remove|move|rename|multi_?edit)/i

export const defaultIsWriteTool = (name: string): boolean => WRITE_TOOL.test(name)

const PATH_KEYS = ["path", "file", "filePath", "file_path", "filename", "target", "destination", "to", "from"]

const pathsInParams = (params: unknown): Array<string> => {
  if (typeof params !== "object" || params === null) return []
  const p = params as Record<string, unknown>
  const out: Array<string> = []
  for (const k of PATH_KEYS) if (typeof p[k] === "string" && p[k]) out.push(p[k] as string)
  for (const k of ["paths", "files"]) {
    const v = p[k]
    if (Array.isArray(v)) for (const x of v) if (typeof x === "string") out.push(x)
  }
  return out
}

const pathsInResult = (result: unknown): Array<string> => {
  if (typeof result !== "object" || result === null) return []
  const r = result as Record<string, unknown>
  const changes = r.changes
  if (Array.isArray(changes)) {
    return changes.flatMap((c) => (c && typeof c.path === "string" ? [c.path as string] : []))
  }
  return typeof r.path === "string" && "after" in r ? [r.path] : []
}

/** Files a unit touched: arguments of successful write/edit tool calls, and reported changes. */
export const filesTouched = (unit: Unit, isWriteTool: (name: string) => boolean): Array<string> => {
  const calls = callsOf(unit)
  const out: Array<string> = []
  for (const r of resultsOf(unit)) {
    if (r.isFailure) continue
    const fromResult = pathsInResult(r.result)
    if (fromResult.length > 0) out.push(...fromResult)
    else if (isWriteTool(r.name)) out.push(...pathsInParams(calls.get(r.id)?.params))
  }
  return out
}

/** Failed tool results of a unit, one line each. */
export const errorsOf = (unit: Unit): Array<string> => {
  const calls = callsOf(unit)
  return resultsOf(unit)
    .filter((r) => r.isFailure)
    .map((r) => {
      const call = calls.get(r.id)
      const what = call ? describeCall(r.name, call.params, 80) : r.name
      const res = r.result as any
      const message = typeof res?.error === "string" ? res.error : outputText(res)
      return `${what}: ${clip(message.replace(/\s+/g, " "), 240)}`
    })
}

/** Merge lists keeping first occurrence order. */
export const union = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<string> => {
  const seen = new Set(a)
  const out = [...a]
  for (const x of b)
    if (!seen.has(x)) {
      seen.add(x)
      out.push(x)
    }
  return out
}
