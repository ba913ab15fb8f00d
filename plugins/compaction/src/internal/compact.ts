import type { Plugin } from "@musekit/core"
import { Effect } from "effect"
import { type Counter, MESSAGE_OVERHEAD, outputText, upperBound } from "../Tokens.js"
import {
  callsOf,
  clip,
  describeCall,
  errorsOf,
  filesTouched,
  flatten,
  MASK_PREFIX,
  type Message,
  type SummaryState,
  textOf,
  toUnits,
  type Unit,
  union
} from "./context.js"
import {
  clipToTokens,
  describeUnit,
  fits,
  parseSections,
  renderSections,
  type Sections,
  summaryBody,
  summaryMessage,
  toolHistogram,
  unitEntries,
  withFiles
} from "./summary.js"

export interface Settings {
  readonly window: number
  readonly trigger: number
  readonly target: number
  readonly reserve: number
  readonly keepObservations: number
  readonly maskMinTokens: number
  readonly maxSummaryTokens: number
  readonly isWriteTool: (name: string) => boolean
  readonly summaryPrompt: string
}

export interface Dropped {
  readonly kind: "masked" | "summarized" | "dropped" | "clipped"
  readonly what: string
  readonly blob?: string | undefined
}

export interface Report {
  readonly before: number
  readonly after: number
  readonly masked: number
  readonly summarized: number
  readonly dropped: ReadonlyArray<Dropped>
  readonly summary: string | null
  readonly fallback: string | null
}

export interface Env {
  readonly counter: Counter
  readonly putBlob: (data: string) => Effect.Effect<string, unknown>
}

const CLIP_MARK = "[clipped by compaction"
/** Tokens of the summary message's header line and framing. */
const SUMMARY_FRAME = 120
const MAX_ERRORS = 5
/** User messages quoted by a mechanical summary (the newest). */
const MAX_QUOTES = 12

const isCompacted = (result: unknown) =>
  typeof result === "string" && (result.startsWith(MASK_PREFIX) || result.includes(CLIP_MARK))

const oneLine = (text: string, max: number) => clip(text.replace(/\s+/g, " ").trim(), max)

/**
 * The most tokens a text of `part` that masking looks at has: a tool output, or a string argument
 * of a tool call (0 when there is none). Exact when it is above `max`; below, a bound may do.
 */
const maskableTokens = (part: any, max: number, counter: Counter): number => {
  if (part?.type === "tool-result") {
    if (isCompacted(part.result)) return 0
    const text = outputText(part.result)
    return fits(counter, text, max) ? 0 : counter.text(text)
  }
  if (part?.type === "tool-call" && typeof part.params === "object" && part.params !== null) {
    if (Array.isArray(part.params)) return 0
    let most = 0
    for (const v of Object.values(part.params as Record<string, unknown>)) {
      if (typeof v === "string" && !v.startsWith(MASK_PREFIX) && !fits(counter, v, max)) {
        most = Math.max(most, counter.text(v))
      }
    }
    return most
  }
  return 0
}

/** Per counter (one per plugin), whether each message has anything to mask under one `max`. */
const maskable = new WeakMap<Counter, { readonly max: number; readonly known: WeakMap<object, boolean> }>()

const messageNeedsMask = (m: Message, max: number, counter: Counter): boolean => {
  if (typeof m.content === "string") return false
  for (const p of m.content as ReadonlyArray<any>) {
    // (a missing part is left to `maskUnit`, which fails on it as it always did)
    if (p === null || p === undefined || maskableTokens(p, max, counter) > max) return true
  }
  return false
}

/**
 * Whether masking would change anything in `unit`. Each message's answer is kept (messages are
 * not changed in place), so the history is not serialized again at every compaction.
 */
const needsMask = (unit: Unit, max: number, counter: Counter): boolean => {
  let cache = maskable.get(counter)
  if (cache === undefined || cache.max !== max) maskable.set(counter, (cache = { max, known: new WeakMap() }))
  for (const m of unit.messages) {
    let needs = cache.known.get(m)
    if (needs === undefined) cache.known.set(m, (needs = messageNeedsMask(m, max, counter)))
    if (needs) return true
  }
  return false
}

/** Replace bulky tool outputs (and bulky string arguments of tool calls) of a unit with stubs. */
const maskUnit = (unit: Unit, settings: Settings, env: Env, dropped: Array<Dropped>) =>
  Effect.gen(function* () {
    const calls = callsOf(unit)
    let changed = false
    const messages: Array<Message> = []
    for (const m of unit.messages) {
      if (typeof m.content === "string") {
        messages.push(m)
        continue
      }
      const parts: Array<any> = []
      let messageChanged = false
      for (const p of m.content as ReadonlyArray<any>) {
        if (p.type === "tool-result" && !isCompacted(p.result)) {
          const text = outputText(p.result)
          if (!fits(env.counter, text, settings.maskMinTokens)) {
            const tokens = env.counter.text(text)
            const blob = yield* env.putBlob(JSON.stringify(p.result ?? null))
            const call = calls.get(p.id)
            const what = call ? describeCall(p.name, call.params, 60) : p.name
            parts.push({
              ...p,
              result: `${MASK_PREFIX}: output of ${what}, ${text.length} chars (~${tokens} tokens)${
                p.isFailure ? ", a failure" : ""
              }, began "${oneLine(text, 80)}"; full output in blob sha256:${blob}]`
            })
            dropped.push({ kind: "masked", what: `${what} → ${text.length} chars`, blob })
            messageChanged = true
            continue
          }
        }
        if (p.type === "tool-call" && typeof p.params === "object" && p.params !== null && !Array.isArray(p.params)) {
          const next: Record<string, unknown> = {}
          let paramsChanged = false
          for (const [k, v] of Object.entries(p.params as Record<string, unknown>)) {
            if (typeof v === "string" && !v.startsWith(MASK_PREFIX) && !fits(env.counter, v, settings.maskMinTokens)) {
              const blob = yield* env.putBlob(v)
              next[k] = `${MASK_PREFIX}: ${v.length} chars; blob sha256:${blob}]`
              dropped.push({ kind: "masked", what: `argument ${k} of ${p.name} (${v.length} chars)`, blob })
              paramsChanged = true
            } else next[k] = v
          }
          if (paramsChanged) {
            parts.push({ ...p, params: next })
            messageChanged = true
            continue
          }
        }
        parts.push(p)
      }
      messages.push(messageChanged ? ({ ...m, content: parts } as Message) : m)
      changed ||= messageChanged
    }
    return changed ? { ...unit, messages } : unit
  })

/**
 * Last resort when the kept turns alone exceed the budget: cut the largest tool outputs of
 * unpinned units to their beginning (the rest goes to the blob store), largest first.
 */
const clipOutputs = (units: Array<Unit>, budget: number, settings: Settings, env: Env, dropped: Array<Dropped>) =>
  Effect.gen(function* () {
    const keepChars = Math.max(400, settings.maskMinTokens * 3)
    while (env.counter.messages(flatten(units)) > budget) {
      let best: { u: number; m: number; p: number; tokens: number } | undefined
      units.forEach((unit, u) => {
        if (unit.pinned || unit.summary) return
        unit.messages.forEach((msg, m) => {
          if (typeof msg.content === "string") return
          ;(msg.content as ReadonlyArray<any>).forEach((part, p) => {
            if (part.type !== "tool-result" || isCompacted(part.result)) return
            const text = outputText(part.result)
            if (text.length <= keepChars + 200) return
            const tokens = env.counter.text(text)
            if (!best || tokens > best.tokens) best = { u, m, p, tokens }
          })
        })
      })
      if (!best) break
      const { u, m, p } = best as { u: number; m: number; p: number }
      const unit = units[u]!
      const msg = unit.messages[m]!
      const part = (msg.content as ReadonlyArray<any>)[p]
      const text = outputText(part.result)
      const blob = yield* env.putBlob(JSON.stringify(part.result ?? null))
      const content = [...(msg.content as ReadonlyArray<any>)]
      content[p] = {
        ...part,
        result: `${text.slice(0, keepChars)}\n${CLIP_MARK}: ${text.length} chars in all; the rest was removed to fit the context window; full output in blob sha256:${blob}]`
      }
      const messages = [...unit.messages]
      messages[m] = { ...msg, content } as Message
      units[u] = { ...unit, messages }
      dropped.push({ kind: "clipped", what: `output of ${part.name} (${text.length} chars)`, blob })
    }
    return units
  })

/** Fit summary sections under `max` tokens: oldest progress lines go first, then long sections are cut. */
const fitSections = (counter: Counter, sections: Sections, max: number): string => {
  let text = renderSections(sections)
  if (fits(counter, text, max)) return text
  const out = new Map(sections)
  const progress = (out.get("Progress") ?? "").split("\n")
  while (progress.length > 3 && !fits(counter, renderSections(out), max)) {
    progress.splice(0, Math.max(1, Math.floor(progress.length / 5)))
    out.set("Progress", ["- (older progress omitted)", ...progress].join("\n"))
  }
  text = renderSections(out)
  if (fits(counter, text, max)) return text
  const share = Math.max(40, Math.floor(max / Math.max(1, out.size)))
  for (const [h, body] of out) {
    if (h !== "Files touched" && !fits(counter, body, share)) out.set(h, clipToTokens(counter, body, share))
  }
  return clipToTokens(counter, renderSections(out), max)
}

interface SummaryInput {
  readonly input: Plugin.ContextInput
  readonly previous: string | undefined
  readonly older: ReadonlyArray<Unit>
  readonly pinned: ReadonlyArray<Unit>
  readonly state: SummaryState
  readonly previousState: SummaryState
}

/** The user message asking the compactor for the new summary, fitted to the window. */
const summaryRequest = (s: SummaryInput, settings: Settings, counter: Counter): string => {
  const max =
    settings.window -
    settings.maxSummaryTokens -
    counter.text(settings.summaryPrompt) -
    3 * MESSAGE_OVERHEAD -
    Math.max(256, Math.floor(settings.window * 0.05))
  const words = Math.max(50, Math.round(settings.maxSummaryTokens * 0.7))
  const head = [
    `Summary ${s.state.n} of the context of agent "${s.input.agent}". Fold the turns below into the summary.`,
    `Write at most ${settings.maxSummaryTokens} tokens (about ${words} words).`,
    "",
    "# Previous summary",
    s.previous ?? "(none: this is the first compaction)",
    ""
  ].join("\n")
  const pinnedBudget = Math.max(200, Math.floor(max / 5))
  const pinnedText = clipToTokens(
    counter,
    s.pinned
      .flatMap((u) => u.messages)
      .map((m) => `[${m.role}] ${clip(textOf(m), 1500)}`)
      .join("\n"),
    pinnedBudget
  )
  const pinned = [
    "# Pinned messages (they stay in the context verbatim; use them, do not copy them)",
    pinnedText || "(none)",
    "",
    "# Files touched so far (from write and edit tool calls)",
    s.state.files.length > 0 ? s.state.files.map((f) => `- ${f}`).join("\n") : "(none)",
    ""
  ].join("\n")
  // Most transcripts fit by their size alone; head and pinned are counted only when one does not.
  const fixedAtMost = upperBound(head) + upperBound(pinned) + 40
  let room: number | undefined
  const roomOf = () => (room ??= Math.max(200, max - (counter.text(head) + counter.text(pinned) + 40)))
  let units = s.older
  let omitted = 0
  for (;;) {
    for (const itemChars of [1500, 600, 240, 100]) {
      const lines = units.flatMap((u) => describeUnit(u, itemChars))
      const transcript = [
        `# Turns to fold in (${s.older.length} turns, oldest first)`,
        ...(omitted > 0
          ? [
              `(${omitted} older turns omitted for length: ${toolHistogram(s.older.slice(0, omitted)) || "no tool calls"})`
            ]
          : []),
        ...lines
      ].join("\n")
      if (
        upperBound(transcript) <= max - fixedAtMost ||
        counter.text(transcript) <= roomOf() ||
        (units.length <= 1 && itemChars === 100)
      ) {
        return `${head}\n${pinned}\n${units.length <= 1 ? clipToTokens(counter, transcript, roomOf()) : transcript}`
      }
    }
    const drop = Math.max(1, Math.floor(units.length / 5))
    units = units.slice(drop)
    omitted += drop
  }
}

/** A summary made without a model: the previous summary carried over plus a record of the removed turns. */
const mechanicalSummary = (s: SummaryInput, reason: string, settings: Settings, counter: Counter): string => {
  const prev = parseSections(s.previous ?? "")
  const sections: Sections = new Map()
  sections.set("Goal", prev.get("Goal") || "As the user's first message says (pinned below).")
  const progress = (prev.get("Progress") ?? "").split("\n").filter((l) => l.trim() && !/^none\.?$/i.test(l.trim()))
  const calls = s.older.reduce((n, u) => n + callsOf(u).size, 0)
  progress.push(
    `- Turns ${s.previousState.turns + 1}–${s.state.turns} were removed without a summary (${oneLine(reason, 160)}): ${calls} tool calls${
      calls > 0 ? ` (${toolHistogram(s.older)})` : ""
    }.`
  )
  // the user's words are binding: they go with the constraints, which are carried over whole
  const said = (prev.get("Constraints from the user") ?? "")
    .split("\n")
    .filter((l) => l.trim() && !/^none\.?$/i.test(l.trim()))
  for (const u of s.older) {
    for (const m of u.messages) {
      const text = oneLine(textOf(m), 240)
      if (m.role === "user" && text) said.push(`- The user wrote: "${text}"`)
      if (m.role === "assistant" && text) progress.push(`- The agent noted: "${text}"`)
    }
  }
  const last = s.older[s.older.length - 1]
  if (last) for (const e of unitEntries(last).slice(-3)) progress.push(`- Last removed step: ${e}`)
  sections.set("Progress", progress.join("\n"))
  for (const h of ["Decisions", "Constraints from the user", "Files touched", "Open todos"]) {
    const body = h === "Constraints from the user" ? said.slice(-MAX_QUOTES).join("\n") : prev.get(h)
    if (body) sections.set(h, body)
  }
  sections.set("Last errors", s.state.errors.length > 0 ? s.state.errors.map((e) => `- ${e}`).join("\n") : "none")
  return fitSections(counter, withFiles(sections, s.state.files), settings.maxSummaryTokens)
}

const modelSummary = (text: string, s: SummaryInput, settings: Settings, counter: Counter): string => {
  const sections = parseSections(text)
  return fitSections(counter, withFiles(sections, s.state.files), settings.maxSummaryTokens)
}

/** Ask the model for the summary; on a model failure, fall back to the mechanical one. */
const writeSummary = (s: SummaryInput, settings: Settings, counter: Counter) =>
  Effect.gen(function* () {
    const request = summaryRequest(s, settings, counter)
    const reply = yield* Effect.either(
      s.input.generate({
        agent: `${s.input.agent}/compactor`,
        system: settings.summaryPrompt,
        messages: [{ role: "user", content: [{ type: "text", text: request }] }]
      })
    )
    if (reply._tag === "Left") {
      // Only a model failure is ours to absorb; a recorder failure (divergence, interruption,
      // the end of a replayed log, a log that cannot be written) belongs to the session.
      if ((reply.left as { _tag?: string })._tag !== "ModelError") return yield* Effect.fail(reply.left)
      const reason = `the summary model failed: ${reply.left.message}`
      return { body: mechanicalSummary(s, reason, settings, counter), fallback: reason }
    }
    const text = reply.right.text.trim()
    if (text.length === 0) {
      const reason = "the summary model returned no text"
      return { body: mechanicalSummary(s, reason, settings, counter), fallback: reason }
    }
    return { body: modelSummary(text, s, settings, counter), fallback: null }
  })

const isLoneUserMessage = (m: Message): boolean =>
  m.role === "user" &&
  (typeof m.content === "string" ||
    (Array.isArray(m.content) &&
      (m.content as ReadonlyArray<any>).every((p) => p?.type !== "tool-result" && p?.type !== "tool-call")))

/**
 * Whether `compact` has anything to consider: the provider refused the request, or the system
 * prompt, the messages and the reply reserve exceed the trigger. A lone user message (such as the
 * compactor's own request) is pinned or a summary and holds no tool output: nothing in it can be
 * masked, folded or clipped, so it is not even counted.
 */
export const needsCompaction = (input: Plugin.ContextInput, settings: Settings, counter: Counter): boolean => {
  if (input.messages.length === 1 && isLoneUserMessage(input.messages[0]!)) return false
  if (input.force) return true
  const before = MESSAGE_OVERHEAD + counter.text(input.system) + counter.messages(input.messages)
  return before + settings.reserve > Math.floor(settings.window * settings.trigger)
}

/**
 * Compact `input.messages` if they exceed the trigger (or `input.force`). `undefined` when nothing
 * was (or could be) done. Deterministic given the input and the compactor's reply.
 */
export const compact = (
  input: Plugin.ContextInput,
  settings: Settings,
  env: Env
): Effect.Effect<{ readonly messages: ReadonlyArray<Message>; readonly report: Report } | undefined, unknown> =>
  Effect.gen(function* () {
    const { counter } = env
    if (!needsCompaction(input, settings, counter)) return undefined
    const count = (ms: ReadonlyArray<Message>) => counter.messages(ms)
    const system = MESSAGE_OVERHEAD + counter.text(input.system)
    const messagesBefore = count(input.messages)
    const before = system + messagesBefore
    let targetAt = Math.floor(settings.window * settings.target)
    // The provider refused the request: whatever our count says, cut the messages at least in half.
    if (input.force) targetAt = Math.min(targetAt, system + settings.reserve + Math.floor(messagesBefore / 2))
    const budget = Math.max(0, targetAt - system - settings.reserve)
    const dropped: Array<Dropped> = []

    // 1. Mask bulky tool observations older than the last `keepObservations` units.
    let units = toUnits(input.messages)
    const maskBefore = units.length - settings.keepObservations
    const maskedUnits: Array<Unit> = []
    for (let i = 0; i < units.length; i++) {
      const u = units[i]!
      const maskable = i < maskBefore && !u.pinned && !u.summary && needsMask(u, settings.maskMinTokens, counter)
      maskedUnits.push(maskable ? yield* maskUnit(u, settings, env, dropped) : u)
    }
    units = maskedUnits
    const masked = dropped.length
    let summarized = 0
    let summary: string | null = null
    let fallback: string | null = null

    // 2. Fold older turns into the summary, keeping pinned units and as many recent units as fit.
    if (count(flatten(units)) > budget) {
      let prevUnit: Unit | undefined
      for (const u of units) if (u.summary) prevUnit = u
      const previousState: SummaryState = prevUnit?.summary ?? { n: 0, turns: 0, files: [], errors: [] }
      const pinnedUnits = units.filter((u) => u.pinned)
      const pinnedTokens = pinnedUnits.reduce((n, u) => n + count(u.messages), 0)
      const room = budget - pinnedTokens - settings.maxSummaryTokens - SUMMARY_FRAME
      let cut = units.length
      let used = 0
      let keptOne = false
      for (let i = units.length - 1; i >= 0; i--) {
        const u = units[i]!
        if (u.summary) break
        if (!u.pinned) {
          const t = count(u.messages)
          if (keptOne && used + t > room) break
          used += t
          keptOne = true
        }
        cut = i
      }
      const older = units.slice(0, cut).filter((u) => !u.pinned && !u.summary)
      const olderTokens = older.reduce((n, u) => n + count(u.messages), 0)
      // Folding a few small turns into a fresh summary gains nothing (the pinned messages alone
      // may be over budget): leave it to the cut below unless the provider has refused.
      if (older.length > 0 && (input.force || olderTokens >= 2 * settings.maskMinTokens)) {
        const state: SummaryState = {
          n: previousState.n + 1,
          turns: previousState.turns + older.length,
          files: union(
            previousState.files,
            older.flatMap((u) => filesTouched(u, settings.isWriteTool))
          ),
          errors: [...previousState.errors, ...older.flatMap(errorsOf)].slice(-MAX_ERRORS)
        }
        const written = yield* writeSummary(
          {
            input,
            previous: prevUnit ? summaryBody(prevUnit.messages[0]!) : undefined,
            older,
            pinned: pinnedUnits,
            state,
            previousState
          },
          settings,
          counter
        )
        summary = written.body
        fallback = written.fallback
        summarized = older.length
        for (const u of older) {
          for (const what of unitEntries(u)) dropped.push({ kind: fallback ? "dropped" : "summarized", what })
        }
        const summaryUnit: Unit = {
          messages: [summaryMessage(written.body, state)],
          kind: "user",
          pinned: false,
          summary: state
        }
        units = [
          summaryUnit,
          ...units.slice(0, cut).filter((u) => u.pinned && !u.summary),
          ...units.slice(cut).filter((u) => !u.summary)
        ]
      }
    }

    // 3. Still too big (huge recent outputs): cut the largest outputs to their beginning.
    if (count(flatten(units)) > budget) units = yield* clipOutputs([...units], budget, settings, env, dropped)
    if (dropped.length === 0) return undefined
    const messages = flatten(units)
    return {
      messages,
      report: { before, after: system + count(messages), masked, summarized, dropped, summary, fallback }
    }
  })
